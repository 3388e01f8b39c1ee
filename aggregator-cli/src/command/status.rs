//! `status`: print a collection's report count and parameters as JSON.

use anyhow::Result;
use ldpcov_proto::v1::GetStatusRequest;

use super::admin::CollectionArgs;

/// The flags of `status`.
pub(crate) type Options = CollectionArgs;

/// Fetches the status and prints it.
pub(crate) async fn run(options: Options) -> Result<()> {
    options
        .print_status(|mut client, collection_id| async move {
            client.get_status(GetStatusRequest { collection_id }).await
        })
        .await
}
