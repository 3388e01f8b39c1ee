//! The data directory 0700 and the database file 0600, whatever the umask: a new
//! directory or file gets its mode explicitly, and an existing one open to its group
//! or to others is tightened, with a WARN, once the file was accepted (a refused file
//! keeps the refusal to one line and is left as it was). The relay makes its store
//! private the same way (`relay/src/store.rs`, `RelayStore::open_with` and
//! `prepare_file`).

use std::io;
use std::path::Path;

use super::DurableError;

/// The data directory's mode.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
/// The database file's mode.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> DurableError + '_ {
    move |source| DurableError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` and its missing parents, a new `dir` with mode 0700 (an existing one
/// is left to [`make_private`]).
#[cfg(unix)]
pub(super) fn create_dir(dir: &Path) -> Result<(), DurableError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io_error(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE)).map_err(io_error(dir))
}

/// Makes the accepted database file at `path` and its directory private: creates a
/// missing file with mode 0600 (redb then initialises the empty file), and tightens an
/// existing file or directory open to its group or to others (0600, 0700), with a WARN.
#[cfg(unix)]
pub(super) fn make_private(path: &Path) -> Result<(), DurableError> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tighten(dir, DIR_MODE, "data directory")?;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path);
    match created {
        Ok(_) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(io_error(path))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            tighten(path, FILE_MODE, "database file")
        }
        Err(e) => Err(io_error(path)(e)),
    }
}

/// Sets `path` to `mode` if it grants anything to its group or to others, with a WARN.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32, what: &str) -> Result<(), DurableError> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::metadata(path)
        .map_err(io_error(path))?
        .permissions()
        .mode()
        & 0o777;
    if current & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_error(path))?;
    tracing::warn!(
        path = %path.display(),
        from = %format_args!("{current:04o}"),
        to = %format_args!("{mode:04o}"),
        "the store's {what} was open to other users (mode {current:04o}): made it {mode:04o}"
    );
    Ok(())
}

/// Creates `dir` and its missing parents (no modes off Unix).
#[cfg(not(unix))]
pub(super) fn create_dir(dir: &Path) -> Result<(), DurableError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))
}

/// Nothing to do off Unix: redb creates the file.
#[cfg(not(unix))]
pub(super) fn make_private(_path: &Path) -> Result<(), DurableError> {
    Ok(())
}
