//! `ldpcov-relay-cli`: the `ldpcov-relay` binary's command line, as a library so that
//! the system tests' helper binary runs exactly the binary's `main`
//! ([`command::main`]).
//!
//! * `serve` — checks its flags, opens the relay's store, loads its layer key and runs
//!   the relay (`ldpcov_relay::serve`) until SIGTERM or Ctrl-C;
//! * `issue-device-token` — prints a device's token.
//!
//! The relay itself (its service, store, forwarder, tokens) is the `ldpcov-relay`
//! library; the flags both daemons declare, the Prometheus exporter and the process's
//! `main` are `ldpcov-serve`'s. This crate holds only the command line.
//!
//! ```
//! // The layer key's default file in `serve --data-dir`, shown by `--help`.
//! assert_eq!(ldpcov_relay::constants::LAYER_KEY_FILE, "relay-layer.key");
//! // The binary's whole `main`.
//! let _main: fn() -> std::process::ExitCode = ldpcov_relay_cli::command::main;
//! ```

pub mod command;
