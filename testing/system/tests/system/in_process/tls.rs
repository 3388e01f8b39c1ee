//! TLS end to end: a self-signed certificate made in the test (rcgen), the real
//! server with rustls, the client trusting that certificate as its CA.

use ldpcov_fixtures as fixtures;
use std::sync::Arc;

use ldpcov_aggregator::Limits;
use ldpcov_aggregator::MemoryStore;
use ldpcov_aggregator::ServerTls;
use ldpcov_aggregator::{AuthConfig, Token};
use ldpcov_aggregator::{EmbeddedServer, ServeOptions};
use ldpcov_client::{AggregatorClient, ClientError, DiscreteGaussianSampler, RetryPolicy};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{CollectionSpec, Encoding, GetStatusRequest};

struct SelfSigned {
    cert_pem: String,
    key_pem: String,
}

fn self_signed() -> SelfSigned {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("rcgen certificate");
    SelfSigned {
        cert_pem: key.cert.pem(),
        key_pem: key.signing_key.serialize_pem(),
    }
}

fn spec(id: &str) -> CollectionSpec {
    fixtures::spec(id, 3).encoding(Encoding::I32Le).build()
}

const ADMIN: &str = "tls-admin-token-0123456789";

async fn tls_server(cert: &SelfSigned) -> EmbeddedServer {
    EmbeddedServer::start_with_options(
        Arc::new(MemoryStore::new()),
        ServeOptions {
            limits: Limits { max_dim: 16 },
            tls: Some(ServerTls::from_pem(
                cert.cert_pem.as_bytes(),
                cert.key_pem.as_bytes(),
            )),
            auth: Arc::new(
                AuthConfig::new(Some(Token::new(ADMIN, "admin").unwrap()), Vec::new()).unwrap(),
            ),
            ..ServeOptions::default()
        },
    )
    .await
    .expect("TLS server")
}

fn https_url(server: &EmbeddedServer) -> String {
    format!("https://localhost:{}", server.addr().port())
}

#[tokio::test]
async fn reports_and_status_over_tls() {
    let cert = self_signed();
    let server = tls_server(&cert).await;
    let url = https_url(&server);
    let mut admin = AggregatorClient::connect_with_tls(url.clone(), Some(cert.cert_pem.as_bytes()))
        .await
        .expect("TLS connect")
        .with_token(ADMIN.into())
        .unwrap();
    admin.create_collection(spec("t")).await.unwrap();

    let mut device =
        AggregatorClient::connect_with_tls(url.clone(), Some(cert.cert_pem.as_bytes()))
            .await
            .expect("TLS connect")
            .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
                5,
            )));
    let c = device.collection("t").await.unwrap();
    for i in 0..3 {
        let out = device
            .submit(&c, &[0.1 * i as f64, 0.2, 0.3])
            .await
            .unwrap();
        assert!(!out.duplicate);
    }
    let reports: Vec<_> = (0..4)
        .map(|_| device.prepare_report(&c, &[0.3, 0.2, 0.1]).unwrap())
        .collect();
    assert_eq!(device.submit_stream(reports).await.unwrap().accepted, 4);
    let status = device.status("t").await.unwrap();
    assert_eq!(status.reports, 7);
    assert!(status.releasable);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_plaintext_client_cannot_talk_to_a_tls_server() {
    let cert = self_signed();
    let server = tls_server(&cert).await;
    let mut admin =
        AggregatorClient::connect_with_tls(https_url(&server), Some(cert.cert_pem.as_bytes()))
            .await
            .unwrap()
            .with_token(ADMIN.into())
            .unwrap();
    admin.create_collection(spec("p")).await.unwrap();

    // h2c to a TLS port: the TCP connection opens, the gRPC call cannot succeed.
    let plain = format!("http://127.0.0.1:{}", server.addr().port());
    match RawClient::connect(plain).await {
        Err(_) => {}
        Ok(mut raw) => {
            let call = raw.get_status(GetStatusRequest {
                collection_id: "p".into(),
            });
            let result = tokio::time::timeout(std::time::Duration::from_secs(10), call).await;
            assert!(
                !matches!(result, Ok(Ok(_))),
                "a plaintext call to the TLS server succeeded"
            );
        }
    }
    // With the library client (one attempt): an error, never an answer.
    let plain = format!("http://localhost:{}", server.addr().port());
    if let Ok(client) = AggregatorClient::connect(plain).await {
        let mut client = client
            .with_retry(RetryPolicy::no_retries())
            .with_timeout(std::time::Duration::from_secs(10));
        assert!(client.status("p").await.is_err());
    }
    assert_eq!(admin.status("p").await.unwrap().reports, 0);
    server.shutdown().await.unwrap();
}

/// A client whose CA is another self-signed certificate must not get any answer from
/// the server: collection "x" exists and its status needs no token, so a call that
/// got through the handshake would succeed. Refusal is either the connect failing on
/// the certificate or, should the channel open, the call failing in the transport
/// (UNAVAILABLE), never an answer from the service.
#[tokio::test]
async fn a_client_that_does_not_trust_the_certificate_is_refused() {
    let cert = self_signed();
    let server = tls_server(&cert).await;
    let mut admin =
        AggregatorClient::connect_with_tls(https_url(&server), Some(cert.cert_pem.as_bytes()))
            .await
            .unwrap()
            .with_token(ADMIN.into())
            .unwrap();
    admin.create_collection(spec("x")).await.unwrap();
    assert_eq!(admin.status("x").await.unwrap().reports, 0);

    let other = self_signed();
    let result =
        AggregatorClient::connect_with_tls(https_url(&server), Some(other.cert_pem.as_bytes()))
            .await;
    match result {
        Err(e) => {
            let text = e.to_string();
            assert!(
                matches!(e, ClientError::Transport(_)) && text.contains("certificate"),
                "{text}"
            );
        }
        Ok(client) => {
            let mut client = client.with_retry(RetryPolicy::no_retries());
            match client.status("x").await {
                Ok(status) => panic!("an untrusted certificate was accepted: {status:?}"),
                Err(e) => assert_eq!(
                    e.status().map(|s| s.code()),
                    Some(tonic::Code::Unavailable),
                    "not a transport failure: {e}"
                ),
            }
        }
    }
    // The bundled web PKI roots do not include a self-signed test certificate.
    assert!(
        AggregatorClient::connect_with_tls(https_url(&server), None)
            .await
            .is_err()
    );
    server.shutdown().await.unwrap();
}
