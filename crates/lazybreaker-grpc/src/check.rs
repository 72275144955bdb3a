//! Health checks over `grpc.health.v1`: [`check`] (one), and [`health_check`] (a breaker's).

use std::future::Future;
use std::time::Duration;

use tonic::client::GrpcService;
use tonic::codegen::Bytes;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long [`health_check`]'s checks wait for an answer: brpc's
/// `health_check_timeout_ms`, the breaker's default [check
/// timeout](lazybreaker::Builder::check_timeout).
pub const CHECK_DEADLINE: Duration = Duration::from_millis(500);

/// Asks `channel` once, over `grpc.health.v1.Health/Check`, whether `service` is serving
/// (`""` asks about the server as a whole): `true` for `SERVING`; `false` for any other
/// status (`NOT_SERVING`, `UNKNOWN`, `SERVICE_UNKNOWN`), an error (no server, no health
/// service: `UNIMPLEMENTED`), or no answer within `deadline`. The deadline goes to the
/// server too, as the request's `grpc-timeout`.
///
/// Give it a channel of its own, not one behind the breaker it revives (which would reject
/// it). Needs a tokio runtime (for the deadline), as tonic's channels do.
pub async fn check<T>(channel: T, service: impl Into<String>, deadline: Duration) -> bool
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<BoxError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.into(),
    });
    request.set_timeout(deadline);
    let mut client = HealthClient::new(channel);
    match tokio::time::timeout(deadline, client.check(request)).await {
        Ok(Ok(response)) => response.into_inner().status() == ServingStatus::Serving,
        Ok(Err(_)) | Err(_) => false,
    }
}

/// A breaker's [health check](lazybreaker::Builder::health_check) over `grpc.health.v1`: each
/// time the breaker's open period is over, the call that arrives first asks `channel`
/// whether `service` is serving ([`check`], with [`CHECK_DEADLINE`]), before its own
/// request is sent. `SERVING` lets it through as the first half-open probe; anything else
/// reopens the breaker with nothing sent. No timer: the check runs in that call's task.
///
/// `channel` is cloned for each check (a tonic `Channel` is a handle to one connection
/// pool); give the check a channel that is not behind the breaker itself.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use lazybreaker_grpc as grpc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let breaker = Breaker::builder()
///     .name("echo")
///     .health_check(grpc::health_check(channel, "echo.Echo"))
///     .build();
/// # let _ = breaker;
/// # }
/// ```
pub fn health_check<T>(
    channel: T,
    service: impl Into<String>,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync + 'static
where
    T: GrpcService<tonic::body::Body> + Clone + Send + Sync + 'static,
    T::Future: Send,
    T::Error: Into<BoxError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let service: String = service.into();
    move || Box::pin(check(channel.clone(), service.clone(), CHECK_DEADLINE))
}
