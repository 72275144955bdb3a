//! A real gRPC upstream on 127.0.0.1 for the tests: `echo.Echo`, a hand-written tonic service
//! (prost messages derived in code, no build script) whose calls answer with the status they
//! ask for, after the wait they ask for, and tonic-health's `grpc.health.v1` server beside
//! it. Every request that reaches the service is counted by method.
#![allow(dead_code)] // each test binary uses its own part of it

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::client::{Grpc, GrpcService};
use tonic::codegen::Bytes;
use tonic::server::{NamedService, ServerStreamingService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The longest a call may ask to hang: a hung test fails instead of hanging CI.
const LONGEST_HANG: Duration = Duration::from_secs(5);

/// What a call asks of the server.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ask {
    /// The status code to answer with (0: `OK`, with a reply).
    #[prost(int32, tag = "1")]
    pub(crate) code: i32,
    /// How long to wait before answering, in milliseconds.
    #[prost(uint64, tag = "2")]
    pub(crate) hang_ms: u64,
    /// `grpc-retry-pushback-ms` to send with a failing status, when not zero.
    #[prost(uint64, tag = "3")]
    pub(crate) pushback_ms: u64,
    /// When not zero: `code` for this many calls of the method, then `OK` (a server that
    /// is down, then up again).
    #[prost(uint64, tag = "4")]
    pub(crate) fail_times: u64,
    /// `grpc-retry-pushback-ms` to send verbatim with a failing status, when not empty
    /// (`"-1"`, `"0"`, `"soon"`).
    #[prost(string, tag = "5")]
    pub(crate) pushback: String,
    /// When not zero: `hang_ms` only for this many calls of the method, then no wait (a
    /// replica that is slow, then a fast one).
    #[prost(uint64, tag = "6")]
    pub(crate) hang_times: u64,
}

impl Ask {
    pub(crate) fn ok() -> Self {
        Self::default()
    }

    pub(crate) fn code(code: Code) -> Self {
        Self {
            code: code as i32,
            ..Self::default()
        }
    }

    /// `code` for the first `times` calls of the method, then `OK`.
    pub(crate) fn failing(code: Code, times: u64) -> Self {
        Self {
            fail_times: times,
            ..Self::code(code)
        }
    }

    /// With `grpc-retry-pushback-ms: pushback` on its failing status.
    pub(crate) fn pushback(mut self, pushback: &str) -> Self {
        self.pushback = pushback.into();
        self
    }

    pub(crate) fn hang(ms: u64) -> Self {
        Self {
            hang_ms: ms,
            ..Self::default()
        }
    }

    /// Waits `ms` before answering for the first `times` calls of the method only.
    pub(crate) fn hang_first(mut self, ms: u64, times: u64) -> Self {
        self.hang_ms = ms;
        self.hang_times = times;
        self
    }
}

/// The reply of a call that succeeds.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Reply {
    #[prost(string, tag = "1")]
    pub(crate) text: String,
}

/// The requests that reached the service, by path.
#[derive(Default)]
pub(crate) struct Calls(Mutex<HashMap<String, usize>>);

impl Calls {
    pub(crate) fn of(&self, path: &str) -> usize {
        self.0.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Counts a call of `path`: its number (1 for the first).
    fn count(&self, path: &str) -> usize {
        let mut calls = self.0.lock().unwrap();
        let n = calls.entry(path.to_owned()).or_default();
        *n += 1;
        *n
    }
}

/// `echo.Echo`: `Get` and `Sub` (unary) and `Stream` (one reply, then the asked status, in
/// the trailers).
#[derive(Clone, Default)]
pub(crate) struct Echo {
    pub(crate) calls: Arc<Calls>,
}

pub(crate) const GET: &str = "/echo.Echo/Get";
pub(crate) const SUB: &str = "/echo.Echo/Sub";
pub(crate) const STREAM: &str = "/echo.Echo/Stream";
pub(crate) const HEALTH: &str = "/grpc.health.v1.Health/Check";

impl NamedService for Echo {
    const NAME: &'static str = "echo.Echo";
}

impl Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let calls = Arc::clone(&self.calls);
        Box::pin(async move {
            let path = request.uri().path().to_owned();
            let call = calls.count(&path);
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Reply, Ask>::default());
            Ok(match path.as_str() {
                GET | SUB => grpc.unary(Unary { call }, request).await,
                STREAM => grpc.server_streaming(Streaming, request).await,
                _ => Status::unimplemented(path).into_http(),
            })
        })
    }
}

/// The status `ask` asks for, with its pushback.
fn status_of(ask: &Ask) -> Status {
    let mut status = Status::new(Code::from_i32(ask.code), "asked for");
    if ask.pushback_ms > 0 {
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", ask.pushback_ms.into());
    }
    if !ask.pushback.is_empty() {
        status.metadata_mut().insert(
            "grpc-retry-pushback-ms",
            ask.pushback.parse().expect("an ASCII pushback"),
        );
    }
    status
}

async fn wait(ask: &Ask) {
    if ask.hang_ms > 0 {
        tokio::time::sleep(Duration::from_millis(ask.hang_ms).min(LONGEST_HANG)).await;
    }
}

/// A unary call, the `call`-th of its method.
struct Unary {
    call: usize,
}

impl UnaryService<Ask> for Unary {
    type Response = Reply;
    type Future = BoxFuture<Result<tonic::Response<Reply>, Status>>;

    fn call(&mut self, request: tonic::Request<Ask>) -> Self::Future {
        let call = self.call as u64;
        Box::pin(async move {
            let ask = request.into_inner();
            if ask.hang_times == 0 || call <= ask.hang_times {
                wait(&ask).await;
            }
            let recovered = ask.fail_times > 0 && call > ask.fail_times;
            if ask.code == 0 || recovered {
                Ok(tonic::Response::new(Reply {
                    text: "pong".into(),
                }))
            } else {
                Err(status_of(&ask))
            }
        })
    }
}

struct Streaming;

type ReplyStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<Reply, Status>> + Send>>;

impl ServerStreamingService<Ask> for Streaming {
    type Response = Reply;
    type ResponseStream = ReplyStream;
    type Future = BoxFuture<Result<tonic::Response<ReplyStream>, Status>>;

    /// One reply, then the asked status: a failure after the first message travels in the
    /// trailers, not the headers.
    fn call(&mut self, request: tonic::Request<Ask>) -> Self::Future {
        Box::pin(async move {
            let ask = request.into_inner();
            let mut items = vec![Ok(Reply {
                text: "first".into(),
            })];
            if ask.code != 0 {
                items.push(Err(status_of(&ask)));
            }
            let stream: ReplyStream = Box::pin(tokio_stream::iter(items));
            Ok(tonic::Response::new(stream))
        })
    }
}

/// A listener on a free loopback port.
pub(crate) async fn listen() -> (TcpIncoming, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (TcpIncoming::from(listener), addr)
}

/// The health service's reporter, and the service.
pub(crate) fn health() -> (
    tonic_health::server::HealthReporter,
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
) {
    tonic_health::server::health_reporter()
}

/// Serves `echo` and a health service on 127.0.0.1, with no layer; `echo.Echo` starts
/// `SERVING`.
pub(crate) async fn serve(echo: Echo) -> (SocketAddr, tonic_health::server::HealthReporter) {
    let (reporter, health) = health();
    reporter.set_serving::<Echo>().await;
    let (incoming, addr) = listen().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health)
            .add_service(echo)
            .serve_with_incoming(incoming),
    );
    (addr, reporter)
}

/// A lazily connecting channel to `addr`.
pub(crate) fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy()
}

/// A unary call of `method` through `service`, as a generated client makes it.
pub(crate) async fn unary<S>(service: S, method: &'static str, ask: Ask) -> Result<Reply, Status>
where
    S: GrpcService<Body>,
    S::Error: Into<BoxError>,
    S::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let mut grpc = Grpc::new(service);
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(format!("not ready: {}", e.into())))?;
    let codec = ProstCodec::<Ask, Reply>::default();
    grpc.unary(
        tonic::Request::new(ask),
        PathAndQuery::from_static(method),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}

/// [`unary`], with a deadline: the request's `grpc-timeout`.
pub(crate) async fn unary_within<S>(
    service: S,
    method: &'static str,
    ask: Ask,
    within: Duration,
) -> Result<Reply, Status>
where
    S: GrpcService<Body>,
    S::Error: Into<BoxError>,
    S::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let mut grpc = Grpc::new(service);
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(format!("not ready: {}", e.into())))?;
    let codec = ProstCodec::<Ask, Reply>::default();
    let mut request = tonic::Request::new(ask);
    request.set_timeout(within);
    grpc.unary(request, PathAndQuery::from_static(method), codec)
        .await
        .map(tonic::Response::into_inner)
}

/// A server-streaming call of `STREAM` through `service`: the stream, unread.
pub(crate) async fn stream<S>(service: S, ask: Ask) -> Result<tonic::Streaming<Reply>, Status>
where
    S: GrpcService<Body>,
    S::Error: Into<BoxError>,
    S::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let mut grpc = Grpc::new(service);
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(format!("not ready: {}", e.into())))?;
    let codec = ProstCodec::<Ask, Reply>::default();
    grpc.server_streaming(
        tonic::Request::new(ask),
        PathAndQuery::from_static(STREAM),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}

/// Runs `f` on a two-thread runtime, bounded: a hung test fails instead of hanging CI.
pub(crate) fn run<F: Future>(f: F) -> F::Output {
    lazybreaker_test_support::run_bounded(Duration::from_secs(20), f)
}
