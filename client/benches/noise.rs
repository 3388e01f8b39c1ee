//! Noise samplers, in draws per second (criterion's "thrpt" in elements/s):
//!
//! * `rounded_gaussian`: the float sampler (`FloatGaussianNotPrivate`, ChaCha20 + ziggurat);
//! * `exact_chacha20`: the exact discrete Gaussian as the perturber would use it
//!   (`DiscreteGaussianSampler::sample_grid`: ChaCha20, bit reservoir, cached table);
//! * `exact_chacha20_word_per_draw`: the same, but each draw starts from a fresh 64-bit
//!   word (`DiscreteGaussian::sample`, no bit reservoir shared across draws);
//! * `exact_chacha12`: the exact sampler on ChaCha12 (rand's `StdRng` cipher), to show
//!   what the cipher costs;
//! * `cks20_reference`: the straightforward big-integer CKS20 Algorithm 3;
//! * `build`: building the exact sampler's table for one σ (paid once per σ);
//! * `chacha20_u64`, `chacha12_u64`: the bare generators, one 64-bit word per element;
//! * `perturb_p100/*`: a whole `Perturber::perturb` of a p = 100 vector (5050 noisy
//!   entries at ε = 1, δ = 10⁻⁶, σ ≈ 1.0·10⁸ grid units), per entry;
//!
//! at σ ∈ {3, 10⁶, 10⁸} grid units (10⁸ ≈ the noise sd at ε = 1 on a 2⁻²⁴ grid).
//!
//! `cargo bench -p ldpcov-client --bench noise -- --warm-up-time 1 --measurement-time 3`
//!
//! On a shared machine wall time mostly measures the scheduler: with
//! `NOISE_BENCH_CLOCK=thread-cpu` (Linux) the same benchmarks are timed with the
//! benchmark thread's CPU time instead (group `noise_cpu`).

use criterion::measurement::Measurement;
use criterion::{BenchmarkId, Criterion, Throughput};
use ldpcov_client::proto::v1::CollectionSpec;
use ldpcov_client::{
    Collection, DiscreteGaussian, DiscreteGaussianSampler, FloatGaussianNotPrivate, NoiseSampler,
    Perturber, Sigma2,
};
use ldpcov_noise::{RandomBits, cks20};
use rand::{RngCore, SeedableRng};
use rand_chacha::{ChaCha12Rng, ChaCha20Rng};
use std::hint::black_box;

const SIGMAS: [f64; 3] = [3.0, 1e6, 1e8];

fn batch<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let mut group = c.benchmark_group(name);
    const WORDS: u64 = 10_000;
    group.throughput(Throughput::Elements(WORDS));
    group.bench_function("chacha20_u64", |b| {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        b.iter(|| (0..WORDS).fold(0u64, |acc, _| acc ^ rng.next_u64()));
    });
    group.bench_function("chacha12_u64", |b| {
        let mut rng = ChaCha12Rng::seed_from_u64(1);
        b.iter(|| (0..WORDS).fold(0u64, |acc, _| acc ^ rng.next_u64()));
    });
    for sigma in SIGMAS {
        const N: u64 = 10_000;
        group.throughput(Throughput::Elements(N));
        group.bench_with_input(
            BenchmarkId::new("rounded_gaussian", sigma),
            &sigma,
            |b, &s| {
                let mut g = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(1);
                b.iter(|| (0..N).fold(0i64, |acc, _| acc ^ g.sample_grid(black_box(s))));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("exact_chacha20", sigma),
            &sigma,
            |b, &s| {
                let mut g = DiscreteGaussianSampler::from_seed_for_simulation(1);
                b.iter(|| (0..N).fold(0i64, |acc, _| acc ^ g.sample_grid(black_box(s))));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("exact_chacha20_word_per_draw", sigma),
            &sigma,
            |b, &s| {
                let dist = DiscreteGaussian::from_sigma(s).unwrap();
                let mut rng = ChaCha20Rng::seed_from_u64(1);
                b.iter(|| (0..N).fold(0i64, |acc, _| acc ^ dist.sample(&mut rng)));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("exact_chacha12", sigma),
            &sigma,
            |b, &s| {
                let dist = DiscreteGaussian::from_sigma(s).unwrap();
                let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(1));
                b.iter(|| (0..N).fold(0i64, |acc, _| acc ^ dist.sample_bits(&mut bits)));
            },
        );
        const M: u64 = 200;
        group.throughput(Throughput::Elements(M));
        group.bench_with_input(
            BenchmarkId::new("cks20_reference", sigma),
            &sigma,
            |b, &s| {
                let s2 = Sigma2::from_sigma(s).unwrap();
                let mut rng = ChaCha12Rng::seed_from_u64(1);
                b.iter(|| {
                    (0..M).fold(0i64, |acc, _| acc ^ cks20::discrete_gaussian(&mut rng, &s2))
                });
            },
        );
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("build", sigma), &sigma, |b, &s| {
            b.iter(|| DiscreteGaussian::from_sigma(black_box(s)).unwrap());
        });
    }
    group.finish();

    let collection = Collection::from_spec(&CollectionSpec {
        collection_id: "bench".into(),
        dim: 100,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 1.0,
        min_reports: 1,
        encoding: 0,
        ..Default::default()
    })
    .unwrap();
    let perturber = Perturber::new(collection.clone());
    let x: Vec<f64> = (0..100).map(|i| ((i as f64) * 0.37).sin() * 0.1).collect();
    let mut group = c.benchmark_group(format!("{name}/perturb_p100"));
    group.throughput(Throughput::Elements(collection.entries() as u64));
    group.bench_function("rounded_gaussian", |b| {
        let mut g = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(1);
        b.iter(|| perturber.perturb(black_box(&x), &mut g).unwrap());
    });
    group.bench_function("exact_chacha20", |b| {
        let mut g = DiscreteGaussianSampler::from_seed_for_simulation(1);
        b.iter(|| perturber.perturb(black_box(&x), &mut g).unwrap());
    });
    group.finish();
}

fn main() {
    if std::env::var("NOISE_BENCH_CLOCK").as_deref() == Ok("thread-cpu") {
        let mut c = Criterion::default()
            .with_measurement(cpu_time::ThreadCpuTime)
            .configure_from_args();
        batch(&mut c, "noise_cpu");
        c.final_summary();
    } else {
        let mut c = Criterion::default().configure_from_args();
        batch(&mut c, "noise");
        c.final_summary();
    }
}

/// The benchmark thread's CPU time (the `cpu-time` crate's `ThreadTime`), in nanoseconds.
mod cpu_time {
    use criterion::Throughput;
    use criterion::measurement::{Measurement, ValueFormatter};

    pub(crate) struct ThreadCpuTime;

    /// The calling thread's CPU time so far, in nanoseconds (`cpu-time` reads the
    /// platform's thread clock, `CLOCK_THREAD_CPUTIME_ID` on Linux).
    fn now_ns() -> u64 {
        u64::try_from(::cpu_time::ThreadTime::now().as_duration().as_nanos())
            .expect("thread CPU time below 584 years")
    }

    impl Measurement for ThreadCpuTime {
        type Intermediate = u64;
        type Value = u64;
        fn start(&self) -> u64 {
            now_ns()
        }
        fn end(&self, start: u64) -> u64 {
            now_ns() - start
        }
        fn add(&self, a: &u64, b: &u64) -> u64 {
            a + b
        }
        fn zero(&self) -> u64 {
            0
        }
        fn to_f64(&self, v: &u64) -> f64 {
            *v as f64
        }
        fn formatter(&self) -> &dyn ValueFormatter {
            &Nanoseconds
        }
    }

    struct Nanoseconds;

    impl ValueFormatter for Nanoseconds {
        fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
            let (factor, unit) = match ns {
                x if x < 1e3 => (1.0, "ns"),
                x if x < 1e6 => (1e-3, "µs"),
                x if x < 1e9 => (1e-6, "ms"),
                _ => (1e-9, "s"),
            };
            values.iter_mut().for_each(|v| *v *= factor);
            unit
        }

        fn scale_throughputs(
            &self,
            typical: f64,
            throughput: &Throughput,
            values: &mut [f64],
        ) -> &'static str {
            let count = match *throughput {
                Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => n,
                Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Bits(n) => n,
            } as f64;
            let (den, unit) = match count * 1e9 / typical {
                x if x < 1e3 => (1.0, " elem/s"),
                x if x < 1e6 => (1e3, "Kelem/s"),
                x if x < 1e9 => (1e6, "Melem/s"),
                _ => (1e9, "Gelem/s"),
            };
            values.iter_mut().for_each(|v| *v = count * 1e9 / *v / den);
            unit
        }

        fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
            "ns"
        }
    }
}
