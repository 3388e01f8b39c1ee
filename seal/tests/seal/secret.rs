//! The master secret file.

use std::fs;

use ldpcov_seal::{MasterSecret, SecretError};

#[test]
fn load_or_create_makes_a_private_file_and_reloads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("master.key");
    let created = MasterSecret::load_or_create(&path).expect("create");
    let text = fs::read_to_string(&path).expect("read");
    assert_eq!(text.trim(), hex::encode(created.as_bytes()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).expect("metadata").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let reloaded = MasterSecret::load_or_create(&path).expect("reload");
    assert_eq!(reloaded.as_bytes(), created.as_bytes());
    // Nothing but the key file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["master.key"]);
    // Two fresh secrets differ.
    let other = MasterSecret::load_or_create(dir.path().join("other.key")).expect("create");
    assert_ne!(other.as_bytes(), created.as_bytes());
}

#[test]
fn a_malformed_file_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, contents) in [
        ("short", "abcd\n".to_owned()),
        ("not-hex", "zz".repeat(32)),
        ("long", "00".repeat(33)),
        ("empty", String::new()),
    ] {
        let path = dir.path().join(name);
        fs::write(&path, &contents).expect("write");
        let err = MasterSecret::load_or_create(&path).expect_err(name);
        assert!(
            matches!(err, SecretError::Malformed { .. }),
            "{name}: {err}"
        );
        assert!(err.to_string().contains("malformed"), "{err}");
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            contents,
            "{name} kept"
        );
    }
    // Surrounding whitespace is fine.
    let path = dir.path().join("spaced");
    fs::write(&path, format!("  {}\r\n", "ab".repeat(32))).expect("write");
    let secret = MasterSecret::load_or_create(&path).expect("load");
    assert_eq!(secret.as_bytes(), &[0xab; 32]);
}

#[test]
fn a_missing_directory_is_an_io_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = MasterSecret::load_or_create(dir.path().join("no/such/dir/key")).expect_err("io");
    assert!(matches!(err, SecretError::Io { .. }), "{err}");
}

#[test]
fn debug_does_not_print_the_secret() {
    let secret = MasterSecret::from_bytes([0xab; 32]);
    let shown = format!("{secret:?}");
    assert!(!shown.contains("ab") && !shown.contains("171"), "{shown}");
    let generated = MasterSecret::generate().expect("generate");
    assert!(!format!("{generated:?}").contains(&hex::encode(&generated.as_bytes()[..4])));
}

/// What the `tracing` events logged while `run` ran say, as plain text lines.
#[cfg(unix)]
fn logged(run: impl FnOnce()) -> String {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer({
            let capture = capture.clone();
            move || capture.clone()
        })
        .finish();
    tracing::subscriber::with_default(subscriber, run);
    let bytes = capture.0.lock().expect("lock").clone();
    String::from_utf8(bytes).expect("utf-8")
}

#[cfg(unix)]
#[test]
fn a_secret_file_other_users_may_read_is_loaded_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("master.key");
    let created = MasterSecret::load_or_create(&path).expect("create");
    let quiet = logged(|| {
        MasterSecret::load_or_create(&path).expect("load");
    });
    assert_eq!(quiet, "", "a 0600 file is loaded without a word");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut loaded = None;
    let logs = logged(|| loaded = Some(MasterSecret::load_or_create(&path).expect("load")));
    assert_eq!(
        loaded.expect("loaded").as_bytes(),
        created.as_bytes(),
        "still loaded"
    );
    assert!(logs.contains("WARN"), "{logs}");
    assert!(logs.contains(&path.display().to_string()), "{logs}");
    assert!(logs.contains("0644"), "{logs}");
    assert!(logs.contains("chmod 600"), "{logs}");
    assert!(
        !logs.contains(&hex::encode(created.as_bytes())),
        "no secret in {logs}"
    );
    assert_eq!(ldpcov_seal::loose_permissions(&path), Some(0o644));
}
