//! The relay's system tests, one test binary: the real `ldpcov-relay` binary
//! (`CARGO_BIN_EXE_ldpcov-relay`) and in-process relays in front of an in-process
//! aggregator. Run one module with `cargo test -p ldpcov-relay --test system hardening::`.

mod support;

mod availability;
mod cli;
mod crash;
mod daemon;
mod e2e;
mod grpc_web;
mod hardening;
mod relay;
