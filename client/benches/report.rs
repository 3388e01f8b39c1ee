//! Time to build one report on the device: `Perturber::report` (clip, the mechanism's
//! exact noise or draw, encode) with the exact sampler a device uses
//! (`DiscreteGaussianSampler`, ChaCha20), per mechanism at p = 10, 100 and 1 000,
//! ε = 1 (δ = 10⁻⁶ for the Gaussian reports, 0 for the rank-one report), second
//! moment, each mechanism's own encoding (i32 for the Gaussian ones, i16 for rank-one).
//!
//! `cargo bench -p ldpcov-client --bench report -- --warm-up-time 1 --measurement-time 3`
//!
//! The sampler is built once and reused, as a device's is; its tables for the
//! collection's σ are built on the first report (criterion's warm-up).

use criterion::{BenchmarkId, Criterion};
use ldpcov_client::proto::v1::{CollectionSpec, LocalMechanism};
use ldpcov_client::{Collection, DiscreteGaussianSampler, Perturber, ReportId};
use std::hint::black_box;

const DIMS: [u32; 3] = [10, 100, 1000];

fn collection(dim: u32, mechanism: LocalMechanism) -> Collection {
    let rank_one = mechanism == LocalMechanism::RankOne;
    Collection::create(&CollectionSpec {
        collection_id: "bench".into(),
        dim,
        epsilon: 1.0,
        delta: if rank_one { 0.0 } else { 1e-6 },
        clip_radius: 1.0,
        min_reports: 1,
        local_mechanism: mechanism as i32,
        ..Default::default()
    })
    .expect("valid bench spec")
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    for (name, mechanism) in [
        ("gaussian_svec", LocalMechanism::Gaussian),
        ("rank_one", LocalMechanism::RankOne),
    ] {
        let mut group = c.benchmark_group(format!("report/{name}"));
        for dim in DIMS {
            if dim == 1000 && mechanism == LocalMechanism::Gaussian {
                // 500 500 noisy entries: a few ms each, so fewer samples.
                group.sample_size(10);
            }
            let perturber = Perturber::new(collection(dim, mechanism));
            let x: Vec<f64> = (0..dim)
                .map(|i| ((i as f64) * 0.37).sin() / (dim as f64).sqrt())
                .collect();
            let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(1);
            group.bench_with_input(BenchmarkId::from_parameter(dim), &x, |b, x| {
                b.iter(|| {
                    perturber
                        .report(black_box(x), &mut noise, ReportId([7; 16]))
                        .expect("a valid input")
                })
            });
        }
        group.finish();
    }
    c.final_summary();
}
