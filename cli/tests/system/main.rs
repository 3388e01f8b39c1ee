//! The command line's and the daemons' system tests, one test binary: every module
//! drives the real `ldpcov-aggregator` binary (`CARGO_BIN_EXE_ldpcov-aggregator`) and,
//! for the cross-daemon tests, the relay and the clients in other languages. One
//! binary, not one per file: each would link the whole stack again.
//! Run one module with `cargo test -p ldpcov-cli --test system crash::`.

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
mod python_client;
mod relay_crash;
mod replicas_crash;
mod serve;
mod transport;
mod typescript_client;
