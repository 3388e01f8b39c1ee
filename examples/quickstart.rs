//! The few lines an app developer writes to contribute one user's vector.
//!
//! For a self-contained demo this starts an in-process aggregator and creates the
//! collection (the operator's job); the app's part is marked below.
//!
//! ```text
//! cargo run --example quickstart
//! cargo run --example quickstart -- http://127.0.0.1:50051   # against a running daemon
//! ```

use anyhow::Result;
use ldpcov::aggregator::{EmbeddedServer, Limits};
use ldpcov::client::AggregatorClient;
use ldpcov::proto::v1::CollectionSpec;

#[tokio::main]
async fn main() -> Result<()> {
    // --- operator side (normally `ldpcov-aggregator serve` + `ldpcov-aggregator create`) ---
    let embedded = match std::env::args().nth(1) {
        Some(_) => None,
        None => Some(EmbeddedServer::start(Limits::default()).await?),
    };
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| embedded.as_ref().map(|e| e.url()).unwrap_or_default());
    let mut admin = AggregatorClient::connect(url.clone()).await?;
    admin
        .create_collection(CollectionSpec {
            collection_id: "app-usage".into(),
            dim: 4,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 3.0,
            min_reports: 1,
            encoding: 0,
            ..Default::default()
        })
        .await?;

    // --- app side: this is all a device does ---
    let mut client = AggregatorClient::connect(url).await?;
    let collection = client.collection("app-usage").await?; // σ re-derived locally
    let x = [1.2, 0.0, 2.5, 0.3]; // this user's features: never leave the device
    let outcome = client.submit(&collection, &x).await?; // clip, perturb, encode, send
    println!(
        "sent one report (ε = {}, δ = {}, σ = {:.3}) in {} attempt(s)",
        collection.epsilon(),
        collection.delta(),
        collection.sigma(),
        outcome.attempts
    );

    if let Some(server) = embedded {
        server.shutdown().await?;
    }
    Ok(())
}
