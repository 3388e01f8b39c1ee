//! `delete`: delete a collection for good (spec, sums, seen report ids) and print how
//! many reports it had counted as JSON. Refuses without `--yes`.

use anyhow::{Result, bail};
use ldpcov_proto::v1::DeleteCollectionRequest;

use super::admin::{ServerArgs, print_json, status_error};

/// The flags of `delete`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
    /// Confirms the deletion: its sums and seen report ids cannot be recovered.
    #[arg(long)]
    yes: bool,
}

impl Options {
    /// Deletes the collection (after checking `--yes`, before any connection).
    pub(crate) async fn run(self) -> Result<()> {
        if !self.yes {
            bail!(
                "deleting collection {:?} removes its sums and seen report ids for good; add --yes to confirm",
                self.id
            );
        }
        let response = self
            .server
            .connect()
            .await?
            .delete_collection(DeleteCollectionRequest {
                collection_id: self.id.clone(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&serde_json::json!({
            "collection_id": self.id,
            "deleted": true,
            "reports": response.reports,
        }))
    }
}
