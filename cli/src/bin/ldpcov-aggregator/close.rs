//! `close`: close a collection for good and print its status as JSON.

use anyhow::Result;
use ldpcov_proto::v1::CloseCollectionRequest;

use crate::admin::{ServerArgs, print_json, status_error, status_json};

/// The flags of `close`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
}

impl Options {
    /// Closes the collection and prints the status the daemon answers with.
    pub(crate) async fn run(self) -> Result<()> {
        let status = self
            .server
            .connect()
            .await?
            .close_collection(CloseCollectionRequest {
                collection_id: self.id,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&status_json(&status))
    }
}
