//! The gRPC client against a throwaway in-process aggregator that injects faults.

use super::*;
use crate::DiscreteGaussianSampler;
use ldpcov_privacy::SpecError;
use ldpcov_privacy::wire::decode_payload;
use ldpcov_proto::v1::aggregator_server::{Aggregator, AggregatorServer};
use ldpcov_proto::v1::{SubmitReportResponse, UniversalThreshold, get_estimate_request};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Streaming};

/// A fault the fake server applies to the next create or submit call.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Fail with this code before doing anything.
    Before(Code),
    /// Do the work (count the report, create the collection), then fail with this code:
    /// the client never sees the acknowledgement.
    AfterCommit(Code),
    /// Unary submits only: hold the call until the test releases it, then carry on as
    /// usual (a server that finishes after the client gave up), signalling the
    /// [`HangEvents`] on the way.
    Hang,
}

/// The events of a [`Fault::Hang`]: each signal is a `notify_one`, so it is kept for a
/// waiter that comes later.
#[derive(Default)]
struct HangEvents {
    /// The held call reached the server.
    arrived: tokio::sync::Notify,
    /// The test lets the held call go on.
    release: tokio::sync::Notify,
    /// The held call ended: answered, or dropped when the client cancelled it.
    finished: tokio::sync::Notify,
}

/// Signals [`HangEvents::finished`] when dropped, however the call ends.
struct Finished(Arc<HangEvents>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.finished.notify_one();
    }
}

#[derive(Default)]
struct State {
    collections: HashMap<String, Collection>,
    faults: VecDeque<Fault>,
    /// Every report received, every attempt: (id, payload).
    seen: Vec<(Vec<u8>, Vec<u8>)>,
    counted: HashSet<Vec<u8>>,
    /// Announce half the σ the spec needs.
    tamper_sigma: bool,
}

#[derive(Clone, Default)]
struct Fake {
    state: Arc<Mutex<State>>,
    hang: Arc<HangEvents>,
}

impl Fake {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("state lock")
    }

    fn push_faults(&self, faults: &[Fault]) {
        self.state().faults.extend(faults.iter().copied());
    }

    fn take_fault(&self) -> Option<Fault> {
        self.state().faults.pop_front()
    }

    /// Holds a [`Fault::Hang`] call until released; the guard marks its end.
    async fn hang(&self) -> Finished {
        let finished = Finished(self.hang.clone());
        self.hang.arrived.notify_one();
        self.hang.release.notified().await;
        finished
    }

    /// Validates and counts one report; `Ok(duplicate)`.
    fn count(&self, report: &Report) -> Result<bool, Status> {
        let mut state = self.state();
        state
            .seen
            .push((report.report_id.clone(), report.payload.clone()));
        let collection = state
            .collections
            .get(&report.collection_id)
            .ok_or_else(|| Status::not_found("no such collection"))?;
        ReportId::try_from(report.report_id.as_slice())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        decode_payload(collection, report.encoding, &report.payload)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(!state.counted.insert(report.report_id.clone()))
    }
}

#[tonic::async_trait]
impl Aggregator for Fake {
    async fn create_collection(
        &self,
        request: Request<CreateCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        let fault = self.take_fault();
        if let Some(Fault::Before(code)) = fault {
            return Err(Status::new(code, "injected"));
        }
        let spec = request
            .into_inner()
            .spec
            .ok_or_else(|| Status::invalid_argument("no spec"))?;
        let c = Collection::create(&spec).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let params = {
            let mut state = self.state();
            if state.collections.contains_key(c.id()) {
                return Err(Status::already_exists("exists"));
            }
            state.collections.insert(c.id().to_string(), c.clone());
            c.params()
        };
        if let Some(Fault::AfterCommit(code)) = fault {
            return Err(Status::new(code, "injected after commit"));
        }
        Ok(Response::new(params))
    }

    async fn get_collection(
        &self,
        request: Request<GetCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        let state = self.state();
        let c = state
            .collections
            .get(&request.get_ref().collection_id)
            .ok_or_else(|| Status::not_found("no such collection"))?;
        let mut params = c.params();
        if state.tamper_sigma {
            params.sigma *= 0.5;
        }
        Ok(Response::new(params))
    }

    async fn submit_report(
        &self,
        request: Request<Report>,
    ) -> Result<Response<SubmitReportResponse>, Status> {
        let fault = self.take_fault();
        let _finished = match fault {
            Some(Fault::Hang) => Some(self.hang().await),
            _ => None,
        };
        if let Some(Fault::Before(code)) = fault {
            let report = request.get_ref();
            self.state()
                .seen
                .push((report.report_id.clone(), report.payload.clone()));
            return Err(Status::new(code, "injected"));
        }
        let duplicate = self.count(request.get_ref())?;
        if let Some(Fault::AfterCommit(code)) = fault {
            return Err(Status::new(code, "injected after commit"));
        }
        Ok(Response::new(SubmitReportResponse { duplicate }))
    }

    async fn submit_reports(
        &self,
        request: Request<Streaming<Report>>,
    ) -> Result<Response<SubmitReportsResponse>, Status> {
        let fault = self.take_fault();
        if let Some(Fault::Before(code)) = fault {
            return Err(Status::new(code, "injected"));
        }
        let mut stream = request.into_inner();
        let mut response = SubmitReportsResponse::default();
        while let Some(report) = stream.message().await? {
            if self.count(&report)? {
                response.duplicates += 1;
            } else {
                response.accepted += 1;
            }
        }
        if let Some(Fault::AfterCommit(code)) = fault {
            return Err(Status::new(code, "injected after commit"));
        }
        Ok(Response::new(response))
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
        let state = self.state();
        let c = state
            .collections
            .get(&request.get_ref().collection_id)
            .ok_or_else(|| Status::not_found("no such collection"))?;
        let reports = state.counted.len() as u64;
        Ok(Response::new(CollectionStatus {
            params: Some(c.params()),
            reports,
            releasable: reports >= c.min_reports(),
            closed: false,
            ..Default::default()
        }))
    }

    async fn close_collection(
        &self,
        _request: Request<CloseCollectionRequest>,
    ) -> Result<Response<CollectionStatus>, Status> {
        Err(Status::unimplemented("the fake does not close collections"))
    }

    async fn delete_collection(
        &self,
        _request: Request<ldpcov_proto::v1::DeleteCollectionRequest>,
    ) -> Result<Response<ldpcov_proto::v1::DeleteCollectionResponse>, Status> {
        Err(Status::unimplemented(
            "the fake does not delete collections",
        ))
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
        _request: Request<tonic::Streaming<ldpcov_proto::v1::ShuffledBatchChunk>>,
    ) -> Result<Response<ldpcov_proto::v1::ShuffledBatchResponse>, Status> {
        Err(Status::unimplemented("the fake takes no batches"))
    }

    async fn get_estimate(
        &self,
        request: Request<GetEstimateRequest>,
    ) -> Result<Response<Estimate>, Status> {
        let request = request.into_inner();
        let state = self.state();
        let c = state
            .collections
            .get(&request.collection_id)
            .ok_or_else(|| Status::not_found("no such collection"))?;
        let rule = match request.threshold {
            Some(get_estimate_request::Threshold::Universal(_)) => "universal",
            _ => "other",
        };
        Ok(Response::new(Estimate {
            collection_id: c.id().to_string(),
            dim: c.dim() as u32,
            upper_triangle: vec![0.0; c.entries()],
            reports: state.counted.len() as u64,
            sigma: c.sigma(),
            threshold_rule: rule.into(),
            ..Estimate::default()
        }))
    }
}

async fn serve() -> (Fake, SocketAddr) {
    let fake = Fake::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let service = AggregatorServer::new(fake.clone())
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (fake, addr)
}

fn fast_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
    }
}

fn spec(id: &str, epsilon: f64) -> CollectionSpec {
    CollectionSpec {
        collection_id: id.into(),
        dim: 4,
        epsilon,
        delta: 1e-6,
        clip_radius: 2.0,
        min_reports: 2,
        encoding: 0,
        ..Default::default()
    }
}

/// A server holding collection "c" and a client with fast retries.
async fn setup() -> (Fake, AggregatorClient, Collection) {
    let (fake, addr) = serve().await;
    let mut client = AggregatorClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
        .with_retry(fast_retries(5));
    client
        .create_collection(spec("c", 1.0))
        .await
        .expect("create");
    let collection = client.collection("c").await.expect("collection");
    (fake, client, collection)
}

const X: [f64; 4] = [0.5, -1.0, 0.25, 3.0];

#[tokio::test]
async fn retries_resend_the_same_report_under_the_same_id() {
    let (fake, mut client, collection) = setup().await;
    fake.push_faults(&[
        Fault::Before(Code::Unavailable),
        Fault::Before(Code::Unavailable),
    ]);
    let outcome = client.submit(&collection, &X).await.unwrap();
    assert_eq!(outcome.attempts, 3);
    assert!(!outcome.duplicate);
    let state = fake.state();
    assert_eq!(state.seen.len(), 3);
    for (id, payload) in &state.seen {
        assert_eq!(id.as_slice(), outcome.report_id.0.as_slice());
        // Same bytes: the noise was drawn once, before the first attempt.
        assert_eq!(payload, &state.seen[0].1);
    }
    assert_eq!(state.counted.len(), 1);
}

#[tokio::test]
async fn a_lost_acknowledgement_is_counted_once() {
    let (fake, mut client, collection) = setup().await;
    fake.push_faults(&[Fault::AfterCommit(Code::Unavailable)]);
    let outcome = client.submit(&collection, &X).await.unwrap();
    assert_eq!(outcome.attempts, 2);
    assert!(outcome.duplicate);
    assert_eq!(fake.state().counted.len(), 1);
    // A second submit of the same x is a new report with a new id.
    let again = client.submit(&collection, &X).await.unwrap();
    assert_ne!(again.report_id, outcome.report_id);
    assert_eq!(client.status("c").await.unwrap().reports, 2);
}

#[tokio::test]
async fn every_transient_code_is_retried() {
    let (fake, mut client, collection) = setup().await;
    for code in [
        Code::Unavailable,
        Code::DeadlineExceeded,
        Code::ResourceExhausted,
        Code::Aborted,
    ] {
        fake.push_faults(&[Fault::Before(code)]);
        let outcome = client.submit(&collection, &X).await.unwrap();
        assert_eq!(outcome.attempts, 2, "{code:?}");
    }
}

#[tokio::test]
async fn permanent_codes_are_not_retried() {
    let (fake, mut client, collection) = setup().await;
    for code in [
        Code::InvalidArgument,
        Code::NotFound,
        Code::FailedPrecondition,
        Code::PermissionDenied,
        Code::AlreadyExists,
        Code::Internal,
        Code::Unknown, // sent by the server: no local source
    ] {
        fake.push_faults(&[Fault::Before(code)]);
        let before = fake.state().seen.len();
        let err = client.submit(&collection, &X).await.unwrap_err();
        assert_eq!(err.status().map(Status::code), Some(code));
        assert_eq!(fake.state().seen.len(), before + 1, "{code:?} was retried");
    }
    assert!(fake.state().counted.is_empty());
}

#[tokio::test]
async fn retries_stop_after_max_attempts() {
    let (fake, client, collection) = setup().await;
    let mut client = client.with_retry(fast_retries(3));
    fake.push_faults(&[Fault::Before(Code::Unavailable); 10]);
    let err = client.submit(&collection, &X).await.unwrap_err();
    assert_eq!(err.status().map(Status::code), Some(Code::Unavailable));
    assert_eq!(fake.state().seen.len(), 3);
    assert!(
        err.to_string()
            .starts_with("aggregator call failed with Unavailable")
    );
}

/// The first attempt is held by the server until the client's timeout gives up on it;
/// the retry resends the same report under the same id. Ordered by events, not by
/// sleeps: the only clock is the client's 1 s timeout, which the held attempt always
/// reaches (it never returns before the test releases it) and which a prompt local
/// answer to the retry stays far below even on a loaded machine.
#[tokio::test]
async fn slow_attempts_time_out_and_are_retried() {
    let (fake, client, collection) = setup().await;
    let mut client = client.with_timeout(Duration::from_secs(1));
    fake.push_faults(&[Fault::Hang]);
    let outcome = client.submit(&collection, &X).await.unwrap();
    assert_eq!(outcome.attempts, 2);
    // The held attempt reached the server (a bound on the wait, not a tuned delay: the
    // signal is already stored when submit returns).
    let wait = Duration::from_secs(30);
    tokio::time::timeout(wait, fake.hang.arrived.notified())
        .await
        .expect("the first attempt reached the server");
    // Release it: whether the client's cancellation already dropped it or it now goes
    // on to count a duplicate, it ends, and the report is counted once, under one id.
    fake.hang.release.notify_one();
    tokio::time::timeout(wait, fake.hang.finished.notified())
        .await
        .expect("the held attempt ended");
    let state = fake.state();
    assert_eq!(state.counted.len(), 1);
    assert!(!state.seen.is_empty() && state.seen.len() <= 2);
    assert!(state.seen.iter().all(|(id, _)| id == &outcome.report_id.0));
}

#[tokio::test]
async fn a_server_cannot_lower_the_noise() {
    let (fake, mut client, _) = setup().await;
    fake.state().tamper_sigma = true;
    let err = client.collection("c").await.unwrap_err();
    assert!(
        matches!(err, ClientError::Params(SpecError::ParamsMismatch { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn weak_collections_and_bad_inputs_never_reach_the_network() {
    let (fake, mut client, collection) = setup().await;
    client.create_collection(spec("weak", 20.0)).await.unwrap();
    assert!(matches!(
        client.collection("weak").await,
        Err(ClientError::PolicyViolation { epsilon, .. }) if epsilon == 20.0
    ));
    // A locally built collection is checked too.
    let weak = Collection::create(&spec("weak", 20.0)).unwrap();
    assert!(matches!(
        client.submit(&weak, &X).await,
        Err(ClientError::PolicyViolation { .. })
    ));
    // ...and a relaxed policy lets it through.
    let mut relaxed = client.with_privacy_policy(PrivacyPolicy {
        max_epsilon: 50.0,
        max_delta: 1e-3,
        shuffle: None,
    });
    assert_eq!(relaxed.collection("weak").await.unwrap(), weak);
    let before = fake.state().seen.len();
    assert!(matches!(
        relaxed.submit(&collection, &X[..3]).await,
        Err(ClientError::Dimension {
            expected: 4,
            got: 3
        })
    ));
    assert!(matches!(
        relaxed
            .submit(&collection, &[0.0, f64::INFINITY, 0.0, 0.0])
            .await,
        Err(ClientError::NonFinite { index: 1 })
    ));
    // A Collection cannot be edited (the `compile_fail` example on `Collection`): a
    // halved σ can only arrive as parameters, refused before anything is built or sent.
    let mut tampered = collection.params();
    tampered.sigma /= 2.0;
    assert!(matches!(
        Collection::from_params(&tampered).map_err(ClientError::from),
        Err(ClientError::Params(_))
    ));
    let mut bad_id = relaxed.prepare_report(&collection, &X).unwrap();
    bad_id.report_id.truncate(8);
    assert!(matches!(
        relaxed.submit_report(bad_id).await,
        Err(ClientError::Wire(_))
    ));
    assert_eq!(fake.state().seen.len(), before);
    assert!(matches!(
        relaxed.collection("missing").await,
        Err(ClientError::Status(s)) if s.code() == Code::NotFound
    ));
}

#[tokio::test]
async fn streams_are_retried_whole_and_deduplicated() {
    let (fake, client, collection) = setup().await;
    let mut client = client.with_noise_sampler(Box::new(
        crate::DiscreteGaussianSampler::from_seed_for_simulation(3),
    ));
    let batch = |client: &mut AggregatorClient| -> Vec<Report> {
        (0..20)
            .map(|_| client.prepare_report(&collection, &X).unwrap())
            .collect()
    };
    let reports = batch(&mut client);
    let ok = client.submit_stream(reports).await.unwrap();
    assert_eq!((ok.accepted, ok.duplicates), (20, 0));

    // Counted, then the acknowledgement is lost: the resent batch is all duplicates.
    fake.push_faults(&[Fault::AfterCommit(Code::Unavailable)]);
    let reports = batch(&mut client);
    let retried = client.submit_stream(reports.clone()).await.unwrap();
    assert_eq!((retried.accepted, retried.duplicates), (0, 20));
    assert_eq!(fake.state().counted.len(), 40);

    // Refused before reading: the retry counts everything.
    fake.push_faults(&[Fault::Before(Code::Unavailable)]);
    let reports = batch(&mut client);
    let retried = client.submit_stream(reports).await.unwrap();
    assert_eq!((retried.accepted, retried.duplicates), (20, 0));
    assert_eq!(client.status("c").await.unwrap().reports, 60);

    let estimate = client
        .estimate(GetEstimateRequest {
            collection_id: "c".into(),
            threshold: Some(get_estimate_request::Threshold::Universal(
                UniversalThreshold::default(),
            )),
            skip_psd_projection: false,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(estimate.reports, 60);
    assert_eq!(estimate.threshold_rule, "universal");
}

#[tokio::test]
async fn create_collection_survives_a_lost_answer() {
    let (fake, addr) = serve().await;
    let mut client = AggregatorClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .with_retry(fast_retries(3));
    fake.push_faults(&[Fault::AfterCommit(Code::Unavailable)]);
    let params = client.create_collection(spec("c", 1.0)).await.unwrap();
    assert_eq!(
        params,
        Collection::create(&spec("c", 1.0)).unwrap().params()
    );
    // A genuine clash on the first attempt is an error.
    let err = client.create_collection(spec("c", 1.0)).await.unwrap_err();
    assert_eq!(err.status().map(Status::code), Some(Code::AlreadyExists));
    // A clash on a retry with another spec is an error too.
    fake.push_faults(&[Fault::Before(Code::Unavailable)]);
    let err = client.create_collection(spec("c", 2.0)).await.unwrap_err();
    assert_eq!(err.status().map(Status::code), Some(Code::AlreadyExists));
}

#[tokio::test]
async fn unreachable_servers() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let err = AggregatorClient::connect(format!("http://{addr}"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Transport(_)), "{err}");
    assert!(!err.to_string().contains('\n'));
    assert!(matches!(
        AggregatorClient::connect_lazy("not a url"),
        Err(ClientError::Transport(_))
    ));
    // Lazy: the failure shows up as a retried UNAVAILABLE.
    let mut lazy = AggregatorClient::connect_lazy(format!("http://{addr}"))
        .unwrap()
        .with_retry(fast_retries(2));
    let err = lazy.status("c").await.unwrap_err();
    assert_eq!(err.status().map(Status::code), Some(Code::Unavailable));
}

#[tokio::test]
async fn the_default_noise_is_the_exact_discrete_gaussian() {
    let client = AggregatorClient::connect_lazy("http://127.0.0.1:1").unwrap();
    // By type, not by label: the sampler the client holds is the exact sampler itself.
    let held: &dyn std::any::Any = &*client.device.noise;
    assert!(held.is::<DiscreteGaussianSampler>());
    assert_eq!(client.noise_sampler_kind(), "exact-discrete-gaussian");
    let simulated = client.with_noise_sampler(Box::new(
        crate::FloatGaussianNotPrivate::from_seed_for_simulation_not_private(1),
    ));
    assert_eq!(simulated.noise_sampler_kind(), "float-gaussian-NOT-PRIVATE");
    assert!(!(&*simulated.device.noise as &dyn std::any::Any).is::<DiscreteGaussianSampler>());
}
