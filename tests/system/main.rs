//! The workspace's end-to-end tests, one test binary: devices, the real gRPC service
//! in process, the estimators and the privacy checks on what leaves a device. Run one
//! module with `cargo test -p ldpcov --test system shuffle::`.

mod support;

mod bad_input;
mod central;
mod data_e2e;
mod docs;
mod end_to_end;
mod estimators_e2e;
mod joint_moments;
mod mechanisms;
mod operations;
mod planner;
mod shuffle;
mod signal_tests;
mod tls;
