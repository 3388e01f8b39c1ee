//! The `ldpcov-relay` binary's system tests, one test binary: the real binary
//! (`CARGO_BIN_EXE_ldpcov-relay`) in front of a fake or an in-process aggregator. Run
//! one module with `cargo test -p ldpcov-relay-cli --test system crash::`.

// The relay library's test support (fake aggregator, sealed reports, layer keys),
// shared rather than copied.
#[path = "../../../relay/tests/system/support/mod.rs"]
mod support;

mod availability;
mod cli;
mod crash;
mod daemon;
mod grpc_web;
mod hardening;
