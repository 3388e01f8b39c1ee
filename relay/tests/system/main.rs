//! The relay's system tests, one test binary: in-process relays in front of an
//! in-process aggregator (the tests that run the `ldpcov-relay` binary are the
//! command line's, relay-cli/tests/system/). Run one module with
//! `cargo test -p ldpcov-relay --test system hardening::`.

mod support;

mod availability;
mod e2e;
mod hardening;
mod relay;
