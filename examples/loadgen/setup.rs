//! What both modes share: the users' data (a model's sampler or a data file's rows),
//! the aggregator (embedded or remote), an admin client and the collection (reused when
//! it exists, created otherwise). A data file is read, and refused when bad, before
//! the aggregator is contacted.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use ldpcov::aggregator::two_aggregator::{LeaderConfig, PeerSecret, TwoAggregatorRole};
use ldpcov::aggregator::{AuthConfig, EmbeddedServer, Limits, MemoryStore, ServeOptions, Token};
use ldpcov::client::{
    AggregatorClient, random_report_id, trusted_curator_radius_phase_report, trusted_curator_report,
};
use ldpcov::privacy::Collection;
use ldpcov::proto::v1::{CentralMechanism, CentralRelease, Report};
use ldpcov_lab::data_users::DataUsers;
use ldpcov_lab::models::{Model, Sampler};
use nalgebra::DMatrix;
use rand::Rng;

use crate::args::{Args, PrivacyModelArg};
use crate::relay::EmbeddedRelay;
use crate::report::DataPlacement;

/// Where the users' vectors come from.
pub(crate) enum Source {
    /// A data model (`--model`, `--distribution`).
    Model {
        /// The model.
        model: Model,
        /// Draws one user's vector.
        sampler: Sampler,
    },
    /// The rows of `--data FILE`.
    Data {
        /// The file as given.
        path: String,
        /// Its rows (standardized with `--standardize`) and moments.
        users: DataUsers,
        /// The row of each user of the accuracy run, in order.
        rows: Vec<usize>,
    },
}

impl Source {
    /// One user's vector for the load test: a model draw, or a row drawn uniformly
    /// with replacement.
    pub(crate) fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        match self {
            Source::Model { sampler, .. } => sampler.sample(rng),
            Source::Data { users, .. } => users.random_row(rng).to_vec(),
        }
    }

    /// The name printed with the results: the model's, or `data <FILE>`.
    pub(crate) fn name(&self) -> String {
        match self {
            Source::Model { model, .. } => model.name(),
            Source::Data { path, users, .. } if users.standardized() => {
                format!("data {path} (standardized)")
            }
            Source::Data { path, .. } => format!("data {path}"),
        }
    }
}

/// A ready run: the server, the collection and the data.
pub(crate) struct Setup {
    /// The in-process server, unless `--aggregator` named one.
    pub(crate) embedded: Option<EmbeddedServer>,
    /// The aggregator's URL.
    pub(crate) url: String,
    /// Creates the collection and reads its status and estimates.
    pub(crate) admin: AggregatorClient,
    /// The collection id.
    pub(crate) id: String,
    /// The collection as the server derived it.
    pub(crate) collection: Collection,
    /// Reports the collection held before this run.
    pub(crate) reports_before: u64,
    /// The users' data.
    pub(crate) source: Arc<Source>,
    /// Users of the accuracy run (`--users`, or the file's rows).
    pub(crate) users: u64,
    /// What the estimate is scored against: the model's covariance, or the file's
    /// covariance (correlation with `--standardize`).
    pub(crate) truth: DMatrix<f64>,
    /// With `--relay`: the embedded relay the users send through.
    pub(crate) relay: Option<EmbeddedRelay>,
    /// With `--privacy-model two-aggregator`: the embedded helper (`embedded` is the
    /// leader).
    pub(crate) helper: Option<EmbeddedServer>,
}

/// One user's report for `collection`: perturbed on the "device" for a local
/// collection (its norm's interval while its radius is being chosen), the clipped
/// vector itself for a central one (trusted curator).
pub(crate) fn build_report(
    client: &mut AggregatorClient,
    collection: &Collection,
    x: &[f64],
) -> Result<Report> {
    Ok(if collection.is_central() && collection.radius_pending() {
        trusted_curator_radius_phase_report(collection, x, random_report_id()?)?
    } else if collection.is_central() {
        trusted_curator_report(collection, x, random_report_id()?)?
    } else if collection.radius_pending() {
        client.prepare_radius_phase_report(collection, x)?
    } else {
        client.prepare_report(collection, x)?
    })
}

impl Setup {
    /// The release the estimates of a central collection post-process: GaussCov at
    /// `--release-rho` (default: the whole budget); None for a local collection.
    pub(crate) fn release(&self, args: &Args) -> Option<CentralRelease> {
        (self.collection.is_central() || self.collection.is_two_aggregator()).then(|| {
            CentralRelease {
                mechanism: CentralMechanism::GaussCov as i32,
                rho: args.release_rho.unwrap_or(self.collection.rho()),
                epsilon: 0.0,
                ..Default::default()
            }
        })
    }

    /// Builds the data model, starts or reaches the aggregator and gets the
    /// collection.
    pub(crate) async fn prepare(args: &Args) -> Result<Setup> {
        let (source, dim, clip_radius, users) = match &args.data {
            Some(path) => {
                let data = DataUsers::from_file(path, args.standardize)?;
                let dim = data.check_dim(args.dim)?;
                // With a radius phase the collection's R is chosen by it.
                let radius = match args.radius_phase {
                    Some(_) => 0.0,
                    None => data.clip_radius(args.clip_radius)?,
                };
                let rows = data.user_rows(args.users, args.seed);
                let users = rows.len() as u64;
                let source = Source::Data {
                    path: path.display().to_string(),
                    users: data,
                    rows,
                };
                (source, dim, radius, users)
            }
            None => {
                let dim = args.dim.unwrap_or(10);
                let model = args.model();
                let scale = model.covariance(dim as usize);
                let (tails, _) = args.tails(&scale);
                let sampler = Sampler::new(&scale, tails).context("data model")?;
                let radius = args
                    .clip_radius
                    .unwrap_or_else(|| (2.0 * f64::from(dim)).sqrt());
                (
                    Source::Model { model, sampler },
                    dim,
                    radius,
                    args.users.unwrap_or(1_000_000),
                )
            }
        };
        let truth = match &source {
            Source::Model { model, .. } => args.tails(&model.covariance(dim as usize)).1,
            Source::Data { users, .. } => users.truth().clone(),
        };
        let p = dim as usize;

        let shuffle = args.shuffle_plan(users)?;
        // The secret a two-aggregator run's leader and helper share, drawn for this run.
        let peer = Arc::new(PeerSecret::generate()?);
        // With --relay the aggregator takes batches from a relay token of this run.
        let relay_token = match shuffle {
            Some(_) => Some(crate::relay::random_secret_hex()?),
            None => None,
        };
        // Two aggregators: the helper first, then the leader that verifies with it.
        let helper = match args.privacy_model {
            PrivacyModelArg::TwoAggregator => Some(
                EmbeddedServer::start_with_options(
                    Arc::new(MemoryStore::new()),
                    ServeOptions {
                        two_aggregator: Some(TwoAggregatorRole::Helper {
                            peer: Arc::clone(&peer),
                        }),
                        ..ServeOptions::default()
                    },
                )
                .await?,
            ),
            _ => None,
        };
        let embedded = match (&args.aggregator, &relay_token) {
            (Some(_), _) => None,
            (None, _) if helper.is_some() => Some(
                EmbeddedServer::start_with_options(
                    Arc::new(MemoryStore::new()),
                    ServeOptions {
                        two_aggregator: Some(TwoAggregatorRole::Leader(LeaderConfig {
                            helper_url: helper
                                .as_ref()
                                .map(EmbeddedServer::url)
                                .unwrap_or_default(),
                            helper_tls: None,
                            peer: Arc::clone(&peer),
                        })),
                        ..ServeOptions::default()
                    },
                )
                .await?,
            ),
            (None, Some(token)) => {
                let auth =
                    AuthConfig::default().with_relay_tokens(vec![Token::new(token, "relay")?])?;
                Some(
                    EmbeddedServer::start_with_options(
                        Arc::new(MemoryStore::new()),
                        ServeOptions {
                            auth: Arc::new(auth),
                            ..ServeOptions::default()
                        },
                    )
                    .await?,
                )
            }
            (None, None) => Some(EmbeddedServer::start(Limits::default()).await?),
        };
        let url = match (&args.aggregator, &embedded) {
            (Some(u), _) => u.clone(),
            (None, Some(e)) => e.url(),
            (None, None) => unreachable!("embedded server started above"),
        };
        let mut admin = AggregatorClient::connect(url.clone()).await?;
        if let Some(token) = &args.token {
            admin = admin.with_token(token.clone())?;
        }
        if let Some(helper) = &helper {
            admin = admin
                .with_helper(tonic::transport::Endpoint::from_shared(helper.url())?.connect_lazy());
        }
        let id = args.collection_id(dim);
        // Reuse an existing collection of that id (say, created with the admin CLI).
        let collection = match admin.collection(&id).await {
            Ok(existing) => existing,
            Err(e)
                if e.status()
                    .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
            {
                let spec = args.spec(&id, dim, clip_radius, users, shuffle);
                if let Some(helper) = &helper {
                    // The helper's operator creates it first; the leader checks it there.
                    AggregatorClient::connect(helper.url())
                        .await?
                        .create_collection(spec.clone())
                        .await?;
                }
                admin.create_collection(spec).await?;
                admin.collection(&id).await?
            }
            Err(e) => return Err(e.into()),
        };
        if collection.dim() != p {
            bail!(
                "collection {id} has dimension {}, not {p}",
                collection.dim()
            );
        }
        if let Source::Data { users, .. } = &source {
            for warning in data_warnings(users, &collection, &id) {
                tracing::warn!("{warning}");
            }
        }
        let reports_before = admin.status(&id).await?.reports;
        if reports_before > 0 {
            tracing::warn!(collection = %id, reports = reports_before, "the collection already held reports before this run");
        }
        let relay = match &relay_token {
            // The embedded relay's floor is the collection's own minimum: this run
            // operates both sides.
            Some(token) => Some(
                EmbeddedRelay::start(
                    &url,
                    token,
                    collection.shuffle().map_or(2, |s| s.min_batch_size()),
                )
                .await?,
            ),
            None => None,
        };
        Ok(Setup {
            helper,
            relay,
            embedded,
            url,
            admin,
            id,
            collection,
            reports_before,
            source: Arc::new(source),
            users,
            truth,
        })
    }
}

/// What the run must say about a data file's rows against `collection` (named `id`),
/// taken about its public centre as its devices take them:
///
/// * rows not centred about 0, some beyond R, and no centre: each device clips its row
///   toward the mean's direction, so the released covariance shrinks toward 0 (is ≈ 0
///   when nearly every row is clipped) and the second moment is the mean's; the cure
///   is a public centre (`--centre`);
/// * rows not centred about the centre and a second-moment collection: the estimate
///   is the second moment about the centre, not the covariance (the default
///   mean-and-covariance collection is unaffected).
pub(crate) fn data_warnings(users: &DataUsers, collection: &Collection, id: &str) -> Vec<String> {
    let placement = DataPlacement::of(users, collection);
    let mut warnings = Vec::new();
    if placement.centre.is_empty() && !placement.centred && placement.clipped_fraction > 0.0 {
        warnings.push(format!(
            "the data are not centred about 0 (max |mean|/sd = {:.3}) and collection {id} has no public centre: each device clips its row to the radius R = {} around 0, which clips {:.2}% of the rows toward the direction of the mean, so the released covariance shrinks toward 0 (about 0 when nearly every row is clipped) and is dominated by the mean; give the collection a public centre near the data's typical values, chosen from public knowledge and not from the data (--centre c1,...,cp here, or `ldpcov-aggregator create --centre`), or use --standardize",
            placement.max_abs_mean_over_sd,
            collection.clip_radius(),
            100.0 * placement.clipped_fraction
        ));
    }
    if !placement.centred && collection.mean_entries() == 0 {
        warnings.push(format!(
            "the data are not centred about {} (max |mean|/sd = {:.3}, tolerance {}) and collection {id} estimates the second moment about it, not the covariance (see the summary's errors against both)",
            if placement.centre.is_empty() { "0" } else { "the collection's centre" },
            placement.max_abs_mean_over_sd,
            placement.centred_tolerance
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov::proto::v1::{CollectionSpec, Moments};
    use ldpcov_lab::data::DataSet;

    /// Rows (100 ± 1, 200 ± 1) far from 0, and a collection of radius 3 with `centre`.
    fn placed(centre: Vec<f64>, moments: Moments) -> (DataUsers, Collection) {
        let data = DataSet::from_csv_str("a,b\n99,199\n101,201\n99,201\n101,199\n").unwrap();
        let users = DataUsers::new(data, false).unwrap();
        let collection = Collection::create(&CollectionSpec {
            collection_id: "c".into(),
            dim: 2,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 3.0,
            min_reports: 1,
            centre,
            moments: moments as i32,
            ..Default::default()
        })
        .unwrap();
        (users, collection)
    }

    #[test]
    fn the_summary_clips_and_centres_about_the_public_centre() {
        let (users, collection) = placed(vec![100.0, 200.0], Moments::Unspecified);
        let p = DataPlacement::of(&users, &collection);
        // Every row is √2 from the centre: none is clipped at R = 3, and the rows are
        // centred about it (about 0 every row would be clipped, none centred).
        assert_eq!((p.clipped_fraction, p.centred), (0.0, true));
        assert_eq!(p.centre, [100.0, 200.0]);
        assert!(data_warnings(&users, &collection, "c").is_empty());
        let (users, collection) = placed(vec![], Moments::Unspecified);
        let p = DataPlacement::of(&users, &collection);
        assert_eq!((p.clipped_fraction, p.centred), (1.0, false));
    }

    #[test]
    fn uncentred_data_without_a_centre_warn_and_name_the_centre_flag() {
        let (users, collection) = placed(vec![], Moments::Unspecified);
        let warnings = data_warnings(&users, &collection, "c");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let w = &warnings[0];
        for part in [
            "no public centre",
            "100.00% of the rows",
            "--centre",
            "toward 0",
        ] {
            assert!(w.contains(part), "{part:?} in {w}");
        }
        // A second-moment collection adds its own warning.
        let (users, collection) = placed(vec![], Moments::SecondMoment);
        let warnings = data_warnings(&users, &collection, "c");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[1].contains("second moment about it"),
            "{}",
            warnings[1]
        );
    }
}
