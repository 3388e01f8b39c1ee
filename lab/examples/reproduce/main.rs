//! The reproduction harness: the papers' experiments and the canonical accuracy
//! benchmark (lab/docs/REPRODUCTION.md §1), run in-process through the SAME perturbation
//! ([`Perturber::perturb`](ldpcov_client::Perturber::perturb)) and estimator code
//! ([`estimate`](ldpcov_estimate::estimate),
//! [`estimate_precision`](ldpcov_estimate::estimate_precision)) as the real system. See
//! `lab/docs/REPRODUCTION.md`.
//!
//! One module per paper, named by its authors (the papers' text files are numbered
//! `000`–`004`; the old subcommand names `seed000`, `seed001`, `seed003` stay accepted
//! as hidden aliases): [`wang_xu`] (Wang & Xu, DP-Thresholding), [`papers`] (the
//! heavy-tailed paper, whose stored text names no authors, and the papers'
//! not-private float mechanism), [`su_guo_zhang`] (Su, Guo & Zhang, precision
//! matrices), and Dong, Liang & Yi's central releases in [`central`].
//!
//! **Simulation only**: every noise stream is seeded
//! (`DiscreteGaussianSampler::from_seed_for_simulation`), so nothing produced here is private.
//! Every output row names the simulation path that produced it (`per-user` or
//! `sum-of-noise`, see [`ldpcov_lab::sim`]). Rows of the "paper-faithful" variants
//! (the papers' Δ = 1 noise, no clipping) are labelled `NOT PRIVATE`; that mechanism
//! exists only in this harness (`papers.rs`), never in the product.
//!
//! ```text
//! cargo run --release -p ldpcov-lab --example reproduce -- canonical --reps 20
//! cargo run --release -p ldpcov-lab --example reproduce -- heavy-tails --reps 50
//! cargo run --release -p ldpcov-lab --example reproduce -- wang-xu --reps 5 --plot-dir lab/docs/img
//! cargo run --release -p ldpcov-lab --example reproduce -- su-guo-zhang --reps 10
//! cargo run --release -p ldpcov-lab --example reproduce -- joint --reps 5
//! cargo run --release -p ldpcov-lab --example reproduce -- central --experiment local-vs-central
//! cargo run --release -p ldpcov-lab --example reproduce -- mechanisms --ps 20,100,1000 --ns 100000
//! cargo run --release -p ldpcov-lab --example reproduce -- mean-cov --ps 20,100 --reps 2
//! cargo run --release -p ldpcov-lab --example reproduce -- --json canonical --reps 2 --ns 100000
//! cargo run --release -p ldpcov-lab --example reproduce -- unordered --data wine=/tmp/wine.npy
//! cargo run --release -p ldpcov-lab --example reproduce -- both-norms --data wine=/tmp/wine.npy --model1-ps 1000
//! ```

mod both_norms;
mod canonical;
mod central;
mod joint;
mod mean_cov;
mod mechanisms;
mod papers;
mod plot;
mod radius;
mod su_guo_zhang;
mod unordered;
mod wang_xu;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Command line.
#[derive(Parser)]
#[command(about = "Reproduce the papers' experiments and the canonical benchmark")]
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
    #[command(alias = "seed001")]
    HeavyTails(papers::HeavyTailsArgs),
    /// Wang & Xu's three sweeps (sparsity, p, ε) vs n, with PNG plots.
    #[command(alias = "seed000")]
    WangXu(wang_xu::Args),
    /// Su, Guo & Zhang Tables 1–2 settings (ridge and glasso precision).
    #[command(alias = "seed003")]
    SuGuoZhang(su_guo_zhang::Args),
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
    /// The default against the plain projected average and the trivial estimates
    /// (zero, diagonal, scaled identity) in both norms, with the repetitions' spread:
    /// real data sets and Model 1 at low n.
    BothNorms(both_norms::Args),
    /// The private radius phase against the fixed radius √(2p) on real data sets, at
    /// the same total budget, against the data's own covariance.
    Radius(radius::Args),
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
        Experiment::HeavyTails(a) => papers::run_heavy_tails(&a, out),
        Experiment::WangXu(a) => wang_xu::run(&a, out),
        Experiment::SuGuoZhang(a) => su_guo_zhang::run(&a, out),
        Experiment::Unordered(a) => unordered::run(&a, out),
        Experiment::Joint(a) => joint::run(&a, out),
        Experiment::Central(a) => central::run(&a, out),
        Experiment::Mechanisms(a) => mechanisms::run(&a, out),
        Experiment::MeanCov(a) => mean_cov::run(&a, out),
        Experiment::BothNorms(a) => both_norms::run(&a, out),
        Experiment::Radius(a) => radius::run(&a, out),
    }
}

/// `--mechanism`: the local report mechanism of the simulated collections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MechanismArg {
    /// The Gaussian report with raw off-diagonal products (the weighting these
    /// benchmarks were first measured with, lab/docs/REPRODUCTION.md).
    GaussianTriu,
    /// The Gaussian report with √2-weighted off-diagonals (the default of a new
    /// collection).
    Gaussian,
    /// The pure ε rank-one report (δ = 0; per-user simulation only).
    RankOne,
}

impl MechanismArg {
    /// The spec value.
    pub(crate) fn to_proto(self) -> ldpcov_proto::v1::LocalMechanism {
        use ldpcov_proto::v1::LocalMechanism;
        match self {
            MechanismArg::GaussianTriu => LocalMechanism::GaussianTriu,
            MechanismArg::Gaussian => LocalMechanism::Gaussian,
            MechanismArg::RankOne => LocalMechanism::RankOne,
        }
    }

    /// The simulation collection of dimension `p` at `epsilon`, clip radius `r`
    /// ([`sim::collection`](ldpcov_lab::sim::collection)), with this mechanism, its δ
    /// ([`delta`](Self::delta) of 10⁻⁶) and its own encoding (i16 for the rank-one
    /// report, i32 otherwise); `ordered` declares the variables ordered.
    pub(crate) fn collection(
        self,
        p: usize,
        epsilon: f64,
        r: f64,
        ordered: bool,
    ) -> Result<ldpcov_privacy::Collection, ldpcov_privacy::SpecError> {
        use ldpcov_privacy::Collection;
        use ldpcov_proto::v1::CollectionSpec;
        let base = ldpcov_lab::sim::collection(p, epsilon, 1e-6, r)?;
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
    ) -> anyhow::Result<ldpcov_lab::models::Sampler> {
        use ldpcov_lab::models::Sampler;
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
