//! `ldpcov-relay`: the anonymising relay daemon and its device-token tool
//! (`ldpcov_relay_cli::command`, where the subcommands live).

fn main() -> std::process::ExitCode {
    ldpcov_relay_cli::command::main()
}
