//! The relay's system tests: in-process relays in front of a fake aggregator
//! (`support::fake_aggregator`) or the real one in process (`support::embedded`), and
//! the relay binary (`CARGO_BIN_EXE_system-relay`, started through `support::relay`).
//! Run one module with `cargo test -p ldpcov-system-tests --test system relay::hardening::`.

mod availability;
mod cli;
mod crash;
mod daemon;
mod e2e;
mod grpc_web;
mod hardening;
// The relay's service itself: batching, forwarding, tokens, the store.
#[allow(clippy::module_inception)]
mod relay;
