//! A fake aggregator that records every call ([`FakeAggregator`]), for the relay's
//! tests: shuffled collection specs ([`shuffled_spec`]) and tagged sealed reports
//! ([`sealed`], [`tag`]).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ldpcov_privacy::Collection;
use ldpcov_proto::v1::aggregator_server::{Aggregator, AggregatorServer};
use ldpcov_proto::v1::{
    CloseCollectionRequest, CollectionParams, CollectionSpec, CollectionStatus,
    CreateCollectionRequest, DeleteCollectionRequest, DeleteCollectionResponse, Estimate,
    GetCollectionRequest, GetEstimateRequest, GetStatusRequest, HpkeKeyState, HpkePublicKey,
    LocalMechanism, RefusedReport, Report, SealedReport, ShuffleSpec, ShuffledBatchChunk,
    ShuffledBatchResponse, SubmitReportResponse, SubmitReportsResponse,
};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Request, Response, Status, Streaming};

use super::embedded::RELAY_TOKEN;

pub(crate) const ACTIVE_KEY: u32 = 100;

/// A rank-one shuffled collection spec.
pub(crate) fn shuffled_spec(id: &str, min_batch: u64, window_seconds: u64) -> CollectionSpec {
    CollectionSpec {
        collection_id: id.into(),
        dim: 4,
        epsilon: 4.0,
        delta: 0.0,
        clip_radius: 1.0,
        min_reports: 1,
        local_mechanism: LocalMechanism::RankOne as i32,
        shuffle: Some(ShuffleSpec {
            min_batch_size: min_batch,
            batch_window_seconds: window_seconds,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A sealed report whose ciphertext starts with `tag` (identifiable in a batch).
pub(crate) fn sealed(tag: u64) -> SealedReport {
    let mut ciphertext = tag.to_le_bytes().to_vec();
    ciphertext.extend_from_slice(&[0x5a; 56]);
    SealedReport {
        key_id: ACTIVE_KEY,
        enc: vec![7; 32],
        ciphertext,
    }
}

/// The tag of a [`sealed`] report.
pub(crate) fn tag(report: &SealedReport) -> u64 {
    u64::from_le_bytes(report.ciphertext[..8].try_into().expect("8 bytes"))
}

/// One `SubmitShuffledBatch` call as received.
#[derive(Debug, Clone)]
pub(crate) struct BatchCall {
    /// Every metadata entry (name, value).
    pub(crate) metadata: Vec<(String, String)>,
    pub(crate) chunks: Vec<ShuffledBatchChunk>,
}

impl BatchCall {
    pub(crate) fn batch_id(&self) -> Vec<u8> {
        self.chunks[0].batch_id.clone()
    }

    pub(crate) fn reports(&self) -> Vec<SealedReport> {
        self.chunks.iter().flat_map(|c| c.reports.clone()).collect()
    }
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub(crate) collections: HashMap<String, CollectionParams>,
    /// Every batch call (failed ones too).
    pub(crate) calls: Vec<BatchCall>,
    /// Metadata of every collection lookup (GetCollection or GetStatus).
    pub(crate) lookups: Vec<Vec<(String, String)>>,
    /// Token checks (batch streams with no chunk) answered, and refused.
    pub(crate) token_checks: u64,
    /// Collections closed (GetStatus says so, batches are refused).
    pub(crate) closed: HashSet<String>,
    /// Batch calls to fail with UNAVAILABLE (after reading them whole).
    pub(crate) fail_next: usize,
    /// Ciphertexts counted (the stand-in for the aggregator's report ids).
    pub(crate) counted: HashSet<Vec<u8>>,
    /// Reports counted, in total (equals `counted.len()`), and duplicates.
    pub(crate) accepted: u64,
    pub(crate) duplicates: u64,
    /// Problems that must never happen (a batch below the minimum, inconsistent chunk
    /// headers, a bad token).
    pub(crate) violations: Vec<String>,
    /// The relay token batch calls must carry (`None`: [`RELAY_TOKEN`]).
    pub(crate) relay_token: Option<String>,
}

/// An in-process aggregator holding shuffled collections; counts each ciphertext once.
#[derive(Clone, Default)]
pub(crate) struct FakeAggregator {
    pub(crate) state: Arc<Mutex<FakeState>>,
}

fn metadata_pairs(m: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
    m.clone()
        .into_headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

impl FakeAggregator {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().expect("fake state")
    }

    /// Adds a collection; `keys` publishes an active key [`ACTIVE_KEY`] and its pending
    /// successor (else none, as an aggregator that publishes no keys).
    pub(crate) fn add(&self, spec: CollectionSpec, keys: bool) {
        let mut params = Collection::create(&spec).expect("spec").params();
        if let Some(shuffle) = params.shuffle.as_mut()
            && keys
        {
            shuffle.keys = [
                (ACTIVE_KEY, HpkeKeyState::Active),
                (ACTIVE_KEY + 1, HpkeKeyState::Pending),
                (ACTIVE_KEY - 1, HpkeKeyState::Retired),
            ]
            .into_iter()
            .map(|(key_id, state)| HpkePublicKey {
                key_id,
                kem_id: 0x20,
                kdf_id: 1,
                aead_id: 3,
                public_key: vec![1; 32],
                state: state as i32,
                not_before: 0,
                active_until: u64::MAX,
                not_after: u64::MAX,
            })
            .collect();
        }
        self.state()
            .collections
            .insert(spec.collection_id.clone(), params);
    }

    pub(crate) async fn serve(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(
                    AggregatorServer::new(self.clone()).max_decoding_message_size(64 << 20),
                )
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        addr
    }
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in the fake"))
}

#[tonic::async_trait]
impl Aggregator for FakeAggregator {
    async fn create_collection(
        &self,
        _: Request<CreateCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        unimplemented()
    }

    async fn get_collection(
        &self,
        request: Request<GetCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        let mut state = self.state();
        state.lookups.push(metadata_pairs(request.metadata()));
        state
            .collections
            .get(&request.get_ref().collection_id)
            .cloned()
            .map(Response::new)
            .ok_or_else(|| Status::not_found("no such collection"))
    }

    async fn submit_report(
        &self,
        _: Request<Report>,
    ) -> Result<Response<SubmitReportResponse>, Status> {
        unimplemented()
    }

    async fn submit_reports(
        &self,
        _: Request<Streaming<Report>>,
    ) -> Result<Response<SubmitReportsResponse>, Status> {
        unimplemented()
    }

    async fn list_collections(
        &self,
        _: Request<ldpcov_proto::v1::ListCollectionsRequest>,
    ) -> Result<Response<ldpcov_proto::v1::ListCollectionsResponse>, Status> {
        Err(Status::unimplemented("not part of this test double"))
    }

    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<CollectionStatus>, Status> {
        let mut state = self.state();
        state.lookups.push(metadata_pairs(request.metadata()));
        let id = &request.get_ref().collection_id;
        let params = state
            .collections
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found("no such collection"))?;
        Ok(Response::new(CollectionStatus {
            params: Some(params),
            closed: state.closed.contains(id),
            ..Default::default()
        }))
    }

    async fn get_estimate(
        &self,
        _: Request<GetEstimateRequest>,
    ) -> Result<Response<Estimate>, Status> {
        unimplemented()
    }

    async fn close_collection(
        &self,
        _: Request<CloseCollectionRequest>,
    ) -> Result<Response<CollectionStatus>, Status> {
        unimplemented()
    }

    async fn delete_collection(
        &self,
        _: Request<DeleteCollectionRequest>,
    ) -> Result<Response<DeleteCollectionResponse>, Status> {
        unimplemented()
    }

    async fn upload_two_aggregator_report(
        &self,
        _request: Request<ldpcov_proto::v1::TwoAggregatorReport>,
    ) -> Result<Response<ldpcov_proto::v1::UploadTwoAggregatorReportResponse>, Status> {
        Err(Status::unimplemented(
            "the fake is no two-aggregator leader",
        ))
    }

    async fn verify_shares(
        &self,
        _request: Request<ldpcov_proto::v1::VerifySharesRequest>,
    ) -> Result<Response<ldpcov_proto::v1::VerifySharesResponse>, Status> {
        Err(Status::unimplemented(
            "the fake is no two-aggregator helper",
        ))
    }

    async fn release_share(
        &self,
        _request: Request<ldpcov_proto::v1::ReleaseShareRequest>,
    ) -> Result<Response<ldpcov_proto::v1::ReleaseShareResponse>, Status> {
        Err(Status::unimplemented(
            "the fake is no two-aggregator helper",
        ))
    }

    async fn submit_shuffled_batch(
        &self,
        request: Request<Streaming<ShuffledBatchChunk>>,
    ) -> Result<Response<ShuffledBatchResponse>, Status> {
        let metadata = metadata_pairs(request.metadata());
        let mut stream = request.into_inner();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.next().await {
            chunks.push(chunk?);
        }
        let call = BatchCall { metadata, chunks };
        let mut state = self.state();
        if call.chunks.is_empty() {
            // The relay's token check.
            let expected = state.relay_token.as_deref().unwrap_or(RELAY_TOKEN);
            let auth = call
                .metadata
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone());
            if auth.as_deref() != Some(&format!("Bearer {expected}")) {
                return Err(Status::unauthenticated("relay token"));
            }
            state.token_checks += 1;
            return Ok(Response::new(ShuffledBatchResponse::default()));
        }
        state.calls.push(call.clone());
        if state.fail_next > 0 {
            state.fail_next -= 1;
            return Err(Status::unavailable("injected failure"));
        }
        let auth = call
            .metadata
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone());
        let expected = state.relay_token.as_deref().unwrap_or(RELAY_TOKEN);
        if auth.as_deref() != Some(&format!("Bearer {expected}")) {
            state
                .violations
                .push("a batch without the relay token".into());
            return Err(Status::unauthenticated("relay token"));
        }
        let Some(first) = call.chunks.first() else {
            state.violations.push("an empty batch stream".into());
            return Err(Status::invalid_argument("empty"));
        };
        let header = (
            first.collection_id.clone(),
            first.batch_id.clone(),
            first.batch_size,
        );
        for c in &call.chunks {
            if (c.collection_id.clone(), c.batch_id.clone(), c.batch_size) != header {
                state.violations.push("chunk headers differ".into());
            }
            if c.reports.len() > 1000 {
                state
                    .violations
                    .push("a chunk of more than 1000 reports".into());
            }
        }
        if state.closed.contains(&header.0) {
            return Err(Status::failed_precondition(format!(
                "collection {} is closed",
                header.0
            )));
        }
        let reports = call.reports();
        if reports.len() as u64 != header.2 {
            state
                .violations
                .push("batch_size is not the number of reports".into());
        }
        let min = state
            .collections
            .get(&header.0)
            .and_then(|p| p.shuffle.as_ref())
            .map_or(u64::MAX, |s| s.min_batch_size);
        if (reports.len() as u64) < min {
            state
                .violations
                .push(format!("a batch of {} < {min} reports", reports.len()));
            return Err(Status::failed_precondition("batch below the minimum"));
        }
        let mut response = ShuffledBatchResponse::default();
        for (i, r) in reports.iter().enumerate() {
            if r.key_id != ACTIVE_KEY && r.key_id != ACTIVE_KEY + 1 {
                response.refused.push(RefusedReport {
                    index: i as u64,
                    code: Code::FailedPrecondition as i32,
                    message: "expired key".into(),
                });
            } else if state.counted.insert(r.ciphertext.clone()) {
                response.accepted += 1;
            } else {
                response.duplicates += 1;
            }
        }
        state.accepted += response.accepted;
        state.duplicates += response.duplicates;
        Ok(Response::new(response))
    }
}
