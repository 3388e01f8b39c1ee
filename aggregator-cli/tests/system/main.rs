//! The `ldpcov-aggregator` binary's own tests, the ones that need no daemon (those
//! with daemons are in `testing/system/`): what it does when its reader goes away.

use std::process::{Command, Stdio};

/// Runs the binary with `args`, its standard output a pipe whose reading end is
/// closed before the binary starts (`… | head` after `head` has exited); its exit
/// success and its standard error.
fn run_with_closed_stdout(args: &[&str]) -> (bool, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_ldpcov-aggregator"))
        .args(args)
        .env_remove("LDPCOV_LOG")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run ldpcov-aggregator");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_is_no_panic() {
    for args in [
        &["--help"][..],
        &["estimate", "--help"],
        &["plan", "--dim", "20", "--epsilon", "1", "--users", "1000"],
    ] {
        let (success, stderr) = run_with_closed_stdout(args);
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
        assert!(success, "{args:?} failed:\n{stderr}");
        assert!(stderr.trim().is_empty(), "{args:?} said:\n{stderr}");
    }
}
