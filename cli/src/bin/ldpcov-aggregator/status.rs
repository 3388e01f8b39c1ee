//! `status`: print a collection's report count and parameters as JSON.

use anyhow::Result;
use ldpcov_proto::v1::GetStatusRequest;

use crate::admin::{ServerArgs, print_json, status_error, status_json};

/// The flags of `status`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
}

impl Options {
    /// Fetches the status and prints it.
    pub(crate) async fn run(self) -> Result<()> {
        let status = self
            .server
            .connect()
            .await?
            .get_status(GetStatusRequest {
                collection_id: self.id,
            })
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&status_json(&status))
    }
}
