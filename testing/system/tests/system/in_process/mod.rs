//! The end-to-end tests with the aggregator in process (`support::embedded`): devices,
//! the real gRPC service, the estimators and the privacy checks on what leaves a
//! device. Run one module with
//! `cargo test -p ldpcov-system-tests --test system in_process::shuffle::`.

mod bad_input;
mod central;
mod data_e2e;
mod end_to_end;
mod estimators_e2e;
mod joint_moments;
mod mechanisms;
mod operations;
mod radius_phase;
mod shuffle;
mod tls;
pub(crate) mod two_aggregator;
