//! `close`: close a collection for good and print its status as JSON.

use anyhow::Result;
use ldpcov_proto::v1::CloseCollectionRequest;

use super::admin::CollectionArgs;

/// The flags of `close`.
pub(crate) type Options = CollectionArgs;

/// Closes the collection and prints the status the daemon answers with.
pub(crate) async fn run(options: Options) -> Result<()> {
    options
        .print_status(|mut client, collection_id| async move {
            client
                .close_collection(CloseCollectionRequest { collection_id })
                .await
        })
        .await
}
