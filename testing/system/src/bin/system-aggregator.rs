//! The aggregator under test: exactly `ldpcov-aggregator`'s `main`
//! (`ldpcov_aggregator_cli::command::main`), as this package's binary so that the system tests
//! find it through `CARGO_BIN_EXE_system-aggregator`.

fn main() -> std::process::ExitCode {
    ldpcov_aggregator_cli::command::main()
}
