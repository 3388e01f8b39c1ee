//! End to end through the real gRPC server with the PostgreSQL store: two aggregator
//! replicas (`EmbeddedServer`s, each over its own `PostgresStore`) on one database of a
//! throwaway cluster, fed by the real client crate, against an in-memory aggregator fed
//! the very same reports. The estimates must be equal, and a database that goes away
//! must give UNAVAILABLE.

use std::sync::Arc;
use std::time::Duration;

use ldpcov_aggregator::{EmbeddedServer, Limits, MemoryStore, PostgresConfig, PostgresStore};
use ldpcov_client::{AggregatorClient, ClientError, DiscreteGaussianSampler, RetryPolicy};
use ldpcov_pg_cluster::PgCluster;
use ldpcov_proto::v1::{CollectionSpec, Encoding, GetEstimateRequest, Report};
use rand::{Rng, SeedableRng};

const ID: &str = "e2e";
const DIM: u32 = 5;
const REPORTS: usize = 120;

fn spec() -> CollectionSpec {
    // The default moments: mean and covariance, p + d entries per report.
    ldpcov_fixtures::spec(ID, DIM)
        .epsilon(2.0)
        .min_reports(50)
        .encoding(Encoding::I32Le)
        .build()
}

async fn client(url: String) -> AggregatorClient {
    AggregatorClient::connect(url)
        .await
        .expect("connect")
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            11,
        )))
}

/// Sends `reports` to `client`: the first half one by one, the rest on one stream;
/// then resends the first ten (retries of the same reports).
async fn send(client: &mut AggregatorClient, reports: &[Report]) {
    let half = reports.len() / 2;
    for r in &reports[..half] {
        let outcome = client.submit_report(r.clone()).await.expect("submit");
        assert!(!outcome.duplicate);
    }
    let streamed = client
        .submit_stream(reports[half..].to_vec())
        .await
        .expect("stream");
    assert_eq!(streamed.accepted as usize, reports.len() - half);
    for r in &reports[..10] {
        assert!(client.submit_report(r.clone()).await.unwrap().duplicate);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_estimate_exactly_what_the_memory_store_does() {
    let mut pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("e2e");
    let limits = Limits { max_dim: 16 };
    // No background folding: the first estimates read deltas only, the ones after an
    // explicit fold the base only; both must equal the memory store's.
    let config = PostgresConfig {
        connect_timeout: Duration::from_secs(2),
        fold_interval: Duration::ZERO,
        ..PostgresConfig::default()
    };
    let store_a = Arc::new(PostgresStore::open(&url, config).await.expect("open a"));
    let replica_a = EmbeddedServer::start_with_store(store_a.clone(), limits)
        .await
        .expect("replica a");
    let replica_b = EmbeddedServer::start_with_store(
        Arc::new(PostgresStore::open(&url, config).await.expect("open b")),
        limits,
    )
    .await
    .expect("replica b");
    let memory = EmbeddedServer::start_with_store(Arc::new(MemoryStore::new()), limits)
        .await
        .expect("memory server");

    let mut a = client(replica_a.url()).await;
    let mut b = client(replica_b.url()).await;
    let mut m = client(memory.url()).await;
    a.create_collection(spec()).await.expect("create on a");
    m.create_collection(spec()).await.expect("create on memory");
    // Replica b sees the collection replica a created.
    let collection = b.collection(ID).await.expect("collection via b");

    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let reports: Vec<Report> = (0..REPORTS)
        .map(|_| {
            let x: Vec<f64> = (0..DIM).map(|_| rng.random_range(-0.6..0.6)).collect();
            a.prepare_report(&collection, &x).expect("prepare")
        })
        .collect();
    // The replicas share the reports, concurrently; then 20 of replica b's go to
    // replica a too: already counted, they are duplicates there.
    let (first, second) = reports.split_at(REPORTS / 2);
    tokio::join!(send(&mut a, first), send(&mut b, second));
    let overlap = a.submit_stream(second[..20].to_vec()).await.unwrap();
    assert_eq!((overlap.accepted, overlap.duplicates), (0, 20));
    send(&mut m, &reports).await;

    let request = GetEstimateRequest {
        collection_id: ID.into(),
        ..Default::default()
    };
    let from_memory = m.estimate(request.clone()).await.expect("memory estimate");
    assert_eq!(from_memory.reports, REPORTS as u64);
    let from_a = a.estimate(request.clone()).await.expect("estimate via a");
    let from_b = b.estimate(request.clone()).await.expect("estimate via b");
    // Byte for byte: an undefined correlation is NaN, which is never == itself.
    let bytes = |e: &ldpcov_proto::v1::Estimate| prost::Message::encode_to_vec(e);
    assert_eq!(bytes(&from_a), bytes(&from_memory));
    assert_eq!(bytes(&from_b), bytes(&from_memory));
    assert!(store_a.pending_deltas().await.unwrap() > 0);
    assert!(store_a.fold().await.unwrap() > 0);
    assert_eq!(store_a.pending_deltas().await.unwrap(), 0);
    let folded = b
        .estimate(request.clone())
        .await
        .expect("estimate after a fold");
    assert_eq!(bytes(&folded), bytes(&from_memory));
    assert_eq!(a.status(ID).await.unwrap().reports, REPORTS as u64);

    // Closing through one replica closes it for all.
    b.close_collection(ID).await.expect("close via b");
    let extra = a.prepare_report(&collection, &[0.0; DIM as usize]).unwrap();
    let refused = a.submit_report(extra.clone()).await;
    assert!(
        matches!(&refused, Err(ClientError::Status(s)) if s.code() == tonic::Code::FailedPrecondition),
        "{refused:?}"
    );

    // The database goes away: UNAVAILABLE, not INTERNAL, and not a partial count.
    pg.stop().expect("stop the cluster");
    let mut no_retry = client(replica_a.url())
        .await
        .with_retry(RetryPolicy::no_retries());
    let down = no_retry.status(ID).await;
    assert!(
        matches!(&down, Err(ClientError::Status(s)) if s.code() == tonic::Code::Unavailable),
        "{down:?}"
    );
    replica_a.shutdown().await.unwrap();
    replica_b.shutdown().await.unwrap();
    memory.shutdown().await.unwrap();
}
