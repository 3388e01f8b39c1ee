//! The reproduction harness: the seed papers' experiments and the canonical accuracy
//! benchmark (docs/REPRODUCTION.md §1), run in-process through the SAME perturbation
//! ([`Perturber::perturb`](ldpcov::client::Perturber::perturb)) and estimator code
//! ([`estimate`](ldpcov::estimate::estimate),
//! [`estimate_precision`](ldpcov::estimate::estimate_precision)) as the real system. See `docs/REPRODUCTION.md`.
//!
//! **Simulation only**: every noise stream is seeded
//! (`DiscreteGaussianSampler::from_seed_for_simulation`), so nothing produced here is private.
//! Every output row names the simulation path that produced it (`per-user` or
//! `sum-of-noise`, see [`ldpcov::sim`]). Rows of the "paper-faithful" variants
//! (the papers' Δ = 1 noise, no clipping) are labelled `NOT PRIVATE`; that mechanism
//! exists only in this harness (`papers.rs`), never in the product.
//!
//! ```text
//! cargo run --release --example reproduce -- canonical --reps 20
//! cargo run --release --example reproduce -- seed001 --reps 50
//! cargo run --release --example reproduce -- seed000 --reps 5 --plot-dir docs/img
//! cargo run --release --example reproduce -- seed003 --reps 10
//! cargo run --release --example reproduce -- joint --reps 5
//! cargo run --release --example reproduce -- central --experiment local-vs-central
//! cargo run --release --example reproduce -- mechanisms --ps 20,100,1000 --ns 100000
//! cargo run --release --example reproduce -- mean-cov --ps 20,100 --reps 2
//! cargo run --release --example reproduce -- --json canonical --reps 2 --ns 100000
//! cargo run --release --example reproduce -- unordered --data wine=/tmp/wine.npy
//! ```

mod canonical;
mod central;
mod joint;
mod mean_cov;
mod mechanisms;
mod papers;
mod plot;
mod seed000;
mod seed003;
mod unordered;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Command line.
#[derive(Parser)]
#[command(about = "Reproduce the seed papers' experiments and the canonical benchmark")]
struct Args {
    /// Print one JSON object per result row instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Worker threads (repetitions run in parallel).
    #[arg(long, global = true, default_value_t = 2)]
    threads: usize,
    /// Which experiment.
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(Subcommand)]
enum Experiment {
    /// The canonical accuracy benchmark (Models 1/2, p = 20, δ = 1e-6).
    Canonical(canonical::Args),
    /// The heavy-tailed paper Tables 1–6, paper-faithful (NOT PRIVATE) next to private.
    Seed001(papers::Seed001Args),
    /// Wang & Xu's three sweeps (sparsity, p, ε) vs n, with PNG plots.
    Seed000(seed000::Args),
    /// Su, Guo & Zhang Tables 1–2 settings (ridge and glasso precision).
    Seed003(seed003::Args),
    /// The default on unordered structures (factor, block, sparse, permuted models,
    /// real data) against none+PSD, universal c = 4 and an oracle.
    Unordered(unordered::Args),
    /// Non-centred data: mean and covariance vs the second moment, with and without a
    /// public centre (Model 1 shifted, p = 20).
    Joint(joint::Args),
    /// The local mechanisms side by side at equal n: raw average and default
    /// estimate, bytes, users for a target error (p × ε grid).
    Mechanisms(mechanisms::Args),
    /// Mean-and-covariance collections with the rank-one report: one one-sided report
    /// at ε vs a split ε (symmetric report for the second moment, one-sided for the
    /// mean), raw Σ̂ errors against the analytic prediction.
    MeanCov(mean_cov::Args),
    /// Central (trusted-aggregator) releases: local vs central at equal (ε, δ, n), and
    /// Dong, Liang & Yi's GaussCov / SeparateCov trends.
    Central(central::Args),
}

/// How results are printed.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    /// JSON lines instead of tables.
    pub(crate) json: bool,
    /// Worker threads.
    pub(crate) threads: usize,
}

impl Out {
    /// Prints one JSON row (JSON mode only).
    pub(crate) fn row(&self, value: serde_json::Value) {
        if self.json {
            println!("{value}");
        }
    }

    /// Prints a line of the readable table (table mode only).
    pub(crate) fn text(&self, line: impl AsRef<str>) {
        if !self.json {
            println!("{}", line.as_ref());
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let out = Out {
        json: args.json,
        threads: args.threads.max(1),
    };
    match args.experiment {
        Experiment::Canonical(a) => canonical::run(&a, out),
        Experiment::Seed001(a) => papers::run_seed001(&a, out),
        Experiment::Seed000(a) => seed000::run(&a, out),
        Experiment::Seed003(a) => seed003::run(&a, out),
        Experiment::Unordered(a) => unordered::run(&a, out),
        Experiment::Joint(a) => joint::run(&a, out),
        Experiment::Central(a) => central::run(&a, out),
        Experiment::Mechanisms(a) => mechanisms::run(&a, out),
        Experiment::MeanCov(a) => mean_cov::run(&a, out),
    }
}

/// `--mechanism`: the local report mechanism of the simulated collections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MechanismArg {
    /// The Gaussian report with raw off-diagonal products (the weighting these
    /// benchmarks were first measured with, docs/REPRODUCTION.md).
    GaussianTriu,
    /// The Gaussian report with √2-weighted off-diagonals (the default of a new
    /// collection).
    Gaussian,
    /// The pure ε rank-one report (δ = 0; per-user simulation only).
    RankOne,
}

impl MechanismArg {
    /// The spec value.
    pub(crate) fn to_proto(self) -> ldpcov::proto::v1::LocalMechanism {
        use ldpcov::proto::v1::LocalMechanism;
        match self {
            MechanismArg::GaussianTriu => LocalMechanism::GaussianTriu,
            MechanismArg::Gaussian => LocalMechanism::Gaussian,
            MechanismArg::RankOne => LocalMechanism::RankOne,
        }
    }

    /// The simulation collection of dimension `p` at `epsilon`, clip radius `r`
    /// ([`sim::collection`](ldpcov::sim::collection)), with this mechanism, its δ
    /// ([`delta`](Self::delta) of 10⁻⁶) and its own encoding (i16 for the rank-one
    /// report, i32 otherwise); `ordered` declares the variables ordered.
    pub(crate) fn collection(
        self,
        p: usize,
        epsilon: f64,
        r: f64,
        ordered: bool,
    ) -> Result<ldpcov::privacy::Collection, ldpcov::privacy::SpecError> {
        use ldpcov::privacy::Collection;
        use ldpcov::proto::v1::CollectionSpec;
        let base = ldpcov::sim::collection(p, epsilon, 1e-6, r)?;
        Collection::from_spec(&CollectionSpec {
            ordered_variables: ordered,
            local_mechanism: self.to_proto() as i32,
            delta: self.delta(1e-6),
            encoding: 0,
            ..base.spec()
        })
    }

    /// The CLI spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            MechanismArg::GaussianTriu => "gaussian-triu",
            MechanismArg::Gaussian => "gaussian",
            MechanismArg::RankOne => "rank-one",
        }
    }

    /// δ of the collection: 0 for the pure ε mechanism, `delta` otherwise.
    pub(crate) fn delta(self, delta: f64) -> f64 {
        if self == MechanismArg::RankOne {
            0.0
        } else {
            delta
        }
    }
}

/// `--user-data`: how the per-user path draws its users.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum UserData {
    /// `N(0, Σ)`, clipped at the collection's radius as real data are: the estimand is
    /// the clipped second moment `M ≼ Σ`, and every estimator carries the clipping
    /// bias `Σ − M` on top of its own error.
    Gaussian,
    /// `±√(tr Σ)·v_k` with probability `λ_k / tr Σ` (`Sampler::eigen_mixture`): second
    /// moment exactly Σ and no user clipped, the per-user counterpart of the
    /// population fast path (which also has `M = Σ`). Not a model of real data.
    Unclipped,
}

impl UserData {
    /// The sampler for target Σ under clip radius `r`; the unclipped mixture needs
    /// `tr Σ ≤ r²` (else it would be clipped too).
    pub(crate) fn sampler(
        self,
        sigma: &nalgebra::DMatrix<f64>,
        r: f64,
    ) -> anyhow::Result<ldpcov::models::Sampler> {
        use ldpcov::models::Sampler;
        Ok(match self {
            UserData::Gaussian => Sampler::gaussian(sigma)?,
            UserData::Unclipped => {
                anyhow::ensure!(
                    sigma.trace() <= r * r * (1.0 + 1e-12),
                    "--user-data unclipped needs tr Σ ≤ R² (tr Σ = {}, R² = {})",
                    sigma.trace(),
                    r * r
                );
                Sampler::eigen_mixture(sigma)?
            }
        })
    }

    /// The name printed in the results.
    pub(crate) fn name(self) -> &'static str {
        match self {
            UserData::Gaussian => "users N(0, Σ), clipped",
            UserData::Unclipped => "users from the unclipped eigen-axis mixture (M = Σ)",
        }
    }
}

/// The candidate (and its β) the cross-validation chose, from an estimate's rule name,
/// without the per-run "(5 folds, off-diagonal signal z = …)"; empty for a rule that
/// is not a cross-validation's.
pub(crate) fn chosen_candidate(rule: &str) -> String {
    let chosen = rule.split('→').nth(1).unwrap_or("");
    chosen.split(" (").next().unwrap_or("").trim().to_string()
}

/// A stable seed from a few integers (SplitMix64 finaliser over a running hash).
pub(crate) fn seed_of(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for &p in parts {
        h ^= p.wrapping_add(0x9E37_79B9_7F4A_7C15);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
    }
    h
}
