//! Finalize: the time from the accumulators to a released estimate at p = 500, 1000,
//! 2000 (the finalize benchmark of docs/BENCHMARKS.md):
//!
//! * `eigh`: faer's self-adjoint eigendecomposition of the averaged matrix alone, the
//!   part comparable to `numpy.linalg.eigh` (`docs/eigh_reference.py` times numpy on the
//!   same kind of matrix);
//! * `estimate/none`: average + PSD projection (the raw estimator);
//! * `estimate/universal`: Wang & Xu's threshold + PSD projection;
//! * `estimate/cv`: the default + PSD projection of the result. Above p = 200
//!   (`CrossValidation::refit_free_above_dim`) the default is the refit-free choice
//!   by SURE on the full average (one eigendecomposition); p = 500, 1000, 2000;
//! * `estimate/cv-refits`: the 5-fold cross-validation the default runs at p ≤ 200,
//!   forced at these p (every threshold candidate on every fold, one
//!   eigendecomposition per fold for the spectral candidates; no per-candidate PSD
//!   projection above p = 200, see `CrossValidation::project_in_loss_max_dim`);
//!   p = 500 and 1000 only.
//!
//! The accumulator is 5 folds of integer sums drawn around a noisy identity, the
//! shape a real collection has at small n (the cost hardly depends on the values).
//!
//! * `finalize-stacking/estimate/cv` and `…/cv-no-stacking`: the cross-validation at
//!   p = 50, 100, 200 with and without the stacking of the two families, on data that
//!   show off-diagonal signal.
//!
//! `cargo bench -p ldpcov-aggregator --bench finalize -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion};
use ldpcov_estimate::{
    Accumulator, CrossValidation, EstimateOptions, EstimationInput, RegularisationRule,
    UniversalThreshold, average, estimate, symmetric_eigen,
};
use ldpcov_privacy::Collection;
use ldpcov_privacy::layout::triangle_pairs;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use std::hint::black_box;

fn collection(p: usize) -> Collection {
    ldpcov_fixtures::spec("bench", p as u32).collection()
}

/// Five folds of 200 reports each: sums of `2^k/p·δ_ij + N(0, σ_grid²)` per report.
fn accumulator(c: &Collection, seed: u64) -> Accumulator {
    let p = c.dim() as f64;
    accumulator_with(c, seed, 200, |i, j| if i == j { 1.0 / p } else { 0.0 })
}

/// Five folds of `per_fold` reports each: sums of `2^k·m(i, j) + N(0, σ_grid²)` per
/// report.
fn accumulator_with(
    c: &Collection,
    seed: u64,
    per_fold: u64,
    m: impl Fn(usize, usize) -> f64,
) -> Accumulator {
    let p = c.dim();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let noise = Normal::new(0.0, c.sigma_grid() * (per_fold as f64).sqrt()).expect("σ > 0");
    let scale = c.grid_scale() * per_fold as f64;
    let mut acc = Accumulator::new(c.entries(), 5);
    for fold in 0..5 {
        acc.fold_sums[fold] = triangle_pairs(p)
            .map(|(i, j)| (scale * m(i, j) + noise.sample(&mut rng)).round() as i64)
            .collect();
        acc.fold_counts[fold] = per_fold;
        acc.count += per_fold;
    }
    // Sums of squares ≈ n·σ_grid² (the noise dominates), so the CV also scores the
    // entry-adaptive candidates.
    let square = (acc.count as f64 * c.sigma_grid() * c.sigma_grid()) as u128;
    acc.sum_squares = vec![square; c.entries()];
    acc
}

fn finalize(c: &mut Criterion) {
    let mut group = c.benchmark_group("finalize");
    group.sample_size(10);
    for p in [500usize, 1000, 2000] {
        let col = collection(p);
        let acc = accumulator(&col, p as u64);
        let input = EstimationInput::from_collection(&col);
        let m = average(&input, &acc.sums(), acc.count).expect("sums fit");
        group.bench_with_input(BenchmarkId::new("eigh", p), &m, |b, m| {
            b.iter(|| symmetric_eigen(black_box(m)).expect("converges"))
        });
        let rules = [
            ("none", RegularisationRule::None),
            (
                "universal",
                RegularisationRule::Universal(UniversalThreshold::default()),
            ),
            ("cv", RegularisationRule::default()),
            (
                "cv-refits",
                RegularisationRule::CrossValidated(CrossValidation {
                    refit_free_above_dim: usize::MAX,
                    ..Default::default()
                }),
            ),
        ];
        for (name, rule) in rules {
            if name == "cv-refits" && p > 1000 {
                // Tens of seconds per estimate at p = 2000: criterion's ten samples
                // would take minutes.
                continue;
            }
            let options = EstimateOptions {
                rule,
                ..Default::default()
            };
            group.bench_with_input(
                BenchmarkId::new(format!("estimate/{name}"), p),
                &options,
                |b, o| b.iter(|| estimate(&input, black_box(&acc), o).expect("estimate")),
            );
        }
    }
    group.finish();
}

/// The cross-validation (p ≤ 200) with and without the stacking of the two families,
/// on data that show off-diagonal signal (where the stacking runs): blocks of 10
/// equicorrelated variables (ρ = 0.3, second moment `(δ_ij + 0.3·[same block])/p`),
/// 5 × 2·10⁶·(p/50)² reports, so that the off-diagonal entries sit about one noise sd
/// from 0 and the signal z is well above 3 (the released name, printed first, says
/// whether the mixture earned its place). The stacking re-scores two candidates on the five
/// folds and, when the mixture earns its place, builds a second release.
fn stacking(c: &mut Criterion) {
    let mut group = c.benchmark_group("finalize-stacking");
    group.sample_size(10);
    for p in [50usize, 100, 200] {
        let col = collection(p);
        let pf = p as f64;
        // z ∝ n/p² here: the reports grow with p² to keep it near 45.
        let per_fold = 2_000_000 * (p as u64 / 50).pow(2);
        let acc = accumulator_with(&col, p as u64, per_fold, |i, j| {
            let same_block = i / 10 == j / 10;
            (if i == j { 1.0 } else { 0.0 } + if same_block && i != j { 0.3 } else { 0.0 }) / pf
        });
        let input = EstimationInput::from_collection(&col);
        for (name, stack_families) in [("cv", true), ("cv-no-stacking", false)] {
            let options = EstimateOptions {
                rule: RegularisationRule::CrossValidated(CrossValidation {
                    stack_families,
                    ..Default::default()
                }),
                ..Default::default()
            };
            let rule = estimate(&input, &acc, &options).expect("estimate").rule;
            println!("finalize-stacking/estimate/{name}/{p}: {rule}");
            group.bench_with_input(
                BenchmarkId::new(format!("estimate/{name}"), p),
                &options,
                |b, o| b.iter(|| estimate(&input, black_box(&acc), o).expect("estimate")),
            );
        }
    }
    group.finish();
}

criterion::criterion_group!(benches, finalize, stacking);
criterion::criterion_main!(benches);
