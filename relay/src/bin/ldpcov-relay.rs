//! `ldpcov-relay`: the anonymising relay daemon and its device-token tool
//! (`ldpcov_relay::command`).

fn main() -> std::process::ExitCode {
    ldpcov_relay::command::main()
}
