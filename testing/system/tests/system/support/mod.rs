//! What the integration tests of the `ldpcov-aggregator` binary share (each test file
//! includes it with `mod support;`): one daemon harness and the admin commands.
//!
//! * [`daemon`]: `serve` in a child process with a clean environment, its address read
//!   from its log, stopped with SIGTERM or killed when dropped;
//! * [`admin`]: the admin commands as child processes, the standard collection, reports;
//! * [`outputs`]: reading what `estimate` writes (JSON, NPY, CSV, PNG);
//! * [`crash`]: daemons at fixed addresses killed with SIGKILL, and device pools that
//!   resend until acknowledged;
//! * [`relay`]: the `ldpcov-relay` binary of the same build (built when missing),
//!   started at a fixed address.

// Each test file compiles this module and uses a part of it.
#![allow(dead_code, unused_imports)]

pub(crate) mod admin;
pub(crate) mod crash;
pub(crate) mod daemon;
pub(crate) mod outputs;
pub(crate) mod relay;
