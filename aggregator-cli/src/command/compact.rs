//! `compact`: shrink the database file of a stopped daemon and print its size before
//! and after as JSON.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use ldpcov_aggregator::DurableStore;

use super::serve::DEFAULT_DATA_DIR;

/// The flags of `compact`.
#[derive(clap::Args)]
pub(crate) struct Options {
    /// Directory of the durable store; the daemon using it must be stopped.
    #[arg(long, env = "LDPCOV_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
}

impl Options {
    /// Compacts the store's file.
    pub(crate) fn run(self) -> Result<()> {
        // One line: the error's own message already includes its redb cause.
        let (before, after) = DurableStore::compact(&self.data_dir).map_err(|e| {
            anyhow!(
                "cannot compact the store in {} (is a daemon still using it?): {e}",
                self.data_dir.display()
            )
        })?;
        super::admin::print_json(&serde_json::json!({
            "data_dir": self.data_dir.display().to_string(),
            "bytes_before": before,
            "bytes_after": after,
        }))
    }
}
