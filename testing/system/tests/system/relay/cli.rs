//! The `ldpcov-relay` binary's command line: `issue-device-token`, environment
//! variables, and one-line errors with a non-zero exit on bad input.

use ldpcov_relay::DeviceTokenIssuer;

use crate::support::relay::relay_command as relay;

/// Writes a secret file as an operator should, mode 0600: a file other users may read
/// is taken with a WARN, a second stderr line before a refusal's one line.
fn write_secret(path: &std::path::Path, contents: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

#[test]
fn issue_device_token_prints_a_token_the_relay_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    write_secret(&secret, format!("{}\n", "0f".repeat(32)));
    let out = relay()
        .args(["issue-device-token", "--device-token-secret-file"])
        .arg(&secret)
        .env("LDPCOV_RELAY_DEVICE_ID", "phone-7")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).expect("utf-8");
    let issuer = DeviceTokenIssuer::from_bytes([0x0f; 32]);
    assert_eq!(
        issuer.verify(token.trim()).expect("valid").as_bytes(),
        b"phone-7"
    );
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = dir.path().join("short");
    write_secret(&short, "abcd");
    let token = dir.path().join("token");
    write_secret(&token, "relay-token");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            vec![
                "issue-device-token".into(),
                "--device-token-secret-file".into(),
                short.clone().into(),
                "--device-id".into(),
                "x".into(),
            ],
            "64 hex digits",
        ),
        (
            vec![
                "issue-device-token".into(),
                "--device-token-secret-file".into(),
                dir.path().join("missing").into(),
                "--device-id".into(),
                "x".into(),
            ],
            "cannot read",
        ),
        (
            vec![
                "serve".into(),
                "--insecure-plaintext".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--aggregator".into(),
                "ftp://nope".into(),
                "--relay-token-file".into(),
                token.clone().into(),
                "--device-token-secret-file".into(),
                short.clone().into(),
                "--data-dir".into(),
                dir.path().join("data").into(),
            ],
            "64 hex digits",
        ),
    ];
    for (args, expected) in cases {
        let out = relay().args(&args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expected),
            "{stderr}"
        );
    }
    // A bad device id.
    write_secret(&short, "ab".repeat(32));
    let out = relay()
        .args([
            "issue-device-token",
            "--device-id",
            "a b",
            "--device-token-secret-file",
        ])
        .arg(&short)
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("device id"));
    // A bad aggregator URL.
    let out = relay()
        .args([
            "serve",
            "--insecure-plaintext",
            "--listen",
            "127.0.0.1:0",
            "--aggregator",
            "ftp://nope",
            "--relay-token-file",
        ])
        .arg(&token)
        .arg("--device-token-secret-file")
        .arg(&short)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("invalid aggregator URL"),
        "{stderr}"
    );
}

/// Valid files for `serve`: a relay token, a device secret, a data directory.
fn serve_args(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let token = dir.join("token");
    write_secret(&token, "relay-token-0123456789");
    let secret = dir.join("secret");
    write_secret(&secret, "ab".repeat(32));
    vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--aggregator".into(),
        "http://127.0.0.1:9".into(),
        "--relay-token-file".into(),
        token.into(),
        "--device-token-secret-file".into(),
        secret.into(),
        "--data-dir".into(),
        dir.join("data").into(),
    ]
}

#[test]
fn serve_refuses_plaintext_without_the_test_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = relay().args(serve_args(dir.path())).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served without TLS: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("--tls-cert")
            && stderr.contains("--insecure-plaintext"),
        "{stderr}"
    );
    // Nothing was created: it stopped before opening its store.
    assert!(!dir.path().join("data").exists());
    // TLS and the test flag together make no sense.
    let out = relay()
        .args(serve_args(dir.path()))
        .args([
            "--insecure-plaintext",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    // A floor below 2 reports.
    let out = relay()
        .args(serve_args(dir.path()))
        .args(["--insecure-plaintext", "--min-batch-size", "1"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--min-batch-size must be at least 2"),
        "{stderr}"
    );
}

/// Flags, environment variables, and the error `serve` must fail with.
type WebCase = (Vec<&'static str>, Vec<(&'static str, String)>, String);

#[test]
fn bad_grpc_web_flags_are_refused_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let origin = "http://localhost:8080";
    let mut cases: Vec<WebCase> = vec![
        (
            vec!["--grpc-web-origin", origin],
            Vec::new(),
            "--grpc-web-origin needs --grpc-web".into(),
        ),
        // The same through the environment.
        (
            Vec::new(),
            vec![("LDPCOV_RELAY_GRPC_WEB_ORIGINS", origin.to_string())],
            "--grpc-web-origin needs --grpc-web".into(),
        ),
    ];
    for bad in [
        "https://app.example.com/",
        "https://app.example.com/path",
        "app.example.com",
        "ftp://app.example.com",
    ] {
        cases.push((
            vec![
                "--grpc-web",
                "--grpc-web-origin",
                origin,
                "--grpc-web-origin",
                bad,
            ],
            Vec::new(),
            format!("--grpc-web-origin {bad:?} is not an origin"),
        ));
        cases.push((
            Vec::new(),
            vec![
                ("LDPCOV_RELAY_GRPC_WEB", "true".to_string()),
                ("LDPCOV_RELAY_GRPC_WEB_ORIGINS", format!("{origin},{bad}")),
            ],
            format!("--grpc-web-origin {bad:?} is not an origin"),
        ));
    }
    for (args, env, expected) in cases {
        let out = relay()
            .args(serve_args(dir.path()))
            .arg("--insecure-plaintext")
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} {env:?} served: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(&expected),
            "{args:?} {env:?}: {stderr}"
        );
        // Refused before the store was opened.
        assert!(!dir.path().join("data").exists(), "{args:?} {env:?}");
    }
}
