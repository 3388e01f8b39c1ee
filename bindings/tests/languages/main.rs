//! The bindings' end-to-end tests, one test binary: the Kotlin and Python bindings
//! generated from this build's library, run against an in-process aggregator.

mod common;

mod kotlin;
mod python;
