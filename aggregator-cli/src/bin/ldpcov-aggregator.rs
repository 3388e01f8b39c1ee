//! `ldpcov-aggregator`: the aggregator daemon and its admin command line
//! (`ldpcov_aggregator_cli::command`, where the subcommands live).

fn main() -> std::process::ExitCode {
    ldpcov_aggregator_cli::command::main()
}
