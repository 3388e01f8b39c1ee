//! gRPC-Web for browsers, the same for both daemons (`serve --grpc-web`,
//! `--grpc-web-origin`): HTTP/1.1 accepted beside HTTP/2, `tonic-web`'s translation of
//! `application/grpc-web*` calls into native ones, behind `tower-http`'s CORS layer
//! with the allowed origins. Both sit outside every layer the daemon adds to its own
//! service, so a browser's call meets the same token check, limits and services as a
//! native one.

use std::time::Duration;

use tonic::codegen::http;
use tonic::transport::Server;
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::util::{Either, option_layer};
use tower_http::cors::CorsLayer;

/// gRPC-Web for browsers: the same services, tokens and limits as native gRPC,
/// translated by `tonic-web`, behind a CORS policy. Applied to a server by
/// [`grpc_web`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcWebOptions {
    /// Origins whose pages may call the daemon; a request from any other origin gets
    /// no CORS headers, so the browser refuses to hand the page the answer. Empty: no
    /// cross-origin page may call it (same-origin pages and non-browser gRPC-Web
    /// clients still can).
    allowed_origins: Vec<http::HeaderValue>,
}

/// An origin `serve --grpc-web-origin` cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--grpc-web-origin {0:?} is not an origin: give the scheme and host (and port) only, e.g. https://app.example.com or http://localhost:8080"
)]
pub struct OriginError(pub String);

/// A daemon's `--grpc-web` flags that do not make a gRPC-Web policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrpcWebFlagsError {
    /// Origins given without `--grpc-web`.
    #[error("--grpc-web-origin needs --grpc-web")]
    OriginWithoutGrpcWeb,
    /// A value that is not an origin.
    #[error(transparent)]
    Origin(#[from] OriginError),
}

impl GrpcWebOptions {
    /// The policy a daemon's `--grpc-web` (`enabled`) and `--grpc-web-origin` flags
    /// ask for: `None` without `--grpc-web`; refused for origins without it, or for a
    /// value that is not an origin.
    pub fn from_flags(
        enabled: bool,
        origins: &[String],
    ) -> Result<Option<Self>, GrpcWebFlagsError> {
        if enabled {
            Ok(Some(Self::with_origins(
                origins.iter().map(String::as_str),
            )?))
        } else if origins.is_empty() {
            Ok(None)
        } else {
            Err(GrpcWebFlagsError::OriginWithoutGrpcWeb)
        }
    }

    /// gRPC-Web with these allowed origins, each `http://` or `https://`, a host and an
    /// optional port, and nothing else (no path, not even `/`: a browser's `Origin`
    /// header has none, so such an entry would never match).
    pub fn with_origins<'a>(
        origins: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, OriginError> {
        let allowed_origins = origins
            .into_iter()
            .map(|origin| {
                let bad = || OriginError(origin.to_string());
                let uri: http::Uri = origin.parse().map_err(|_| bad())?;
                let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
                let bare = uri
                    .authority()
                    .is_some_and(|a| origin == format!("{}://{a}", uri.scheme_str().unwrap_or("")));
                if !(scheme_ok && bare) {
                    return Err(bad());
                }
                http::HeaderValue::from_str(origin).map_err(|_| bad())
            })
            .collect::<Result<_, _>>()?;
        Ok(GrpcWebOptions { allowed_origins })
    }

    /// The allowed origins.
    pub fn allowed_origins(&self) -> &[http::HeaderValue] {
        &self.allowed_origins
    }

    /// The CORS layer: the allowed origins, POST and OPTIONS, the headers a gRPC-Web
    /// client sends (the token's `authorization` among them) and exposes
    /// (`grpc-status`, `grpc-message`), preflight answers cached for a day.
    pub fn cors(&self) -> CorsLayer {
        use http::header::{AUTHORIZATION, CONTENT_TYPE};
        use http::{HeaderName, Method};
        use tower_http::cors::AllowOrigin;
        let names = |list: &[&'static str]| -> Vec<HeaderName> {
            list.iter().map(|n| HeaderName::from_static(n)).collect()
        };
        let mut allowed = vec![AUTHORIZATION, CONTENT_TYPE];
        allowed.extend(names(&["x-grpc-web", "x-user-agent", "grpc-timeout"]));
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(self.allowed_origins.iter().cloned()))
            .allow_methods([Method::POST, Method::OPTIONS])
            .allow_headers(allowed)
            .expose_headers(names(&[
                "grpc-status",
                "grpc-message",
                "grpc-status-details-bin",
            ]))
            .max_age(Duration::from_secs(24 * 3600))
    }
}

/// The layers [`grpc_web`] adds: CORS (answering preflights) outside the gRPC-Web
/// translation; each the identity without gRPC-Web.
pub type GrpcWebLayers = ServiceBuilder<
    Stack<Either<tonic_web::GrpcWebLayer, Identity>, Stack<Either<CorsLayer, Identity>, Identity>>,
>;

/// `builder` serving gRPC-Web as `options` say: with `Some`, HTTP/1.1 accepted (a
/// browser without TLS always speaks it) and the CORS layer then `tonic-web`'s
/// translation added, inside the layers `builder` already has and outside every layer
/// and service added after; with `None`, native gRPC only (the layers are the
/// identity). The daemon logs that gRPC-Web is on, under its own target.
pub fn grpc_web<L>(
    builder: Server<L>,
    options: Option<&GrpcWebOptions>,
) -> Server<Stack<GrpcWebLayers, L>> {
    let builder = if options.is_some() {
        builder.accept_http1(true)
    } else {
        builder
    };
    let layers = ServiceBuilder::new()
        .layer(option_layer(options.map(GrpcWebOptions::cors)))
        .layer(option_layer(
            options.map(|_| tonic_web::GrpcWebLayer::new()),
        ));
    builder.layer(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        let options =
            GrpcWebOptions::with_origins(["https://app.example.com", "http://localhost:8080"])
                .expect("valid origins");
        assert_eq!(options.allowed_origins().len(), 2);
        assert_eq!(options.allowed_origins()[1], "http://localhost:8080");
        for bad in [
            "https://app.example.com/",
            "https://app.example.com/path",
            "app.example.com",
            "ftp://app.example.com",
            "",
        ] {
            assert_eq!(
                GrpcWebOptions::with_origins([bad]),
                Err(OriginError(bad.to_string())),
                "{bad}"
            );
        }
        assert!(
            GrpcWebOptions::with_origins([])
                .expect("none")
                .allowed_origins()
                .is_empty()
        );
    }

    #[test]
    fn the_flags_make_a_policy_or_a_one_line_refusal() {
        let origins = |list: &[&str]| list.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        assert_eq!(GrpcWebOptions::from_flags(false, &[]), Ok(None));
        let on = GrpcWebOptions::from_flags(true, &origins(&["https://a.example"]))
            .expect("a valid origin")
            .expect("gRPC-Web on");
        assert_eq!(on.allowed_origins(), ["https://a.example"]);
        let refused = GrpcWebOptions::from_flags(false, &origins(&["https://a.example"]));
        assert_eq!(refused, Err(GrpcWebFlagsError::OriginWithoutGrpcWeb));
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("--grpc-web-origin needs --grpc-web".into())
        );
        assert!(matches!(
            GrpcWebOptions::from_flags(true, &origins(&["https://a.example/"])),
            Err(GrpcWebFlagsError::Origin(_))
        ));
    }
}
