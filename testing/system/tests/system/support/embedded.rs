//! The real aggregator in process (`ldpcov_aggregator::EmbeddedServer` on
//! 127.0.0.1:0 over a memory store) and a client of it: [`seeded_server`] without
//! tokens and with reproducible device noise, [`embedded_aggregator`] with an admin
//! token and [`RELAY_TOKEN`] for relays.

use std::sync::Arc;

/// The token relays present to the aggregator ([`aggregator_auth`]).
pub(crate) const RELAY_TOKEN: &str = "relay-token-0123456789";

/// An embedded aggregator's auth: the admin token `admin` and [`RELAY_TOKEN`] as the
/// relay's identity.
pub(crate) fn aggregator_auth(admin: &str) -> ldpcov_aggregator::AuthConfig {
    use ldpcov_aggregator::{AuthConfig, Token};
    AuthConfig::new(Some(Token::new(admin, "admin").expect("admin")), Vec::new())
        .expect("auth")
        .with_relay_tokens(vec![Token::new(RELAY_TOKEN, "relay").expect("relay")])
        .expect("relay tokens")
}

/// The real aggregator in process over a memory store, with the admin token `admin`
/// and [`RELAY_TOKEN`] for relays ([`aggregator_auth`]), and a client of it holding
/// the admin token.
pub(crate) async fn embedded_aggregator(
    admin: &str,
) -> (
    ldpcov_aggregator::EmbeddedServer,
    ldpcov_client::AggregatorClient,
) {
    let aggregator = ldpcov_aggregator::EmbeddedServer::start_with_options(
        Arc::new(ldpcov_aggregator::MemoryStore::new()),
        ldpcov_aggregator::ServeOptions {
            limits: ldpcov_aggregator::Limits::default(),
            auth: Arc::new(aggregator_auth(admin)),
            ..ldpcov_aggregator::ServeOptions::default()
        },
    )
    .await
    .expect("aggregator");
    let client = ldpcov_client::AggregatorClient::connect(aggregator.url())
        .await
        .expect("connect")
        .with_token(admin.into())
        .expect("token");
    (aggregator, client)
}

/// An embedded server on 127.0.0.1:0, its URL, and a client connected to it whose
/// device noise is drawn from a seeded sampler (`noise_seed`), so that a test's
/// reports are reproducible.
pub(crate) async fn seeded_server(
    noise_seed: u64,
) -> (
    ldpcov_aggregator::EmbeddedServer,
    String,
    ldpcov_client::AggregatorClient,
) {
    let server = ldpcov_aggregator::EmbeddedServer::start(ldpcov_aggregator::Limits::default())
        .await
        .unwrap();
    let url = server.url();
    let client = seeded_client(&url, noise_seed).await;
    (server, url, client)
}

/// A client of the aggregator at `url` whose noise is the real sampler seeded with
/// `noise_seed` (simulation only: its reports are reproducible).
pub(crate) async fn seeded_client(url: &str, noise_seed: u64) -> ldpcov_client::AggregatorClient {
    ldpcov_client::AggregatorClient::connect(url.to_string())
        .await
        .expect("connect")
        .with_noise_sampler(Box::new(
            ldpcov_client::DiscreteGaussianSampler::from_seed_for_simulation(noise_seed),
        ))
}
