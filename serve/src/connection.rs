//! What protects a daemon's server from slow, silent or unauthenticated clients, the
//! same for the aggregator and the relay:
//!
//! * [`AuthFirstLayer`] refuses a call whose headers carry no valid token *before* the
//!   inner service (a global concurrency limit) is asked for a slot, so calls without
//!   a token never hold one, whether or not their body ever arrives;
//! * [`incoming`] wraps each accepted connection in a [`GuardedStream`]: closed when
//!   it has not sent its first 24 bytes (the HTTP/2 preface or a TLS ClientHello)
//!   within the handshake timeout, or has had no call in flight for the idle timeout
//!   (HTTP/2 keepalive pings do not count as activity); [`TrackCallsLayer`] counts the
//!   calls;
//! * the accept loop backs off [`ACCEPT_BACKOFF`] on an accept error such as
//!   EMFILE/ENFILE (out of file descriptors) instead of spinning ([`accept_backoff`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tonic::codegen::http;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};
use tower::{Layer, Service};

use crate::ConnectionLimits;

/// How long the accept loop waits after an accept error (EMFILE, ENFILE, ENOBUFS, ...)
/// before it accepts again, instead of spinning on the error.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Bytes a new connection must send within the handshake timeout: the HTTP/2 client
/// preface (`PRI * HTTP/2.0...`, 24 bytes); a TLS ClientHello is longer.
const PREFACE_LEN: usize = 24;

/// How long the accept loop sleeps after the accept error `e`: `None` (accept again at
/// once) for errors that concern one connection only (aborted, reset, interrupted),
/// [`ACCEPT_BACKOFF`] for every other, such as EMFILE or ENFILE, which would only
/// fail again at once.
pub fn accept_backoff(e: &io::Error) -> Option<Duration> {
    match e.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock => None,
        _ => Some(ACCEPT_BACKOFF),
    }
}

/// The listener's connections, each wrapped in a [`GuardedStream`] with the limits'
/// handshake and idle timeouts, for `serve_with_incoming_shutdown`. An accept error
/// is logged (once per run of errors) and followed by [`accept_backoff`] of sleep:
/// out of file descriptors, accepting again at once would only fail again and spin
/// a core. Errors that concern one connection only (aborted, reset) retry at once.
pub fn incoming(
    listener: TcpListener,
    limits: &ConnectionLimits,
) -> impl futures::Stream<Item = Result<GuardedStream, io::Error>> + use<> {
    let (handshake_timeout, idle_timeout) = (limits.handshake_timeout, limits.idle_timeout);
    futures::stream::unfold(listener, move |listener| async move {
        let mut failing = false;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    if failing {
                        tracing::info!("accepting connections again");
                    }
                    let stream = GuardedStream::new(stream, handshake_timeout, idle_timeout);
                    return Some((Ok(stream), listener));
                }
                Err(e) => {
                    let Some(backoff) = accept_backoff(&e) else {
                        continue;
                    };
                    if !failing {
                        tracing::warn!(
                            error = %e,
                            backoff_ms = backoff.as_millis() as u64,
                            "cannot accept connections (out of file descriptors?): backing off"
                        );
                        failing = true;
                    }
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    })
}

/// One connection's calls in flight and when the last one started or ended.
#[derive(Debug)]
struct ConnState {
    calls: AtomicUsize,
    opened: Instant,
    /// Milliseconds after `opened` of the last start or end of a call.
    last_change_ms: AtomicU64,
}

impl ConnState {
    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_change_ms.store(ms, Ordering::SeqCst);
    }

    /// When the connection last changed between busy and idle.
    fn last_change(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_change_ms.load(Ordering::SeqCst))
    }
}

/// A call in flight on a connection, from its headers until its response body is
/// dropped (sent or abandoned).
struct CallGuard(Arc<ConnState>);

impl CallGuard {
    fn new(state: Arc<ConnState>) -> Self {
        state.calls.fetch_add(1, Ordering::SeqCst);
        state.touch();
        CallGuard(state)
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the server knows about a connection: its addresses and its calls (the
/// `ConnectInfo` of a [`GuardedStream`]; [`TrackCallsLayer`] reads it).
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    tcp: TcpConnectInfo,
    state: Arc<ConnState>,
}

/// An accepted TCP connection that fails its reads (and so is closed by the server)
/// once it has not sent its first 24 bytes (the HTTP/2 preface, or a TLS
/// ClientHello) within the handshake timeout, or has had no call in flight (as
/// counted by [`TrackCallsLayer`]) for the idle timeout.
pub struct GuardedStream {
    inner: TcpStream,
    state: Arc<ConnState>,
    timer: Pin<Box<tokio::time::Sleep>>,
    received: usize,
    handshake_deadline: Instant,
    idle_timeout: Duration,
}

impl GuardedStream {
    /// Guards `inner` from now on.
    pub fn new(inner: TcpStream, handshake_timeout: Duration, idle_timeout: Duration) -> Self {
        let opened = Instant::now();
        let handshake_deadline = opened + handshake_timeout;
        GuardedStream {
            inner,
            state: Arc::new(ConnState {
                calls: AtomicUsize::new(0),
                opened,
                last_change_ms: AtomicU64::new(0),
            }),
            timer: Box::pin(tokio::time::sleep_until(handshake_deadline)),
            received: 0,
            handshake_deadline,
            idle_timeout,
        }
    }

    /// Polls the timer; the error to end the connection with once a deadline passed.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            let now = Instant::now();
            let handshaking = self.received < PREFACE_LEN;
            if handshaking && now >= self.handshake_deadline {
                return Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within the handshake timeout",
                ));
            }
            let idle_deadline = if self.state.calls.load(Ordering::SeqCst) == 0 {
                self.state.last_change() + self.idle_timeout
            } else {
                now + self.idle_timeout
            };
            if idle_deadline <= now {
                return Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for the idle timeout",
                ));
            }
            let next = if handshaking {
                idle_deadline.min(self.handshake_deadline)
            } else {
                idle_deadline
            };
            self.timer.as_mut().reset(next);
        }
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            tcp: self.inner.connect_info(),
            state: Arc::clone(&self.state),
        }
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if let Poll::Ready(result) = Pin::new(&mut this.inner).poll_read(cx, buf) {
            this.received = this
                .received
                .saturating_add(buf.filled().len().saturating_sub(before));
            return Poll::Ready(result);
        }
        match this.expired(cx) {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The boxed, sendable future the serving layers' services answer with.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Counts every call on its connection (of a [`GuardedStream`], plaintext or TLS)
/// until its response body is dropped, so that the idle timeout never cuts a call in
/// flight, and makes the TCP addresses available to `Request::remote_addr`. The
/// server builder's outermost layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackCallsLayer;

impl<S> Layer<S> for TrackCallsLayer {
    type Service = TrackCalls<S>;

    fn layer(&self, inner: S) -> TrackCalls<S> {
        TrackCalls { inner }
    }
}

/// The service of [`TrackCallsLayer`].
#[derive(Debug, Clone)]
pub struct TrackCalls<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for TrackCalls<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let info = request
            .extensions()
            .get::<ConnectionInfo>()
            .or_else(|| {
                request
                    .extensions()
                    .get::<TlsConnectInfo<ConnectionInfo>>()
                    .map(|tls| tls.get_ref())
            })
            .cloned();
        let guard = info.map(|info| {
            request.extensions_mut().insert(info.tcp);
            CallGuard::new(info.state)
        });
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match guard {
                Some(guard) => response.map(|body| {
                    tonic::body::Body::new(TrackedBody {
                        inner: body,
                        _call: guard,
                    })
                }),
                None => response,
            })
        })
    }
}

/// A response body that holds its call's [`CallGuard`].
struct TrackedBody {
    inner: tonic::body::Body,
    _call: CallGuard,
}

impl http_body::Body for TrackedBody {
    type Data = tonic::codegen::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// How a daemon checks a call's token from its headers alone: given the call's path
/// (`/package.Service/Method`) and headers, `Err` with the status to refuse it with
/// (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED), `Ok` to let it through
/// (also for paths it does not guard, such as health and reflection), with a
/// [`HeldGuard`] the layer holds until the call's response is ready (a per-caller
/// count of calls in flight is released when it drops).
pub type HeaderCheck =
    Arc<dyn Fn(&str, &http::HeaderMap) -> Result<Option<HeldGuard>, tonic::Status> + Send + Sync>;

/// What a [`HeaderCheck`] may hand back to be held for the length of the call.
pub type HeldGuard = Box<dyn Send>;

/// Refuses a call whose headers fail the daemon's [`HeaderCheck`] before the inner
/// service (the global concurrency limit) is even asked for a slot.
#[derive(Clone)]
pub struct AuthFirstLayer {
    check: HeaderCheck,
}

impl std::fmt::Debug for AuthFirstLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFirstLayer").finish_non_exhaustive()
    }
}

impl AuthFirstLayer {
    /// The layer checking every call with `check`.
    pub fn new(
        check: impl Fn(&str, &http::HeaderMap) -> Result<(), tonic::Status> + Send + Sync + 'static,
    ) -> Self {
        AuthFirstLayer {
            check: Arc::new(move |path, headers| check(path, headers).map(|()| None)),
        }
    }

    /// The layer checking every call with `check`, holding the guard it returns until
    /// the call's response is ready (per-caller limits on calls in flight).
    pub fn with_guard(
        check: impl Fn(&str, &http::HeaderMap) -> Result<Option<HeldGuard>, tonic::Status>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        AuthFirstLayer {
            check: Arc::new(check),
        }
    }
}

impl<S> Layer<S> for AuthFirstLayer {
    type Service = AuthFirst<S>;

    fn layer(&self, inner: S) -> AuthFirst<S> {
        AuthFirst {
            inner,
            check: Arc::clone(&self.check),
        }
    }
}

/// The service of [`AuthFirstLayer`].
#[derive(Clone)]
pub struct AuthFirst<S> {
    inner: S,
    check: HeaderCheck,
}

impl<S: std::fmt::Debug> std::fmt::Debug for AuthFirst<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFirst")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<http::Request<B>> for AuthFirst<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    /// Always ready: the inner service (the global limit, which takes its slot when
    /// polled ready) is polled only for a call that passed the check.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let guard = match (self.check)(request.uri().path(), request.headers()) {
            Ok(guard) => guard,
            Err(status) => return Box::pin(async move { Ok(status.into_http()) }),
        };
        // The clone that was polled ready is the one called.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            futures::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            let response = inner.call(request).await;
            drop(guard);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_file_descriptors_the_accept_loop_backs_off() {
        // EMFILE and ENFILE (io::Error::from_raw_os_error(24), (23)) are "other" or
        // "uncategorized" kinds: every kind but the per-connection ones backs off.
        for e in [
            io::Error::from_raw_os_error(24),
            io::Error::from_raw_os_error(23),
            io::Error::from_raw_os_error(105),
            io::Error::other("anything else"),
        ] {
            assert_eq!(accept_backoff(&e), Some(ACCEPT_BACKOFF), "{e}");
        }
        for kind in [
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::Interrupted,
        ] {
            assert_eq!(accept_backoff(&io::Error::from(kind)), None, "{kind:?}");
        }
    }
}
