//! Secret files that other users may read: the one check both daemons run on every
//! secret file they read (this crate's master secret, the relay's layer key, tokens,
//! device-token secrets, TLS keys).

use std::path::Path;

/// The permission bits (`mode & 0o777`) of the file at `path` if they grant anything
/// to its group or to others (`mode & 0o077 != 0`): the file should be `chmod 600`.
/// `None` when the file is private, when its metadata cannot be read (the read that
/// follows reports that), and on platforms without Unix modes. Symbolic links are
/// followed: the mode is the target's.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("token");
/// std::fs::write(&path, "secret")?;
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640))?;
/// assert_eq!(ldpcov_seal::loose_permissions(&path), Some(0o640));
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
/// assert_eq!(ldpcov_seal::loose_permissions(&path), None);
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn loose_permissions(path: &Path) -> Option<u32> {
    loose_mode(path)
}

#[cfg(unix)]
fn loose_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn loose_mode(_path: &Path) -> Option<u32> {
    None
}

/// Logs a WARN naming the file, its mode in octal and `chmod 600` when
/// [`loose_permissions`] finds the secret file at `path` open to its group or to
/// others; `what` says which secret it holds ("admin token", "HPKE master secret").
/// Returns what [`loose_permissions`] found. Never refuses the file and never reads
/// its contents.
pub fn warn_if_loose(path: &Path, what: &str) -> Option<u32> {
    let mode = loose_permissions(path)?;
    tracing::warn!(
        path = %path.display(),
        mode = %format_args!("{mode:04o}"),
        "the {what} file grants its group or other users access: chmod 600 it"
    );
    Some(mode)
}

#[cfg(all(test, unix))]
mod tests {
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_file_open_to_group_or_others_is_found_and_a_private_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret");
        fs::write(&path, "s3cret\n").expect("write");
        for (mode, found) in [
            (0o644, Some(0o644)),
            (0o640, Some(0o640)),
            (0o604, Some(0o604)),
            (0o660, Some(0o660)),
            (0o600, None),
            (0o400, None),
            (0o700, None),
        ] {
            fs::set_permissions(&path, Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(loose_permissions(&path), found, "mode {mode:o}");
            assert_eq!(warn_if_loose(&path, "test"), found, "mode {mode:o}");
        }
        // A missing file: nothing found (the read that follows says why).
        assert_eq!(loose_permissions(&dir.path().join("missing")), None);
    }
}
