//! The command line and what follows from it alone (the data model, the spec).

use anyhow::{Result, bail};
use clap::{Parser, ValueEnum};
use ldpcov::proto::v1::{
    CollectionSpec, Encoding, LocalMechanism, Moments, PrivacyModel, RadiusPhaseSpec, ShuffleSpec,
};
use ldpcov_lab::models::{Model, Tails};
use nalgebra::DMatrix;
use std::path::PathBuf;

/// `--model`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum DataModel {
    /// The heavy-tailed paper's Model 1: σ_ij = 0.6^|i−j|.
    Model1,
    /// The heavy-tailed paper's Model 2: banded 1, 0.6, 0.3.
    Model2,
    /// Wang & Xu's sparse model U = (Ũ + 50 I)/200 (`sparse000`, its old name, is
    /// still accepted).
    #[value(alias = "sparse000")]
    SparseWangXu,
}

/// `--encoding`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum WireEncoding {
    /// 4 bytes per entry, on the fine grid.
    I32,
    /// 2 bytes per entry, stochastically rounded to a coarser grid.
    I16,
    /// 1 byte per entry, stochastically rounded to a coarser grid.
    I8,
}

/// `--moments`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MomentsArg {
    /// The second moment about the centre (reports without the mean block).
    SecondMoment,
    /// The mean and the covariance from one report (the default of a new collection).
    MeanAndCovariance,
}

/// `--mechanism`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MechanismArg {
    /// (ε, δ) Gaussian report, off-diagonal products ×√2 (the default).
    Gaussian,
    /// (ε, δ) Gaussian report, off-diagonal products as they are (the original).
    GaussianTriu,
    /// Pure ε rank-one PrivUnitG report, p i16 numbers (δ = 0).
    RankOne,
}

/// `--privacy-model`.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub(crate) enum PrivacyModelArg {
    /// Every user perturbs its own report (local DP).
    Local,
    /// Trusted curator: users send clipped vectors unperturbed; the estimate is a
    /// GaussCov release of `--release-rho`.
    Central,
    /// No trusted party: users secret-share their clipped vectors between two embedded
    /// aggregators, a leader and a helper, with a Prio3 validity proof; each adds its own
    /// noise to its share of the GaussCov release of `--release-rho`.
    TwoAggregator,
}

/// `--distribution`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Distribution {
    /// Gaussian.
    Gaussian,
    /// Multivariate t with 5 degrees of freedom (the heavy-tailed paper's heavy tails).
    T5,
}

/// The command line.
#[derive(Parser)]
#[command(about = "Simulate many ldpcov users against an aggregator")]
pub(crate) struct Args {
    /// Number of simulated users (one report each) [default: 1000000; with --data,
    /// each row of the file once]. With --data, N rows drawn with replacement
    /// (seeded by --seed).
    #[arg(long)]
    pub(crate) users: Option<u64>,
    /// A data file (CSV with or without a header, or a 2-D `.npy`): each row is one
    /// user's vector; the dimension is the file's and the truth its covariance.
    /// Without --standardize it needs --clip-radius.
    #[arg(long, conflicts_with_all = ["model", "distribution", "sparsity"])]
    pub(crate) data: Option<PathBuf>,
    /// With --data: map each column to mean 0 and sd 1 with the file's own moments
    /// before sending (the truth is then the file's correlation matrix; the clip
    /// radius defaults to √(2p)). A preprocessing of data the operator holds: in a
    /// real deployment the scales must be public.
    #[arg(long, requires = "data")]
    pub(crate) standardize: bool,
    /// Load test: run for this many seconds instead of a fixed number of users
    /// (closed loop of --clients unary submitters; see the file's docs).
    #[arg(long, conflicts_with_all = ["users", "concurrency", "batch"])]
    pub(crate) duration_secs: Option<u64>,
    /// Load test: concurrent clients, each with its own connection [default: 200].
    #[arg(long, requires = "duration_secs")]
    pub(crate) clients: Option<usize>,
    /// Load test: resident memory is also reported after this many seconds
    /// [default: 10].
    #[arg(long, requires = "duration_secs")]
    pub(crate) warmup_secs: Option<u64>,
    /// Load test: process id of the daemon at --aggregator, whose resident memory
    /// is sampled (default: this process, with the embedded server).
    #[arg(long, requires_all = ["duration_secs", "aggregator"])]
    pub(crate) server_pid: Option<u32>,
    /// Dimension p [default: 10; with --data, the file's number of columns].
    #[arg(long)]
    pub(crate) dim: Option<u32>,
    /// ε of each report.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) epsilon: f64,
    /// δ of each report [default: 1e-6; 0, and refused otherwise, for
    /// `--mechanism rank-one`].
    #[arg(long)]
    pub(crate) delta: Option<f64>,
    /// How each user perturbs its report (local collections) [default: gaussian].
    #[arg(long, value_enum)]
    pub(crate) mechanism: Option<MechanismArg>,
    /// What the collection estimates [default: mean-and-covariance].
    #[arg(long, value_enum)]
    pub(crate) moments: Option<MomentsArg>,
    /// Clip radius R (default √(2p), as in the canonical benchmark; required with
    /// --data unless --standardize).
    #[arg(long)]
    pub(crate) clip_radius: Option<f64>,
    /// Public centre c of the collection created, p comma-separated numbers in data
    /// units (as `ldpcov-aggregator create --centre`): devices report
    /// clip((x − c)/R). Choose it from public knowledge of the data's typical values,
    /// not from the data.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub(crate) centre: Vec<f64>,
    /// Data model.
    #[arg(long, value_enum, default_value_t = DataModel::Model1)]
    pub(crate) model: DataModel,
    /// Sparsity sr of the sparse-wang-xu model.
    #[arg(long, default_value_t = 0.2)]
    pub(crate) sparsity: f64,
    /// Tails of the data.
    #[arg(long, value_enum, default_value_t = Distribution::Gaussian)]
    pub(crate) distribution: Distribution,
    /// Wire encoding of the reports (local collections).
    #[arg(long, value_enum, default_value_t = WireEncoding::I32)]
    pub(crate) encoding: WireEncoding,
    /// Who adds the noise when the collection is created: local (each user) or
    /// central (the aggregator, once per release; ε and δ are then the total budget).
    #[arg(long, value_enum, default_value_t = PrivacyModelArg::Local)]
    pub(crate) privacy_model: PrivacyModelArg,
    /// The same as `--privacy-model two-aggregator`: a leader and a helper embedded, as
    /// `--relay` embeds the relay.
    #[arg(long, conflicts_with = "privacy_model")]
    pub(crate) two_aggregators: bool,
    /// Central collections: ρ of the GaussCov release the estimates post-process
    /// (default: the collection's whole budget).
    #[arg(long)]
    pub(crate) release_rho: Option<f64>,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 4)]
    pub(crate) concurrency: usize,
    /// Reports per SubmitReports stream.
    #[arg(long, default_value_t = 1024)]
    pub(crate) batch: usize,
    /// Seed of the data (the privacy noise always comes from the OS).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// URL of a running aggregator (default: start one in-process).
    #[arg(long)]
    pub(crate) aggregator: Option<String>,
    /// Collection id (default: loadgen-<seed>-<dim>).
    #[arg(long)]
    pub(crate) collection: Option<String>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Bearer token for a guarded aggregator (the admin token: loadgen creates the
    /// collection and submits). Default: none.
    #[arg(long, env = "LDPCOV_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// The shuffle model end to end (docs/PRIVACY.md §9): the users seal their
    /// rank-one reports and send them, each with its own device token, through an
    /// embedded `ldpcov-relay`, which forwards shuffled batches to the embedded
    /// aggregator. The collection is a shuffled rank-one one.
    #[arg(long, conflicts_with_all = ["aggregator", "duration_secs", "token"])]
    pub(crate) relay: bool,
    /// Choose the clip radius privately (docs/USAGE.md, "Choosing the clip radius"):
    /// every user first spends this share of its budget (in (0, 1), e.g. 0.1)
    /// reporting its norm's interval to the collection `<id>.radius`; the run closes
    /// it, which sets R, then sends the main reports at the ε left. Local Gaussian
    /// collections and central ones; the candidate radii are the default √p/4 to
    /// 16·√p.
    #[arg(long, conflicts_with_all = ["clip_radius", "relay", "duration_secs"])]
    pub(crate) radius_phase: Option<f64>,
    /// The radius phase's smallest and largest candidate radius, in the data's units
    /// (default √p/4,16·√p, right for coordinates of order 1): give the range the
    /// norms ‖x − c‖ may take when the data's scale is not known.
    #[arg(long, value_delimiter = ',', requires = "radius_phase")]
    pub(crate) radius_phase_range: Vec<f64>,
    /// The radius phase's number of candidate radii (default 13).
    #[arg(long, requires = "radius_phase")]
    pub(crate) radius_phase_radii: Option<u32>,
    /// With --relay: the central ε wanted against the aggregator (at δ = 1e-6); each
    /// report's ε0 is then the largest whose batches of --shuffle-min-batch meet it,
    /// instead of --epsilon.
    #[arg(long, requires = "relay")]
    pub(crate) central_epsilon: Option<f64>,
    /// With --relay: the collection's minimum batch size (default: every user in one
    /// batch).
    #[arg(long, requires = "relay")]
    pub(crate) shuffle_min_batch: Option<u64>,
}

/// The shuffled collection of a `--relay` run: each report's ε0 and the minimum batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShufflePlan {
    pub(crate) local_epsilon: f64,
    pub(crate) min_batch: u64,
}

impl Args {
    /// The arguments as parsed, `--two-aggregators` resolved to its privacy model.
    pub(crate) fn parse_resolved() -> Self {
        Self::parse().resolved()
    }

    /// `--two-aggregators` resolved to its privacy model.
    fn resolved(mut self) -> Self {
        if self.two_aggregators {
            self.privacy_model = PrivacyModelArg::TwoAggregator;
        }
        self
    }

    /// Refuses the combinations clap cannot express.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.users == Some(0)
            || self.concurrency == 0
            || self.batch == 0
            || self.clients == Some(0)
        {
            bail!("--users, --concurrency, --batch and --clients must be at least 1");
        }
        if self.relay
            && (self.privacy_model == PrivacyModelArg::Central
                || self.mechanism.is_some_and(|m| m != MechanismArg::RankOne))
        {
            bail!(
                "--relay needs the rank-one mechanism (pure epsilon): leave --mechanism out or give rank-one"
            );
        }
        if self.shuffle_min_batch.is_some_and(|n| n < 2) {
            bail!("--shuffle-min-batch must be at least 2");
        }
        if self.duration_secs == Some(0) {
            bail!("--duration-secs must be at least 1");
        }
        if self.radius_phase.is_some()
            && (self.privacy_model == PrivacyModelArg::TwoAggregator
                || self.mechanism == Some(MechanismArg::RankOne))
        {
            bail!("--radius-phase is for local Gaussian collections and central ones");
        }
        if !matches!(self.radius_phase_range.len(), 0 | 2) {
            bail!("--radius-phase-range takes two numbers, smallest,largest");
        }
        if self.mechanism.is_some() && self.privacy_model != PrivacyModelArg::Local {
            bail!("--mechanism is for local collections");
        }
        if self.privacy_model == PrivacyModelArg::TwoAggregator
            && (self.relay || self.aggregator.is_some() || self.duration_secs.is_some())
        {
            bail!(
                "--privacy-model two-aggregator runs its two aggregators embedded, in the accuracy run: leave out --relay, --aggregator and --duration-secs"
            );
        }
        if self.mechanism == Some(MechanismArg::RankOne) && self.delta.is_some_and(|d| d != 0.0) {
            bail!("--mechanism rank-one is pure epsilon: leave --delta out");
        }
        // clap drops `requires` when the required flag conflicts with one given (--users).
        if self.duration_secs.is_none()
            && (self.clients.is_some() || self.warmup_secs.is_some() || self.server_pid.is_some())
        {
            bail!(
                "--clients, --warmup-secs and --server-pid need --duration-secs (load test mode)"
            );
        }
        Ok(())
    }

    /// The data model of `--model`.
    pub(crate) fn model(&self) -> Model {
        match self.model {
            DataModel::Model1 => Model::BandedGeometric,
            DataModel::Model2 => Model::Tridiagonal2,
            DataModel::SparseWangXu => Model::SparseWangXu {
                sparsity: self.sparsity,
                seed: self.seed,
            },
        }
    }

    /// The tails of the data and their true covariance, given the model's scale
    /// matrix.
    pub(crate) fn tails(&self, scale: &DMatrix<f64>) -> (Tails, DMatrix<f64>) {
        match self.distribution {
            Distribution::Gaussian => (Tails::Gaussian, scale.clone()),
            // The covariance of a t_ν vector with scale Σ is Σ·ν/(ν−2).
            Distribution::T5 => (Tails::StudentT { nu: 5.0 }, scale * (5.0 / 3.0)),
        }
    }

    /// The collection id (`--collection`, default `loadgen-<seed>-<dim>`).
    pub(crate) fn collection_id(&self, dim: u32) -> String {
        self.collection
            .clone()
            .unwrap_or_else(|| format!("loadgen-{}-{dim}", self.seed))
    }

    /// With `--relay`, for `users` users: ε0 (from `--central-epsilon` when given) and
    /// the minimum batch size.
    pub(crate) fn shuffle_plan(&self, users: u64) -> Result<Option<ShufflePlan>> {
        if !self.relay {
            return Ok(None);
        }
        let min_batch = self.shuffle_min_batch.unwrap_or(users).max(2);
        if min_batch > users {
            bail!(
                "--shuffle-min-batch {min_batch} exceeds the {users} users: no batch would ever be forwarded"
            );
        }
        let local_epsilon = match self.central_epsilon {
            Some(target) => ldpcov::accounting::amplification::local_epsilon_for(
                target,
                min_batch,
                ldpcov::privacy::shuffle::default_central_delta(min_batch),
                ldpcov::privacy::limits::MAX_RANK_ONE_EPSILON,
            )
            .map_err(|e| anyhow::anyhow!("--central-epsilon: {e}"))?,
            None => self.epsilon,
        };
        Ok(Some(ShufflePlan {
            local_epsilon,
            min_batch,
        }))
    }

    /// The spec of the collection created when none of that id exists, for `users`
    /// users of dimension `dim` clipped to `clip_radius` (shuffled with `shuffle`).
    pub(crate) fn spec(
        &self,
        id: &str,
        dim: u32,
        clip_radius: f64,
        users: u64,
        shuffle: Option<ShufflePlan>,
    ) -> CollectionSpec {
        CollectionSpec {
            collection_id: id.to_string(),
            dim,
            epsilon: shuffle.map_or(self.epsilon, |s| s.local_epsilon),
            delta: self.delta(),
            // With a radius phase R is 0 until the phase chooses it.
            clip_radius: if self.radius_phase.is_some() {
                0.0
            } else {
                clip_radius
            },
            centre: self.centre.clone(),
            min_reports: match self.duration_secs {
                Some(_) => 1000,
                None => users.min(1000),
            },
            encoding: match (self.privacy_model, self.encoding) {
                // A central collection's reports are raw vectors, a rank-one
                // collection's are i16.
                (PrivacyModelArg::Central | PrivacyModelArg::TwoAggregator, _) => {
                    Encoding::Unspecified
                }
                _ if self.mechanism == Some(MechanismArg::RankOne) || self.relay => {
                    Encoding::Unspecified
                }
                (_, WireEncoding::I32) => Encoding::I32Le,
                (_, WireEncoding::I16) => Encoding::I16Le,
                (_, WireEncoding::I8) => Encoding::I8,
            } as i32,
            privacy_model: match self.privacy_model {
                PrivacyModelArg::Local => PrivacyModel::Local,
                PrivacyModelArg::Central => PrivacyModel::Central,
                PrivacyModelArg::TwoAggregator => PrivacyModel::TwoAggregator,
            } as i32,
            moments: match self.moments {
                None => Moments::Unspecified,
                Some(MomentsArg::SecondMoment) => Moments::SecondMoment,
                Some(MomentsArg::MeanAndCovariance) => Moments::MeanAndCovariance,
            } as i32,
            local_mechanism: match self.mechanism {
                None if self.relay => LocalMechanism::RankOne,
                None => LocalMechanism::Unspecified,
                Some(MechanismArg::Gaussian) => LocalMechanism::Gaussian,
                Some(MechanismArg::GaussianTriu) => LocalMechanism::GaussianTriu,
                Some(MechanismArg::RankOne) => LocalMechanism::RankOne,
            } as i32,
            // A one-second window: the relay forwards as soon as the users are in.
            shuffle: shuffle.map(|s| ShuffleSpec {
                min_batch_size: s.min_batch,
                batch_window_seconds: 1,
                ..Default::default()
            }),
            radius_phase: self.radius_phase.map(|share| RadiusPhaseSpec {
                share,
                // 0 takes the server's default.
                smallest_radius: self.radius_phase_range.first().copied().unwrap_or(0.0),
                largest_radius: self.radius_phase_range.get(1).copied().unwrap_or(0.0),
                radii: self.radius_phase_radii.unwrap_or(0),
            }),
            ..Default::default()
        }
    }

    /// δ of the collection: `--delta`, else 0 for the rank-one mechanism and 1e-6
    /// otherwise.
    pub(crate) fn delta(&self) -> f64 {
        match (self.delta, self.mechanism) {
            (Some(delta), _) => delta,
            (None, Some(MechanismArg::RankOne)) => 0.0,
            (None, None) if self.relay => 0.0,
            (None, _) => 1e-6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_aggregators_is_the_two_aggregator_privacy_model_and_conflicts_with_another() {
        let args = Args::try_parse_from(["loadgen", "--two-aggregators"]).unwrap();
        assert!(args.resolved().privacy_model == PrivacyModelArg::TwoAggregator);
        let args = Args::try_parse_from(["loadgen"]).unwrap();
        assert!(args.resolved().privacy_model == PrivacyModelArg::Local);
        assert!(
            Args::try_parse_from(["loadgen", "--two-aggregators", "--privacy-model", "central"])
                .is_err()
        );
    }

    /// `--radius-phase` asks the collection for a phase with that share and no radius;
    /// it cannot be given with a radius, and not for another model or mechanism.
    #[test]
    fn radius_phase_creates_a_collection_whose_radius_is_chosen() {
        let args = Args::try_parse_from(["loadgen", "--radius-phase", "0.2"])
            .unwrap()
            .resolved();
        args.validate().unwrap();
        let spec = args.spec("c", 5, 3.0, 100, None);
        assert_eq!(spec.clip_radius, 0.0);
        assert_eq!(spec.radius_phase.unwrap().share, 0.2);
        let args = Args::try_parse_from([
            "loadgen",
            "--radius-phase",
            "0.2",
            "--radius-phase-range",
            "0.01,1000",
            "--radius-phase-radii",
            "31",
        ])
        .unwrap()
        .resolved();
        let phase = args.spec("c", 5, 3.0, 100, None).radius_phase.unwrap();
        assert_eq!(
            (phase.smallest_radius, phase.largest_radius, phase.radii),
            (0.01, 1000.0, 31)
        );
        assert!(Args::try_parse_from(["loadgen", "--radius-phase-range", "1,2"]).is_err());
        assert_eq!(
            Args::try_parse_from(["loadgen"])
                .unwrap()
                .resolved()
                .spec("c", 5, 3.0, 100, None)
                .clip_radius,
            3.0
        );
        assert!(
            Args::try_parse_from(["loadgen", "--radius-phase", "0.2", "--clip-radius", "3"])
                .is_err()
        );
        for other in [
            ["--mechanism", "rank-one"],
            ["--privacy-model", "two-aggregator"],
        ] {
            let args =
                Args::try_parse_from(["loadgen", "--radius-phase", "0.2", other[0], other[1]])
                    .unwrap()
                    .resolved();
            assert!(args.validate().is_err(), "{other:?}");
        }
    }
}
