//! `compact`: shrink the database file of a stopped daemon and print its size before
//! and after as JSON.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ldpcov_aggregator::DurableStore;

use crate::serve::DEFAULT_DATA_DIR;

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
        let (before, after) = DurableStore::compact(&self.data_dir).with_context(|| {
            format!(
                "cannot compact the store in {} (is a daemon still using it?)",
                self.data_dir.display()
            )
        })?;
        crate::admin::print_json(&serde_json::json!({
            "data_dir": self.data_dir.display().to_string(),
            "bytes_before": before,
            "bytes_after": after,
        }))
    }
}
