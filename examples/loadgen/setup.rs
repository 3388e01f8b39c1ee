//! What both modes share: the data sampler, the aggregator (embedded or remote), an
//! admin client and the collection (reused when it exists, created otherwise).

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use ldpcov::aggregator::EmbeddedServer;
use ldpcov::aggregator::Limits;
use ldpcov::client::AggregatorClient;
use ldpcov::models::{Model, Sampler};
use ldpcov::proto::Collection;
use nalgebra::DMatrix;

use crate::args::Args;

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
    /// The data model.
    pub(crate) model: Model,
    /// The data's true covariance.
    pub(crate) truth: DMatrix<f64>,
    /// Draws one user's vector.
    pub(crate) sampler: Arc<Sampler>,
}

impl Setup {
    /// Builds the data model, starts or reaches the aggregator and gets the
    /// collection.
    pub(crate) async fn prepare(args: &Args) -> Result<Setup> {
        let p = args.dim as usize;
        let model = args.model();
        let scale = model.covariance(p);
        let (tails, truth) = args.tails(&scale);
        let sampler = Arc::new(Sampler::new(&scale, tails).context("data model")?);

        let embedded = match &args.aggregator {
            Some(_) => None,
            None => Some(EmbeddedServer::start(Limits::default()).await?),
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
        let id = args.collection_id();
        // Reuse an existing collection of that id (say, created with the admin CLI).
        let collection = match admin.collection(&id).await {
            Ok(existing) => existing,
            Err(e)
                if e.status()
                    .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
            {
                admin.create_collection(args.spec(&id)).await?;
                admin.collection(&id).await?
            }
            Err(e) => return Err(e.into()),
        };
        if collection.dim != p {
            bail!(
                "collection {id} has dimension {}, not --dim {p}",
                collection.dim
            );
        }
        let reports_before = admin.status(&id).await?.reports;
        if reports_before > 0 {
            tracing::warn!(collection = %id, reports = reports_before, "the collection already held reports before this run");
        }
        Ok(Setup {
            embedded,
            url,
            admin,
            id,
            collection,
            reports_before,
            model,
            truth,
            sampler,
        })
    }
}
