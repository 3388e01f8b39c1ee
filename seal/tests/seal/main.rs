//! `ldpcov-seal`'s tests through its public API, one test binary: the RFC 9180
//! vectors, sealing and opening, the key schedule and the master secret.

mod rfc9180;
mod schedule;
mod seal_open;
mod secret;
