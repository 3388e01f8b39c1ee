//! A minimal TEST relay for the bindings' end-to-end tests — not the relay daemon
//! (`ldpcov-relay`): an in-process tonic `Relay` service that takes sealed reports with
//! a device token, keeps each submission id once, and once it holds
//! [`TEST_RELAY_BATCH`] reports of a collection forwards them, shuffled, as one batch to
//! the aggregator's `SubmitShuffledBatch` with the relay token, before it answers the
//! report that completed the batch (so that a test sees the count move right after that
//! submit). It has no key: it cannot read the reports.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ldpcov_client::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_client::proto::v1::relay_server::{Relay, RelayServer};
use ldpcov_client::proto::v1::{
    RelayReport, RelayReportResponse, RelayStatus, RelayStatusRequest, SealedReport,
    ShuffledBatchChunk,
};
use tokio::sync::Mutex;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

/// The relay token the in-process aggregator takes batches from.
pub(crate) const TEST_RELAY_TOKEN: &str = "test-relay-secret";
/// The device token the test relay takes reports from.
pub(crate) const TEST_DEVICE_TOKEN: &str = "test-device-secret";
/// Reports of one collection the test relay holds before it forwards them as a batch.
pub(crate) const TEST_RELAY_BATCH: usize = 5;

#[derive(Default)]
struct Held {
    seen: HashSet<(String, Vec<u8>)>,
    reports: HashMap<String, Vec<SealedReport>>,
    batches: u64,
}

struct TestRelay {
    aggregator_url: String,
    held: Arc<Mutex<Held>>,
}

/// A batch id: the batch's number and the collection, hashed into 16 bytes (unique for
/// this relay's lifetime, which is all the aggregator needs).
fn batch_id(n: u64, collection: &str) -> Vec<u8> {
    let mut id = n.to_be_bytes().to_vec();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in collection.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    id.extend_from_slice(&h.to_be_bytes());
    id
}

/// Fisher–Yates with the std hasher's per-process random keys as the randomness: not a
/// cryptographic shuffle, enough for a test relay (the real relay's is its own).
fn shuffle(reports: &mut [SealedReport]) {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    for i in (1..reports.len()).rev() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        let j = (h.finish() % (i as u64 + 1)) as usize;
        reports.swap(i, j);
    }
}

#[tonic::async_trait]
impl Relay for TestRelay {
    async fn submit_sealed_report(
        &self,
        request: Request<RelayReport>,
    ) -> Result<Response<RelayReportResponse>, Status> {
        let authorized = request
            .metadata()
            .get("authorization")
            .is_some_and(|v| v.as_bytes() == format!("Bearer {TEST_DEVICE_TOKEN}").as_bytes());
        if !authorized {
            return Err(Status::unauthenticated("a device token is required"));
        }
        let report = request.into_inner();
        let Some(sealed) = report.sealed else {
            return Err(Status::invalid_argument("no sealed report"));
        };
        let mut held = self.held.lock().await;
        let key = (report.collection_id.clone(), report.submission_id);
        if !held.seen.insert(key) {
            return Ok(Response::new(RelayReportResponse { duplicate: true }));
        }
        let list = held
            .reports
            .entry(report.collection_id.clone())
            .or_default();
        list.push(sealed);
        if list.len() < TEST_RELAY_BATCH {
            return Ok(Response::new(RelayReportResponse { duplicate: false }));
        }
        let mut batch = std::mem::take(list);
        shuffle(&mut batch);
        held.batches += 1;
        let id = batch_id(held.batches, &report.collection_id);
        let chunks: Vec<ShuffledBatchChunk> = batch
            .chunks(2)
            .map(|c| ShuffledBatchChunk {
                collection_id: report.collection_id.clone(),
                batch_id: id.clone(),
                batch_size: batch.len() as u64,
                reports: c.to_vec(),
            })
            .collect();
        let mut aggregator = RawClient::connect(self.aggregator_url.clone())
            .await
            .map_err(|e| Status::unavailable(format!("test relay: aggregator: {e}")))?;
        let mut forward = Request::new(tokio_stream::iter(chunks));
        forward.metadata_mut().insert(
            "authorization",
            MetadataValue::try_from(format!("Bearer {TEST_RELAY_TOKEN}"))
                .map_err(|e| Status::internal(e.to_string()))?,
        );
        let answer = aggregator
            .submit_shuffled_batch(forward)
            .await?
            .into_inner();
        if answer.accepted + answer.duplicates != batch.len() as u64 {
            return Err(Status::internal(format!(
                "test relay: the aggregator refused reports of the batch: {:?}",
                answer.refused
            )));
        }
        Ok(Response::new(RelayReportResponse { duplicate: false }))
    }

    async fn get_collection(
        &self,
        request: Request<ldpcov_client::proto::v1::GetCollectionRequest>,
    ) -> Result<Response<ldpcov_client::proto::v1::CollectionParams>, Status> {
        // The devices read the keys through the relay: this test relay passes the
        // aggregator's answer on (the real relay serves its pinned copy).
        let mut aggregator = RawClient::connect(self.aggregator_url.clone())
            .await
            .map_err(|e| Status::unavailable(format!("test relay: aggregator: {e}")))?;
        aggregator.get_collection(request.into_inner()).await
    }

    async fn get_relay_status(
        &self,
        request: Request<RelayStatusRequest>,
    ) -> Result<Response<RelayStatus>, Status> {
        let id = request.into_inner().collection_id;
        let held = self.held.lock().await;
        Ok(Response::new(RelayStatus {
            window_reports: held.reports.get(&id).map_or(0, |r| r.len() as u64),
            collection_id: id,
            ..Default::default()
        }))
    }
}

/// A running test relay: its URL; stopped when dropped.
pub(crate) struct RunningTestRelay {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for RunningTestRelay {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Starts the test relay on `127.0.0.1:0`, forwarding to the aggregator at `aggregator_url`.
pub(crate) async fn start_test_relay(aggregator_url: String) -> RunningTestRelay {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the test relay");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let relay = TestRelay {
        aggregator_url,
        held: Arc::default(),
    };
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(RelayServer::new(relay))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = rx.await;
                },
            )
            .await
            .expect("the test relay serves");
    });
    RunningTestRelay {
        url,
        shutdown: Some(tx),
    }
}
