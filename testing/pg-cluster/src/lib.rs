//! Test support: a throwaway PostgreSQL cluster for the tests of the PostgreSQL store.
//!
//! [`PgCluster::start`] runs `initdb` into a fresh temporary directory, starts the
//! server with `pg_ctl` on a free loopback port (its Unix socket in the same
//! directory, trust authentication, listening on `127.0.0.1` only) and waits until it
//! accepts connections; [`PgCluster::create_database`] makes one database per test.
//! Dropping the cluster stops the server at once (`pg_ctl -m immediate stop`) and
//! removes the directory.
//!
//! The server binaries are found with `pg_config --bindir` (Debian keeps `initdb` and
//! `pg_ctl` off `PATH`). PostgreSQL refuses to run as root, so when the tests run as
//! root the directory is handed to the `postgres` user and the server commands run
//! through `runuser -u postgres --`.
//!
//! **Invariant:** nothing here skips. If PostgreSQL is missing or cannot start,
//! [`PgCluster::start`] returns an error whose one-line message says why, and
//! [`PgCluster::start_or_panic`] turns it into a test failure. `.ci/run` installs
//! PostgreSQL where it is missing.
//!
//! The cluster runs with `fsync=off`: the tests kill aggregator replicas, never the
//! machine, and an immediate stop of the server loses nothing the operating system
//! already holds. `shared_buffers` is 32 MB, so that the clusters of tests running in
//! parallel stay small.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;
use thiserror::Error;

/// The superuser the cluster is created with (trust authentication, no password).
pub const SUPERUSER: &str = "postgres";

/// Why a cluster could not be started or a database created.
#[derive(Debug, Error)]
pub enum ClusterError {
    /// `pg_config` is not on `PATH`: PostgreSQL is not installed.
    #[error(
        "PostgreSQL is not installed: `pg_config` is not on PATH (install the postgresql package; .ci/run does)"
    )]
    NotInstalled,
    /// A command could not be run at all.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A command ran and failed.
    #[error("{what} failed: {detail}")]
    Failed {
        /// What was attempted.
        what: String,
        /// The last line of its output (or of the server log).
        detail: String,
    },
    /// The temporary directory or a free port could not be had.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
}

/// A running throwaway PostgreSQL server; stopped and deleted on drop.
#[derive(Debug)]
pub struct PgCluster {
    dir: TempDir,
    bindir: PathBuf,
    port: u16,
    as_postgres: bool,
    stopped: bool,
}

impl PgCluster {
    /// Creates and starts a cluster on a free loopback port (a few seconds: `initdb`).
    pub fn start() -> Result<Self, ClusterError> {
        let bindir = bindir()?;
        let as_postgres = is_root()?;
        let dir = tempfile::Builder::new()
            .prefix("ldpcov-pg-")
            .tempdir()
            .map_err(|source| ClusterError::Io {
                what: "cannot create a temporary directory",
                source,
            })?;
        if as_postgres {
            run(
                Command::new("chown")
                    .arg(format!("{SUPERUSER}:"))
                    .arg(dir.path()),
                "chown of the cluster directory to the postgres user",
            )?;
        }
        let data = dir.path().join("data");
        let mut initdb = server_command(&bindir, "initdb", as_postgres);
        initdb.arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(&mut initdb, "initdb")?;
        let mut cluster = PgCluster {
            dir,
            bindir,
            port: 0,
            as_postgres,
            stopped: true,
        };
        // A free port may be taken between the probe and the server's bind: retry.
        let mut last = None;
        for _ in 0..3 {
            cluster.port = free_port()?;
            match cluster.pg_ctl_start() {
                Ok(()) => {
                    cluster.stopped = false;
                    return Ok(cluster);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClusterError::Failed {
            what: "pg_ctl start".into(),
            detail: "no attempt".into(),
        }))
    }

    /// [`start`](PgCluster::start), panicking with its one-line reason: a test that
    /// needs PostgreSQL fails (never skips) when it is missing.
    pub fn start_or_panic() -> Self {
        match Self::start() {
            Ok(c) => c,
            Err(e) => panic!("cannot start a PostgreSQL test cluster: {e}"),
        }
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, ClusterError> {
        let mut createdb = Command::new(self.bindir.join("createdb"));
        createdb
            .args(["-h", "127.0.0.1", "-U", SUPERUSER, "-p"])
            .arg(self.port.to_string())
            .arg(name);
        run(&mut createdb, &format!("createdb {name}"))?;
        Ok(self.url(name))
    }

    /// [`create_database`](PgCluster::create_database), panicking with the reason.
    pub fn database_or_panic(&self, name: &str) -> String {
        match self.create_database(name) {
            Ok(url) => url,
            Err(e) => panic!("cannot create test database {name}: {e}"),
        }
    }

    /// Stops the server at once (`pg_ctl -m immediate stop`), as a crash would: tests
    /// of a database that goes away. Dropping the cluster does it too.
    pub fn stop(&mut self) -> Result<(), ClusterError> {
        if self.stopped {
            return Ok(());
        }
        let mut stop = server_command(&self.bindir, "pg_ctl", self.as_postgres);
        stop.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"]);
        run(&mut stop, "pg_ctl stop")?;
        self.stopped = true;
        Ok(())
    }

    /// Starts the server again after [`stop`](PgCluster::stop), on the same port.
    pub fn restart(&mut self) -> Result<(), ClusterError> {
        if self.stopped {
            self.pg_ctl_start()?;
            self.stopped = false;
        }
        Ok(())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl_start(&self) -> Result<(), ClusterError> {
        let log = self.dir.path().join("server.log");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=32MB",
            self.port,
            self.dir.path().display()
        );
        let mut start = server_command(&self.bindir, "pg_ctl", self.as_postgres);
        start
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o", &options, "start"]);
        run(&mut start, "pg_ctl start").map_err(|e| match last_line_of(&log) {
            Some(line) => ClusterError::Failed {
                what: "pg_ctl start".into(),
                detail: line,
            },
            None => e,
        })
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("cannot stop the PostgreSQL test cluster: {e}");
        }
    }
}

/// `pg_config --bindir`.
fn bindir() -> Result<PathBuf, ClusterError> {
    let out = match Command::new("pg_config").arg("--bindir").output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClusterError::NotInstalled);
        }
        Err(source) => {
            return Err(ClusterError::Spawn {
                program: "pg_config".into(),
                source,
            });
        }
    };
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !dir.join("initdb").exists() {
        return Err(ClusterError::Failed {
            what: "pg_config --bindir".into(),
            detail: format!(
                "no initdb in {:?} (install the postgresql server package)",
                dir
            ),
        });
    }
    Ok(dir)
}

/// Whether this process runs as root (then the server runs as `postgres`).
fn is_root() -> Result<bool, ClusterError> {
    let out = output(Command::new("id").arg("-u"), "id -u")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn server_command(bindir: &Path, program: &str, as_postgres: bool) -> Command {
    if as_postgres {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", SUPERUSER, "--"]).arg(bindir.join(program));
        cmd
    } else {
        Command::new(bindir.join(program))
    }
}

fn free_port() -> Result<u16, ClusterError> {
    let probe = TcpListener::bind("127.0.0.1:0").map_err(|source| ClusterError::Io {
        what: "cannot find a free loopback port",
        source,
    })?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|source| ClusterError::Io {
            what: "cannot find a free loopback port",
            source,
        })
}

fn output(cmd: &mut Command, what: &str) -> Result<Output, ClusterError> {
    cmd.output().map_err(|source| ClusterError::Spawn {
        program: what.to_string(),
        source,
    })
}

/// Runs `cmd`; on failure the error holds the last line it printed.
fn run(cmd: &mut Command, what: &str) -> Result<(), ClusterError> {
    let out = output(cmd, what)?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let detail = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map_or_else(|| out.status.to_string(), str::to_string);
    Err(ClusterError::Failed {
        what: what.to_string(),
        detail,
    })
}

fn last_line_of(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_serves_and_stops() {
        let mut pg = PgCluster::start_or_panic();
        let url = pg.database_or_panic("probe");
        assert!(url.ends_with(&format!(":{}/probe", pg.port())), "{url}");
        // A second database of the same name is refused: the server really runs.
        assert!(pg.create_database("probe").is_err());
        pg.stop().unwrap();
        assert!(pg.create_database("other").is_err());
    }
}
