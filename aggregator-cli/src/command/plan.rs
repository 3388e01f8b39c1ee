//! `plan`: before collecting anything, the predicted error of the raw average and the
//! bytes per report of each local mechanism at (p, ε, δ, R, n), or the users a target
//! error needs; with `--shuffle-batch`, the central (ε, δ) of a rank-one collection
//! whose reports arrive shuffled; with `--norms-file`, the radius that balances noise and
//! clipping bias for a public sample of norms; with `--users`, the error of a central
//! (trusted-curator) and a two-aggregator collection's release at the whole budget.
//! Computed here, from the same derivation a daemon and
//! a device make (`ldpcov_privacy::plan`); no daemon is contacted.

use anyhow::{Result, bail};
use ldpcov_privacy::Collection;
use ldpcov_privacy::collection::Entry;
use ldpcov_privacy::plan;
use ldpcov_proto::v1::{CollectionSpec, Encoding, PrivacyModel};

use super::admin::print_json;
use super::create::{MechanismArg, MomentsArg};

/// The flags of `plan`.
#[derive(clap::Args)]
pub(crate) struct Options {
    /// Dimension p of each user's vector.
    #[arg(long)]
    dim: u32,
    /// ε of one report (not with --central-epsilon, which chooses it).
    #[arg(
        long,
        required_unless_present = "central_epsilon",
        conflicts_with = "central_epsilon"
    )]
    epsilon: Option<f64>,
    /// δ of one report for the Gaussian mechanisms (the rank-one mechanism is pure ε).
    #[arg(long, default_value_t = 1e-6)]
    delta: f64,
    /// Clip radius R: the errors are in data units, R² times the unit-ball ones.
    #[arg(long, default_value_t = 1.0)]
    clip_radius: f64,
    /// What the collection estimates (the mean block adds noise to a Gaussian report
    /// and changes the rank-one mechanism's cap).
    #[arg(long, value_enum, default_value_t = MomentsArg::SecondMoment)]
    moments: MomentsArg,
    /// One mechanism only (default: each of them).
    #[arg(long, value_enum)]
    mechanism: Option<MechanismArg>,
    /// Users expected: print the predicted error of the raw average at this n.
    #[arg(long)]
    users: Option<u64>,
    /// Target error (Frobenius norm of the raw average's noise, data units): print the
    /// users each mechanism needs.
    #[arg(long)]
    target_error: Option<f64>,
    /// The users' mean squared norm E‖x‖²/R² after clipping, in [0, 1] (the rank-one
    /// mechanism's noise grows with it; 1 is its worst case).
    #[arg(long, default_value_t = 1.0)]
    mean_square_norm: f64,
    /// Wire encoding of the Gaussian reports (the rank-one report is always i16).
    #[arg(long, value_enum, default_value_t = super::create::WireEncoding::I32)]
    encoding: super::create::WireEncoding,
    /// Reports reach the aggregator shuffled, in batches of at least this many: print
    /// the central (ε, δ) against the aggregator (rank-one mechanism only).
    #[arg(long)]
    shuffle_batch: Option<u64>,
    /// The central δ at which `--shuffle-batch` states ε (default: the largest power
    /// of ten at most 1/(10·batch) and 1e-6, as a new collection gets; refused at
    /// 1/batch or more).
    #[arg(long)]
    shuffle_delta: Option<f64>,
    /// With --shuffle-batch: the central ε wanted; the plan uses the largest ε0 (at
    /// most 10) whose batches meet it.
    #[arg(long, requires = "shuffle_batch")]
    central_epsilon: Option<f64>,
    /// A file of users' norms ‖x − c‖ about the collection's centre, one number per
    /// line, from a PUBLIC sample or a model (never the collection's own data): with
    /// --users, print for --clip-radius and the sample's quantiles the noise, a bound
    /// on the clipping bias and the radius whose sum is smallest.
    #[arg(long, requires = "users")]
    norms_file: Option<std::path::PathBuf>,
}

/// Reads one non-negative number per line (blank lines skipped).
fn read_norms(path: &std::path::Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--norms-file {}: {e}", path.display()))?;
    let mut norms = Vec::new();
    for (line, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => norms.push(v),
            _ => bail!(
                "--norms-file {} line {}: {raw:?} is not a norm (a finite number >= 0)",
                path.display(),
                line + 1
            ),
        }
    }
    if norms.is_empty() {
        bail!("--norms-file {} holds no norms", path.display());
    }
    Ok(norms)
}

impl Options {
    /// Derives each mechanism's collection and prints the plan as JSON.
    pub(crate) fn run(self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.mean_square_norm) {
            bail!(
                "--mean-square-norm {} must lie in [0, 1]",
                self.mean_square_norm
            );
        }
        if let Some(target) = self.target_error
            && !(target.is_finite() && target > 0.0)
        {
            bail!("--target-error {target} must be a positive number");
        }
        if self.users.is_none() && self.target_error.is_none() {
            bail!("give --users N (the error at n users) or --target-error E (the users it needs)");
        }
        if self.users == Some(0) {
            bail!("--users must be at least 1");
        }
        if self.shuffle_batch.is_some() && self.mechanism != Some(MechanismArg::RankOne) {
            bail!(
                "--shuffle-batch needs --mechanism rank-one: the shuffling bound is for pure epsilon0 reports, and a Gaussian report's delta0 > 0 would add about n*delta0 to the central delta"
            );
        }
        let shuffle_delta = match (self.shuffle_delta, self.shuffle_batch) {
            (Some(d), Some(n)) if d * n as f64 >= 1.0 => bail!(
                "--shuffle-delta {d} is at least 1/{n}: a central delta of 1/n or more allows one report in the clear per batch"
            ),
            (Some(d), _) => d,
            (None, n) => ldpcov_privacy::shuffle::default_central_delta(n.unwrap_or(1)),
        };
        let epsilon = match (self.epsilon, self.central_epsilon, self.shuffle_batch) {
            (Some(e), _, _) => e,
            (None, Some(target), Some(n)) => ldpcov_accounting::amplification::local_epsilon_for(
                target,
                n,
                shuffle_delta,
                ldpcov_privacy::limits::MAX_RANK_ONE_EPSILON,
            )
            .map_err(|e| anyhow::anyhow!("--central-epsilon: {e}"))?,
            _ => bail!("give --epsilon, or --central-epsilon with --shuffle-batch"),
        };
        // The candidate radii: --clip-radius and the public sample's quantiles.
        let norms = match &self.norms_file {
            Some(path) => {
                let norms = read_norms(path)?;
                let mut radii = plan::quantile_radii(&norms);
                radii.push(self.clip_radius);
                radii.sort_by(f64::total_cmp);
                radii.dedup();
                Some((norms, radii))
            }
            None => None,
        };
        let mechanisms = match self.mechanism {
            Some(m) => vec![m],
            None => vec![
                MechanismArg::Gaussian,
                MechanismArg::GaussianTriu,
                MechanismArg::RankOne,
            ],
        };
        let mut rows = Vec::new();
        for mechanism in mechanisms {
            let rank_one = mechanism == MechanismArg::RankOne;
            let spec = CollectionSpec {
                collection_id: "plan".into(),
                dim: self.dim,
                epsilon,
                delta: if rank_one { 0.0 } else { self.delta },
                clip_radius: self.clip_radius,
                min_reports: 1,
                moments: self.moments.to_proto() as i32,
                encoding: if rank_one {
                    Encoding::Unspecified
                } else {
                    self.encoding.to_proto()
                } as i32,
                local_mechanism: mechanism.to_proto() as i32,
                ..Default::default()
            };
            let c = Collection::create(&spec)
                .map_err(|e| anyhow::anyhow!("{}: {e}", mechanism.to_proto().as_str_name()))?;
            let r2 = c.clip_radius() * c.clip_radius();
            let shuffled = match self.shuffle_batch {
                Some(n) => {
                    let s = plan::shuffled_privacy(&c, n, shuffle_delta)
                        .map_err(|e| anyhow::anyhow!("--shuffle-batch: {e}"))?;
                    Some(serde_json::json!({
                        "min_batch": s.min_batch,
                        "local_epsilon": s.local_epsilon,
                        "central_epsilon": s.central_epsilon,
                        "central_delta": s.central_delta,
                    }))
                }
                None => None,
            };
            let radius_plan = match (&norms, self.users) {
                (Some((norms, radii)), Some(n)) => {
                    let candidates = plan::radius_tradeoff(&spec, n, norms, radii)
                        .map_err(|e| anyhow::anyhow!("--norms-file: {e}"))?;
                    let best = plan::best_radius(&candidates).map(|b| b.radius);
                    Some(serde_json::json!({
                        "candidates": candidates.iter().map(|c| serde_json::json!({
                            "radius": c.radius,
                            "noise": c.noise,
                            "clipping_bias_bound": c.clipping_bias_bound,
                            "total": c.total(),
                        })).collect::<Vec<_>>(),
                        "best_radius": best,
                    }))
                }
                _ => None,
            };
            rows.push(serde_json::json!({
                "mechanism": c.mechanism().local_mechanism().as_str_name(),
                "epsilon": c.epsilon(),
                "delta": c.delta(),
                "bytes_per_report": c.payload_bytes(),
                "off_diagonal_noise_sd_per_report": r2 * c.unbiased_report_noise_sd(Entry::OffDiagonal),
                "diagonal_noise_sd_per_report": r2 * c.unbiased_report_noise_sd(Entry::Diagonal),
                "raw_average_frobenius_error": self.users.map(|n| plan::raw_average_error(&c, n, self.mean_square_norm)),
                "users_for_target_error": self.target_error.map(|t| plan::users_for_error(&c, t, self.mean_square_norm)),
                "shuffled": shuffled,
                "radius_plan": radius_plan,
            }));
        }
        // The models without noise on the device, at the whole release budget: a trusted
        // curator, and two aggregators each adding its own noise.
        let mut releases = Vec::new();
        if let Some(n) = self.users {
            for model in [PrivacyModel::Central, PrivacyModel::TwoAggregator] {
                let c = Collection::create(&CollectionSpec {
                    collection_id: "plan".into(),
                    dim: self.dim,
                    epsilon,
                    delta: self.delta,
                    clip_radius: self.clip_radius,
                    min_reports: 1,
                    moments: self.moments.to_proto() as i32,
                    privacy_model: model as i32,
                    ..Default::default()
                })
                .map_err(|e| anyhow::anyhow!("{}: {e}", model.as_str_name()))?;
                releases.push(serde_json::json!({
                    "privacy_model": model.as_str_name(),
                    "release": "gauss_cov",
                    "rho": c.rho(),
                    "frobenius_error": plan::release_error(&c, n, c.rho()),
                }));
            }
        }
        print_json(&serde_json::json!({
            "releases": releases,
            "dim": self.dim,
            "clip_radius": self.clip_radius,
            "moments": self.moments.to_proto().as_str_name(),
            "users": self.users,
            "target_error": self.target_error,
            "mean_square_norm": self.mean_square_norm,
            "mechanisms": rows,
        }))
    }
}
