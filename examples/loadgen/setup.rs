//! What both modes share: the users' data (a model's sampler or a data file's rows),
//! the aggregator (embedded or remote), an admin client and the collection (reused when
//! it exists, created otherwise). A data file is read, and refused when bad, before
//! the aggregator is contacted.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use ldpcov::aggregator::{AuthConfig, EmbeddedServer, Limits, MemoryStore, ServeOptions, Token};
use ldpcov::client::{AggregatorClient, random_report_id, trusted_curator_report};
use ldpcov::privacy::Collection;
use ldpcov::proto::v1::{CentralMechanism, CentralRelease, Report};
use ldpcov_lab::data_users::DataUsers;
use ldpcov_lab::models::{Model, Sampler};
use nalgebra::DMatrix;
use rand::Rng;

use crate::args::Args;
use crate::relay::EmbeddedRelay;

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
}

/// One user's report for `collection`: perturbed on the "device" for a local
/// collection, the clipped vector itself for a central one (trusted curator).
pub(crate) fn build_report(
    client: &mut AggregatorClient,
    collection: &Collection,
    x: &[f64],
) -> Result<Report> {
    Ok(if collection.is_central() {
        trusted_curator_report(collection, x, random_report_id()?)?
    } else {
        client.prepare_report(collection, x)?
    })
}

impl Setup {
    /// The release the estimates of a central collection post-process: GaussCov at
    /// `--release-rho` (default: the whole budget); None for a local collection.
    pub(crate) fn release(&self, args: &Args) -> Option<CentralRelease> {
        self.collection.is_central().then(|| CentralRelease {
            mechanism: CentralMechanism::GaussCov as i32,
            rho: args.release_rho.unwrap_or(self.collection.rho()),
            epsilon: 0.0,
            ..Default::default()
        })
    }

    /// Builds the data model, starts or reaches the aggregator and gets the
    /// collection.
    pub(crate) async fn prepare(args: &Args) -> Result<Setup> {
        let (source, dim, clip_radius, users) = match &args.data {
            Some(path) => {
                let data = DataUsers::from_file(path, args.standardize)?;
                let dim = data.check_dim(args.dim)?;
                let radius = data.clip_radius(args.clip_radius)?;
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
        // With --relay the aggregator takes batches from a relay token of this run.
        let relay_token = match shuffle {
            Some(_) => Some(crate::relay::random_secret_hex()?),
            None => None,
        };
        let embedded = match (&args.aggregator, &relay_token) {
            (Some(_), _) => None,
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
        let id = args.collection_id(dim);
        // Reuse an existing collection of that id (say, created with the admin CLI).
        let collection = match admin.collection(&id).await {
            Ok(existing) => existing,
            Err(e)
                if e.status()
                    .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
            {
                admin
                    .create_collection(args.spec(&id, dim, clip_radius, users, shuffle))
                    .await?;
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
        // Only a second-moment collection mis-estimates non-centred data; the default
        // (mean and covariance) does not.
        if let Source::Data { users, .. } = &source
            && !users.is_centred()
            && collection.mean_entries() == 0
        {
            tracing::warn!(
                max_abs_mean_over_sd = users.max_abs_mean_over_sd(),
                tolerance = ldpcov_lab::data_users::CENTRED_TOLERANCE,
                "the data are not centred and collection {id} estimates the second moment (1/n)Σxxᵀ, not the covariance (see the summary's errors against both)"
            );
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
