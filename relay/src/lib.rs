//! `ldpcov-relay`: the anonymising relay of shuffled collections (docs/PRIVACY.md §9),
//! run by a party other than the aggregator's operator.
//!
//! Devices seal their reports with HPKE to the aggregator's key (`ldpcov-seal`), seal
//! that once more to the relay's own key ([`RelayOptions::layer_key`]), and send them
//! here (`ldpcov.v1.Relay/SubmitSealedReport`) with a device token. The relay opens
//! its layer only: it cannot read the reports, and what it forwards shares no bytes
//! with what the device sent. It keeps at most **one report per device per collection**
//! (in any window), durably ([`RelayStore`]), in a window per (collection, key id), and
//! when a window is at least `batch_window_seconds` old **and** holds at least
//! `min_batch_size` reports (a window past its time stays open until it has enough) it
//! shuffles the window's reports into a batch with an OS-seeded CSPRNG. The
//! [`Forwarder`] sends each batch to the aggregator (`Aggregator/SubmitShuffledBatch`)
//! as one call carrying only the sealed reports and the relay's own token, and deletes
//! it once acknowledged; so the aggregator cannot tell whose report is whose, and each
//! report's local ε0 is amplified to the collection's central ε.
//!
//! The central ε is a promise against the aggregator, so the relay enforces what it
//! rests on from its own configuration, not the aggregator's answer ([`Gate`]):
//!
//! * **its own floor** ([`RelayOptions::floor`], `serve --min-batch-size`, default
//!   [`constants::DEFAULT_MIN_BATCH_SIZE`], and `--min-batch-window-seconds`): a collection
//!   announcing less is refused (FAILED_PRECONDITION), and a window closes by the
//!   larger of the announced rule and the floor, so no batch below the floor is
//!   formed;
//! * **settings pinned at first sight** ([`PinnedSettings`], durably): a collection
//!   whose shuffle settings, ε0, mechanism, dimension or spec change afterwards is
//!   refused, and its windows and batches are held, not forwarded, while the change
//!   persists;
//! * **one report per device per collection**: the keyed device record lives as long
//!   as the collection's records, so a device is in at most one batch; a resend of the
//!   same submission id, or of the same sealed bytes under any id or device, is a
//!   duplicate and never reaches a second batch;
//! * **one key id per batch**: windows are keyed by (collection, key id);
//! * **key bytes pinned at first sight** (durably): devices are served only those, and
//!   a collection whose aggregator answers other bytes under a pinned key id is held
//!   (no report taken, no batch forwarded) while it does;
//! * **one view for devices**: `Relay/GetCollection` answers every device the pinned
//!   parameters with the pinned key bytes, the relay's own key, its floor and the
//!   central ε it computes itself (`ldpcov_accounting::amplification::shuffled_epsilon`);
//!   devices of a shuffled collection ask the relay alone, never the aggregator;
//! * **Sybils bounded and shown**: at most [`RelayOptions::new_device_cap`] reports from
//!   devices new to the relay per window, and each batch's share of them in the status;
//! * **no plaintext**: the `ldpcov-relay serve` binary refuses to serve devices without
//!   TLS unless `--insecure-plaintext` (tests).
//!
//! * [`token`](DeviceTokenIssuer) — device tokens `v2.<device id>.<expires>.<hex HMAC-SHA256>`,
//!   the revocation list ([`Revocations`])
//!   and the relay's own secrets ([`Secret`]).
//! * [`CloseRule`] — the batch rule (`batch_rule.rs`): when a window becomes a batch,
//!   a pure function the store applies.
//! * [`RelayStore`] — the redb store: windows, dedupe records, pinned settings,
//!   batches, counters.
//! * [`Upstream`] — the aggregator: collection parameters (cached) and the batch call.
//! * [`Gate`] — the floor and the pinned settings, for the service and the forwarder;
//!   it retires a collection the aggregator closed or deleted.
//! * [`Monitor`] — the relay's watch on the aggregator (its token checked at start and
//!   every few seconds): the relay's health during a refusal or an outage.
//! * [`DeviceLimiter`] — each device token's calls in flight and calls per second.
//! * [`RelayService`] — the gRPC service; [`serve`] runs it with health, reflection,
//!   limits, TLS and the [`Forwarder`], and, for browser devices, gRPC-Web behind a
//!   CORS policy ([`RelayOptions::grpc_web`], `serve --grpc-web`, `--grpc-web-origin`:
//!   the aggregator's [`GrpcWebOptions`], from `ldpcov-serve`).
//!
//! The `ldpcov-relay` binary (its command line, `serve` and `issue-device-token`) is
//! the `ldpcov-relay-cli` crate.
//!
//! **The relay never holds the aggregator's master secret or any key that opens a
//! report** (its own key opens only its own layer), never
//! forwards, logs or stores a device's identity (its dedupe record is a keyed hash
//! under a key derived from the device-token secret and never stored: the store file
//! alone does not tell whether a device reported, see [`RelayStore`]), and never
//! forwards a report but in a batch of at least the collection's minimum and its own
//! floor.
//!
//! # Metrics
//!
//! Through the `metrics` facade; the `ldpcov-relay serve --metrics-listen` binary
//! installs `ldpcov-serve`'s Prometheus exporter (its own HTTP listener, `GET /metrics`;
//! the histograms exported as summaries).
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `ldpcov_relay_reports_stored_total` | counter | collection | reports stored (acknowledged) |
//! | `ldpcov_relay_reports_duplicate_total` | counter | collection | resends of a stored submission |
//! | `ldpcov_relay_reports_refused_total` | counter | reason | reports refused (`unauthenticated`, `invalid_argument`, `undecodable`, `oversize`, `not_found`, `not_shuffled`, `below_floor`, `settings_changed`, `delta_too_large`, `key_conflict`, `retired`, `device_limit`, `relay_key`, `relay_layer`, `new_device_cap`, `key_id`, `already_reported`, `submission_id_reused`, `aggregator_unavailable`, `store`) |
//! | `ldpcov_relay_batches_formed_total` | counter | collection | windows closed into batches |
//! | `ldpcov_relay_last_batch_new_device_share` | gauge | collection | the share of the last batch's reports from devices first seen in its window (a Sybil signal) |
//! | `ldpcov_relay_collection_held` | gauge | collection | 1 while the relay holds the collection (settings changed, other key bytes under a pinned key id, …) |
//! | `ldpcov_relay_key_conflicts_total` | counter | collection | times the aggregator answered other key bytes for a pinned key id |
//! | `ldpcov_relay_batches_forwarded_total` | counter | collection | batches the aggregator acknowledged |
//! | `ldpcov_relay_reports_forwarded_total` | counter | collection | their reports |
//! | `ldpcov_relay_reports_refused_by_aggregator_total` | counter | collection, code | reports of acknowledged batches the aggregator refused |
//! | `ldpcov_relay_forward_failures_total` | counter | collection | failed batch calls (retried) |
//! | `ldpcov_relay_upstream_failures_total` | counter | reason | failed calls to the aggregator (`unauthenticated`, `permission_denied`, `failed_precondition`, `unavailable`, `deadline_exceeded`, `other`) |
//! | `ldpcov_relay_upstream_refused` | gauge | | 1 while the aggregator refuses the relay's token (health NOT_SERVING) |
//! | `ldpcov_relay_upstream_accepted` | gauge | | 1 while the last check found the aggregator accepting the relay |
//! | `ldpcov_relay_upstream_unreachable_seconds` | gauge | | since the aggregator last answered a check, while it cannot be reached (0 otherwise; health NOT_SERVING from the grace period, 10 s) |
//! | `ldpcov_relay_collections_retired_total` | counter | reason | collections retired (`closed`, `deleted` at the aggregator) |
//! | `ldpcov_relay_reports_retired_total` | counter | reason | reports they held, dropped (acknowledged, never to be counted) |
//! | `ldpcov_relay_device_calls_limited_total` | counter | limit | device calls refused over a per-device limit (`in_flight`, `rate`) |
//! | `ldpcov_relay_pending_batches` | gauge | | batches formed, not yet acknowledged |
//! | `ldpcov_relay_pending_batch_reports` | gauge | | their reports |
//! | `ldpcov_relay_oldest_pending_batch_age_seconds` | gauge | | since the oldest of them was formed, or the longest-due window not yet formed became due (0: none) |
//! | `ldpcov_relay_commit_duration_seconds` | histogram | result | group commits |
//! | `ldpcov_relay_commit_group_commands` | histogram | | commands per group commit |
//!
//! ```
//! use ldpcov_relay::{CloseRule, DeviceTokenIssuer, RelayStore, Submission, SubmitOutcome};
//! use ldpcov_relay::proto::v1::SealedReport;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let dir = tempfile::tempdir()?;
//! let store = RelayStore::open(dir.path())?;
//! let issuer = DeviceTokenIssuer::from_bytes([9; 32]);
//! let rule = CloseRule { min_batch_size: 2, window_seconds: 60 };
//! for (device, now) in [("phone-1", 1000), ("phone-2", 1010)] {
//!     let token = issuer.issue(device)?;
//!     let submission = Submission {
//!         collection_id: "heights".into(),
//!         device: issuer.verify(&token).expect("a token we issued"),
//!         submission_id: [now as u8; 16],
//!         sealed: SealedReport { key_id: 1, enc: vec![0; 32], ciphertext: vec![now as u8; 40] },
//!         now,
//!         rule,
//!         new_device_cap: 0,
//!     };
//!     assert_eq!(store.submit(submission).await?, SubmitOutcome::Stored);
//! }
//! // Two reports, but the window is not 60 s old yet: no batch.
//! assert!(store.form_due_batches(1059).await?.is_empty());
//! let batches = store.form_due_batches(1060).await?;
//! assert_eq!(batches.len(), 1);
//! assert_eq!(store.batch_reports(batches[0].seq)?.len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch_rule;
mod clock;
mod device_limits;
mod forward;
mod gate;
pub mod monitor;
mod pin;
mod server;
mod service;
mod store;
mod token;
mod upstream;

/// The wire types (`ldpcov-proto`).
pub use ldpcov_proto as proto;

/// The relay's fixed limits and tuning values (back-offs, cache lifetimes, chunk sizes,
/// token and file formats, the default floor), kept out of the crate's entry points.
pub mod constants {
    pub use crate::forward::{BATCH_TIMEOUT, FIRST_BACKOFF, MAX_BACKOFF};
    pub use crate::gate::{DEFAULT_MIN_BATCH_SIZE, DEFAULT_MIN_BATCH_WINDOW_SECONDS};
    pub use crate::server::{HEALTH_SERVICE_NAME, LAYER_KEY_FILE};
    pub use crate::service::{ENC_LEN, OUTER_OVERHEAD, TAG_LEN};
    pub use crate::store::{DB_FILE, FORMAT_VERSION, RECENT_BATCHES};
    pub use crate::token::{
        DEFAULT_DEVICE_TOKEN_LIFETIME, DEVICE_SECRET_LEN, DEVICE_TOKEN_LABEL,
        DEVICE_TOKEN_LABEL_V2, MAX_DEVICE_ID_LEN, MAX_TOKEN_LEN, REVOCATIONS_RECHECK,
    };
    pub use crate::upstream::{
        CHUNK_BYTES, CHUNK_REPORTS, COLLECTION_TTL, KEY_REFRESH_AGE, NEGATIVE_TTL,
    };
}

pub use batch_rule::CloseRule;
pub use clock::{Clock, system_clock};
pub use device_limits::{DeviceLimiter, DeviceLimits, InFlight};
pub use forward::Forwarder;
pub use gate::{Admitted, Gate};
/// gRPC-Web for browser devices ([`RelayOptions::grpc_web`]) and an origin it cannot
/// use: `ldpcov-serve`'s, shared with the aggregator.
pub use ldpcov_serve::{GrpcWebOptions, OriginError};
pub use monitor::Monitor;
pub use pin::PinnedSettings;
pub use server::{RelayLimits, RelayOptions, ServeError, serve, serve_with_clock};
pub use service::RelayService;
pub use store::{
    FormedBatch, PendingBatch, RelayStore, RetireReason, Retired, StoreError, StoreOptions,
    Submission, SubmitOutcome,
};
pub use token::{DeviceId, DeviceTokenIssuer, Revocations, Secret, TokenError};
pub use upstream::{CollectionInfo, Reach, Upstream, UpstreamError, chunk};
