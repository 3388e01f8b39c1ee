//! What the system tests share (`mod support;` in `main.rs`): one harness per daemon
//! and per way of reaching it.
//!
//! * [`daemon`]: `serve` in a child process with a clean environment, its address read
//!   from its log, stopped with SIGTERM or killed when dropped;
//! * [`admin`]: the admin commands as child processes, the standard collection, reports;
//! * [`outputs`]: reading what `estimate` writes (JSON, NPY, CSV, PNG);
//! * [`crash`]: daemons at fixed addresses killed with SIGKILL, and device pools that
//!   resend until acknowledged;
//! * [`relay`]: the `system-relay` binary with a clean environment, started at a fixed
//!   address; a relay served in process; the relays' layer key and their status;
//! * [`embedded`]: the real aggregator in process, with or without tokens;
//! * [`fake_aggregator`]: an in-process aggregator that records what relays send it;
//! * [`grpc`]: calls with a token, calls whose body never comes, gRPC-Web clients and
//!   their CORS preflights;
//! * [`checks`]: checks on released estimates and refused specs.

// Each test module uses a part of the harness.
#![allow(dead_code, unused_imports)]

pub(crate) mod admin;
pub(crate) mod checks;
pub(crate) mod crash;
pub(crate) mod daemon;
pub(crate) mod embedded;
pub(crate) mod fake_aggregator;
pub(crate) mod grpc;
pub(crate) mod outputs;
pub(crate) mod relay;
