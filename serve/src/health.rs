//! The gRPC health service and reflection a daemon serves beside its own service.

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Server;
use tonic::transport::server::Router;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

/// The standard gRPC health service (`grpc.health.v1.Health`) of a daemon: `""` (the
/// whole server) and the daemon's own service (e.g. `ldpcov.v1.Aggregator`) always
/// hold the same status.
#[derive(Debug, Clone)]
pub struct Health {
    reporter: HealthReporter,
    service_name: &'static str,
}

impl Health {
    /// The health of a daemon whose own gRPC service is `service_name` (its full
    /// name, as `NamedService::NAME`): reported here, and the one service of
    /// `ldpcov.proto` that [`router`]'s reflection lists.
    pub fn new(service_name: &'static str) -> Self {
        Health {
            reporter: HealthReporter::new(),
            service_name,
        }
    }

    /// The daemon's own service name.
    pub fn service_name(&self) -> &'static str {
        self.service_name
    }

    /// Sets `""` and the daemon's service SERVING (`true`) or NOT_SERVING.
    pub async fn set(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status("", status).await;
        self.reporter
            .set_service_status(self.service_name, status)
            .await;
    }

    /// The gRPC service answering health checks (no token needed).
    pub fn service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }

    /// Sets the health to the store's current write health, then follows every
    /// change in the background, calling `on_unhealthy` (the daemon's warning) each
    /// time it turns false, until [`HealthFollower::stop`].
    pub async fn follow(
        &self,
        mut write_health: watch::Receiver<bool>,
        on_unhealthy: impl Fn() + Send + 'static,
    ) -> HealthFollower {
        let healthy = *write_health.borrow_and_update();
        self.set(healthy).await;
        let health = self.clone();
        let task = tokio::spawn(async move {
            while write_health.changed().await.is_ok() {
                let healthy = *write_health.borrow_and_update();
                if !healthy {
                    on_unhealthy();
                }
                health.set(healthy).await;
            }
        });
        HealthFollower {
            health: self.clone(),
            task,
        }
    }
}

/// The background task of [`Health::follow`].
#[derive(Debug)]
pub struct HealthFollower {
    health: Health,
    task: JoinHandle<()>,
}

impl HealthFollower {
    /// The shutdown sequence's first step: stops following first, so that nothing turns
    /// SERVING again afterwards, then sets NOT_SERVING (before calls are drained).
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
        self.health.set(false).await;
    }
}

/// A reflection builder listing only health, this reflection version and the daemon's
/// own service.
fn reflection(service_name: &str, reflection: &str) -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(ldpcov_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name(service_name)
        .with_service_name("grpc.health.v1.Health")
        .with_service_name(reflection)
}

/// A router on `builder` serving `health` ([`Health::service`]) and server reflection
/// (`grpc.reflection.v1` and `v1alpha`), both without tokens; reflection lists health,
/// itself and the daemon's own service only (`ldpcov.proto` also declares the other
/// daemon's). The daemon adds its own service with `add_service`.
pub fn router<L: Clone>(
    builder: &mut Server<L>,
    health: &Health,
) -> Result<Router<L>, tonic_reflection::server::Error> {
    let name = health.service_name();
    let reflection_v1 = reflection(name, "grpc.reflection.v1.ServerReflection").build_v1()?;
    // Older grpcurl and grpc_cli only speak v1alpha.
    let reflection_v1alpha =
        reflection(name, "grpc.reflection.v1alpha.ServerReflection").build_v1alpha()?;
    Ok(builder
        .add_service(health.service())
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha))
}
