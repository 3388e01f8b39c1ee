//! Running the service: on a listener until a shutdown signal, or embedded in-process
//! on `127.0.0.1:0` for tests, examples and the load generator.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use ldpcov_proto::v1::aggregator_server::AggregatorServer;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

use crate::service::{AggregatorService, Limits};
use crate::store::{MemoryStore, Store};

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or reading the listen address failed.
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    /// The gRPC transport failed.
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves `store` on `listener` until `shutdown` completes, then drains in-flight calls.
pub async fn serve(
    store: Arc<dyn Store>,
    limits: Limits,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let service = AggregatorServer::new(AggregatorService::new(store, limits))
        .max_decoding_message_size(limits.max_decoding_message_size())
        .max_encoding_message_size(limits.max_encoding_message_size());
    tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await?;
    Ok(())
}

/// An aggregator running inside this process (tests, examples, the load generator).
pub struct EmbeddedServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl EmbeddedServer {
    /// Starts an in-memory aggregator on `127.0.0.1:0`.
    pub async fn start(limits: Limits) -> Result<Self, ServeError> {
        Self::start_with_store(Arc::new(MemoryStore::new()), limits).await
    }

    /// Starts an aggregator over `store` on `127.0.0.1:0`.
    pub async fn start_with_store(
        store: Arc<dyn Store>,
        limits: Limits,
    ) -> Result<Self, ServeError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(serve(store, limits, listener, async {
            let _ = rx.await;
        }));
        Ok(EmbeddedServer {
            addr,
            shutdown: Some(tx),
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
        }
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
