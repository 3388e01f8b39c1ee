//! `--relay`: the shuffle model end to end in this process (docs/PRIVACY.md §9). The
//! embedded aggregator takes batches from a relay token; an embedded `ldpcov-relay`
//! (durable store in a temporary directory) takes every user's sealed report under
//! the user's own device token and forwards shuffled batches of at least the
//! collection's minimum. The users' reports are the local rank-one reports at ε0; the
//! summary shows ε0, the central (ε, δ) and the planner's local-only errors at the
//! same n.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use ldpcov::client::{AggregatorClient, PreparedRelayReport};
use ldpcov::proto::v1::relay_client::RelayClient;
use ldpcov_relay::{DeviceTokenIssuer, RelayOptions, RelayStore, Secret, Upstream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::metadata::MetadataValue;

/// How often the embedded relay checks for due batches.
const BATCH_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// Sealed reports in flight per worker (one connection each): as many calls as the
/// relay handles at once on one connection by default. The relay acknowledges a
/// report after the fsync of its group commit, so the rate is about the reports in
/// flight per commit time; with 64 a 10⁶-user run spent most of its time waiting on
/// commits.
fn in_flight() -> usize {
    ldpcov_relay::RelayLimits::default().max_calls_per_connection
}

/// 32 random bytes as hex: a fresh secret for this run.
pub(crate) fn random_secret_hex() -> Result<String> {
    let mut bytes = [0u8; 32];
    rand::TryRngCore::try_fill_bytes(&mut rand::rngs::OsRng, &mut bytes)
        .context("the OS random generator")?;
    Ok(hex::encode(bytes))
}

/// A relay running inside this process.
pub(crate) struct EmbeddedRelay {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    issuer: Arc<DeviceTokenIssuer>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ldpcov_relay::ServeError>>,
    _dir: tempfile::TempDir,
}

impl EmbeddedRelay {
    /// Starts a relay forwarding to `aggregator_url` with `relay_token`, refusing
    /// collections (and batches) below `min_batch_size`.
    pub(crate) async fn start(
        aggregator_url: &str,
        relay_token: &str,
        min_batch_size: u64,
    ) -> Result<Self> {
        let dir = tempfile::tempdir().context("the relay's data directory")?;
        let store = Arc::new(RelayStore::open(dir.path()).context("the relay's store")?);
        let upstream = Upstream::new(aggregator_url, Secret::new(relay_token, "relay")?, None)
            .context("the relay's aggregator")?;
        let mut device_secret = [0u8; 32];
        rand::TryRngCore::try_fill_bytes(&mut rand::rngs::OsRng, &mut device_secret)
            .context("the OS random generator")?;
        let issuer = DeviceTokenIssuer::from_bytes(device_secret);
        let mut options = RelayOptions::new(upstream, issuer.clone());
        options.batch_check_interval = BATCH_CHECK_INTERVAL;
        options.floor.min_batch_size = min_batch_size.max(2);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(ldpcov_relay::serve(store, options, listener, async {
            let _ = rx.await;
        }));
        Ok(EmbeddedRelay {
            url,
            issuer: Arc::new(issuer),
            shutdown: Some(tx),
            task,
            _dir: dir,
        })
    }

    /// Issues user `user`'s device token.
    pub(crate) fn issuer(&self) -> Arc<DeviceTokenIssuer> {
        Arc::clone(&self.issuer)
    }

    /// Stops the relay and waits for it.
    pub(crate) async fn shutdown(mut self) -> Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.context("relay task")??;
        Ok(())
    }
}

/// Attempts per report before a transient failure is reported as an error.
const ATTEMPTS: u32 = 30;

/// Whether a refusal is one a device retries (the same bytes under the same
/// submission id, which the relay stores at most once): the call timed out, was cut
/// off or met a full server.
fn transient(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unavailable
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted
    )
}

/// Sends prepared sealed reports to the relay, each under its user's device token,
/// [`in_flight`] at a time, resending one that met a [`transient`] failure (with
/// backoff, as a device does) until it is acknowledged: the reports the relay
/// acknowledged as stored and those it already had on the first attempt. A report
/// acknowledged as a duplicate on a resend was stored by an attempt whose
/// acknowledgement was lost, and counts as stored.
pub(crate) async fn send_sealed(
    relay: &RelayClient<tonic::transport::Channel>,
    issuer: &DeviceTokenIssuer,
    reports: Vec<(u64, PreparedRelayReport)>,
) -> Result<(u64, u64)> {
    let calls = reports.into_iter().map(|(user, prepared)| {
        let mut relay = relay.clone();
        let token = issuer.issue(&format!("user-{user}"));
        async move {
            let value = MetadataValue::try_from(format!("Bearer {}", token?))?;
            let mut attempt = 0u32;
            loop {
                let mut request = tonic::Request::new(prepared.request.clone());
                request
                    .metadata_mut()
                    .insert("authorization", value.clone());
                match relay.submit_sealed_report(request).await {
                    Ok(response) => {
                        let duplicate = response.into_inner().duplicate;
                        return anyhow::Ok(duplicate && attempt == 0);
                    }
                    Err(status) if transient(status.code()) && attempt + 1 < ATTEMPTS => {
                        attempt += 1;
                        tracing::debug!(user, attempt, %status, "resending a sealed report");
                        let backoff = Duration::from_millis(50 << attempt.min(6));
                        tokio::time::sleep(backoff).await;
                    }
                    Err(status) => {
                        bail!("relay refused user {user}'s report: {status:?}")
                    }
                }
            }
        }
    });
    let mut results = futures::stream::iter(calls).buffer_unordered(in_flight());
    let (mut stored, mut duplicates) = (0u64, 0u64);
    while let Some(result) = results.next().await {
        if result? {
            duplicates += 1;
        } else {
            stored += 1;
        }
    }
    Ok((stored, duplicates))
}

/// Waits until the aggregator counts `expected` reports of collection `id` (the relay
/// forwards once a window is due), for at most `limit`.
pub(crate) async fn wait_for_count(
    admin: &mut AggregatorClient,
    id: &str,
    expected: u64,
    limit: Duration,
) -> Result<u64> {
    let started = std::time::Instant::now();
    loop {
        let reports = admin.status(id).await?.reports;
        if reports >= expected {
            return Ok(reports);
        }
        if started.elapsed() > limit {
            bail!(
                "the aggregator counts {reports} of the {expected} reports acknowledged after {limit:?}"
            );
        }
        tokio::time::sleep(BATCH_CHECK_INTERVAL).await;
    }
}
