//! The system tests across daemons, one test binary: every module drives the real
//! aggregator (`CARGO_BIN_EXE_system-aggregator`, exactly `ldpcov-aggregator`'s
//! `main`) and, for the cross-daemon tests, the real relay
//! (`CARGO_BIN_EXE_system-relay`) and the clients in TypeScript and Python
//! (`postgres_e2e` runs two in-process replicas on one PostgreSQL database). The
//! daemons are found, never built, by the tests. One binary, not one per file: each
//! would link the whole stack again. `support` is the one harness (daemons, admin
//! commands, crash helpers, the relay, output checks).
//!
//! Run one module with `cargo test -p ldpcov-system-tests --test system crash::`.

mod support;

mod auth_tls;
mod central;
mod crash;
mod create_status;
mod estimate_output;
mod grpc_web;
mod ingest_bench;
mod metrics;
mod plan;
mod postgres_e2e;
mod python_client;
mod relay_crash;
mod replicas_crash;
mod serve;
mod transport;
mod typescript_client;
