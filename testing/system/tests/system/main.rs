//! The workspace's system tests, one test binary: every test that starts a daemon,
//! in process or as a process, lives here.
//!
//! * the top-level modules drive the real aggregator (`CARGO_BIN_EXE_system-aggregator`,
//!   exactly `ldpcov-aggregator`'s `main`) and, for the cross-daemon tests, the real
//!   relay (`CARGO_BIN_EXE_system-relay`) and the clients in TypeScript and Python
//!   (`postgres_e2e` runs two in-process replicas on one PostgreSQL database);
//! * [`in_process`]: devices against the real gRPC service in process, the
//!   estimators and the privacy checks on what leaves a device;
//! * [`relay`]: the relay, in process in front of a fake or an in-process aggregator,
//!   and as its binary (`CARGO_BIN_EXE_system-relay`);
//! * `planner`, `signal_tests`: the planner and the off-diagonal signal test against
//!   simulation; `docs`: the paths README.md and ARCHITECTURE.md name exist.
//!
//! The daemons are found, never built, by the tests. One binary, not one per file:
//! each would link the whole stack again. `support` is the one harness (daemons,
//! admin commands, crash helpers, the relay, the in-process aggregator, the fake
//! aggregator, gRPC-Web, output checks).
//!
//! Run one module with `cargo test -p ldpcov-system-tests --test system crash::`.

mod support;

mod auth_tls;
mod central;
mod crash;
mod create_status;
mod docs;
mod estimate_output;
mod grpc_web;
mod in_process;
mod ingest_bench;
mod metrics;
mod plan;
mod planner;
mod postgres_e2e;
mod python_client;
mod relay;
mod relay_crash;
mod replicas_crash;
mod serve;
mod signal_tests;
mod transport;
mod two_aggregator_crash;
mod typescript_client;
