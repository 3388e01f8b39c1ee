//! Time to build one report on the device: `Perturber::report` (clip, the mechanism's
//! exact noise or draw, encode) with the exact sampler a device uses
//! (`DiscreteGaussianSampler`, ChaCha20): the svec Gaussian report at ε = 1
//! (δ = 10⁻⁶; its cost, one exact draw per entry, hardly depends on ε) at p = 10, 100
//! and 1 000, and the rank-one report (δ = 0) swept over ε = 0.5, 1, 2, 4, 8, 9.37, 12
//! and 16 at p = 20 and 1 000 (both components of its mixture are drawn every report:
//! about 5–6 rounds of p + 1 draws at ε ≤ 2, 8–10 at ε = 8 and 13–14 at ε = 16,
//! `RankOneParams::expected_rounds`). Second moment, each mechanism's own encoding
//! (i32 Gaussian, i16 rank-one).
//!
//! Group `report/two_aggregator`: a two-aggregator collection's whole report
//! (`ReportBuilder::two_aggregator_report`: clip, the central grid, the Prio3 shares and
//! proof, the helper's share sealed with HPKE) at p = 20 and 100, mean and covariance.
//!
//! `cargo bench -p ldpcov-client --bench report -- --warm-up-time 1 --measurement-time 3`
//!
//! The sampler is built once and reused, as a device's is; its tables for the
//! collection's σ are built on the first report (criterion's warm-up).

use criterion::{BenchmarkId, Criterion};
use ldpcov_client::proto::v1::{CollectionSpec, LocalMechanism, PrivacyModel};
use ldpcov_client::{Collection, DiscreteGaussianSampler, Perturber, ReportBuilder, ReportId};
use std::hint::black_box;

/// The Gaussian report's dimensions.
const DIMS: [u32; 4] = [10, 20, 100, 1000];
/// The rank-one report's dimensions.
const RANK_ONE_DIMS: [u32; 2] = [20, 1000];

/// The rank-one report's privacy levels (9.37: the acceptance point at p = 20).
const RANK_ONE_EPSILONS: [f64; 8] = [0.5, 1.0, 2.0, 4.0, 8.0, 9.37, 12.0, 16.0];

fn collection(dim: u32, mechanism: LocalMechanism, epsilon: f64) -> Collection {
    let rank_one = mechanism == LocalMechanism::RankOne;
    Collection::create(&CollectionSpec {
        collection_id: "bench".into(),
        dim,
        epsilon,
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
    let mut cases = vec![("gaussian_svec".to_string(), LocalMechanism::Gaussian, 1.0)];
    for epsilon in RANK_ONE_EPSILONS {
        cases.push((
            format!("rank_one_eps{epsilon}"),
            LocalMechanism::RankOne,
            epsilon,
        ));
    }
    for (name, mechanism, epsilon) in cases {
        let mut group = c.benchmark_group(format!("report/{name}"));
        let dims: &[u32] = if mechanism == LocalMechanism::Gaussian {
            &DIMS
        } else {
            &RANK_ONE_DIMS
        };
        for &dim in dims {
            if dim == 1000 && mechanism == LocalMechanism::Gaussian {
                // 500 500 noisy entries: a few ms each, so fewer samples.
                group.sample_size(10);
            }
            let perturber = Perturber::new(collection(dim, mechanism, epsilon));
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
    two_aggregator(&mut c);
    c.final_summary();
}

/// A two-aggregator report at p = 20 and 100 (no ledger: the bench measures the device's
/// computation, not a disk write).
fn two_aggregator(c: &mut Criterion) {
    let mut group = c.benchmark_group("report/two_aggregator");
    for dim in [20u32, 100] {
        let collection = Collection::create(&CollectionSpec {
            collection_id: "bench".into(),
            dim,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            privacy_model: PrivacyModel::TwoAggregator as i32,
            ..Default::default()
        })
        .expect("valid bench spec");
        let master = ldpcov_seal::MasterSecret::from_bytes([2; 32]);
        let schedule = ldpcov_seal::KeySchedule::new(86_400, 2).expect("a schedule");
        let keys = ldpcov_seal::CollectionKeys::new(&master, "bench", schedule).expect("keys");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let [_, helper_key] = keys.published(now).expect("published keys");
        let mut device = ReportBuilder::new().expect("OS randomness");
        let x: Vec<f64> = (0..dim)
            .map(|i| ((i as f64) * 0.37).sin() / (dim as f64).sqrt())
            .collect();
        group.bench_with_input(BenchmarkId::from_parameter(dim), &x, |b, x| {
            b.iter(|| {
                device
                    .two_aggregator_report(&collection, &helper_key, black_box(x))
                    .expect("a valid input")
            })
        });
    }
    group.finish();
}
