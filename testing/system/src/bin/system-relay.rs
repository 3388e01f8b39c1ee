//! The relay under test: exactly `ldpcov-relay`'s `main` (`ldpcov_relay_cli::command::main`),
//! as this package's binary so that the system tests find it through
//! `CARGO_BIN_EXE_system-relay`.

fn main() -> std::process::ExitCode {
    ldpcov_relay_cli::command::main()
}
