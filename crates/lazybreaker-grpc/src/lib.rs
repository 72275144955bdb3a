//! gRPC on tonic (feature `grpc`, tonic 0.14, which needs Rust 1.88): how a call counts
//! ([`StatusRules`], [`status_classifier`]), a breaker per method ([`per_method`]), what a
//! client gets for a rejection ([`rejected_status`], [`AsStatus`]: `UNAVAILABLE` with
//! `grpc-retry-pushback-ms`), revival checked over `grpc.health.v1` ([`health_check`]), and
//! gRPC's retries and hedging from a service config ([`ServiceConfig`], [`RetryLayer`],
//! [`HedgeLayer`]).
//!
//! A tonic `Channel` is a tower service, and so are a tonic server's routes: the
//! [tower layers](lazybreaker_tower) wrap both. On a client, the layer goes around the channel
//! and under the generated client; on a server, around the routes
//! (`Server::builder().layer(..)`), so a rejected call never reaches its handler.
//!
//! ```
//! use lazybreaker_tower::KeyedBreakerLayer;
//! use lazybreaker::{Breaker, Registry};
//! use lazybreaker_grpc as grpc;
//! use std::{sync::Arc, time::Duration};
//! use tower::ServiceBuilder;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let registry = Arc::new(Registry::new(|method: &String| Breaker::builder().name(method.clone())));
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//! let service = ServiceBuilder::new()
//!     .layer(
//!         KeyedBreakerLayer::new(registry, grpc::per_method)
//!             .classify(grpc::status_classifier())
//!             .on_rejected(grpc::AsStatus),
//!     )
//!     .timeout(Duration::from_secs(1)) // inside the breaker: a hang is a failure
//!     .service(channel);
//! // `tonic::client::Grpc::new(service)`, or a generated client's `new(service)`.
//! # let _ = service;
//! # }
//! ```
//!
//! # How a call counts
//!
//! | status | counts as | why |
//! |---|---|---|
//! | `OK` | success | |
//! | `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNKNOWN`, `DATA_LOSS` | failure | the server is down, stuck or broken |
//! | `RESOURCE_EXHAUSTED` | excluded | the server is at its limit and shedding load (brpc's `ELIMIT`): isolating it would only add pressure |
//! | `CANCELLED` | excluded | the caller gave up |
//! | `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`, `PERMISSION_DENIED`, `UNAUTHENTICATED`, `FAILED_PRECONDITION`, `OUT_OF_RANGE`, `UNIMPLEMENTED` | excluded | the caller's error, not the server's |
//! | `ABORTED` | excluded | a conflict with another caller (a transaction aborted) |
//! | a refused or unreachable connection | fatal: opens at once | nothing listens there |
//! | another transport error (an elapsed deadline, a reset stream) | failure | the server did not answer |
//! | another breaker's rejection | excluded | never sent; that breaker counted it |
//!
//! Every code can be given another outcome ([`StatusRules::code`]), and with
//! [`StatusRules::honor_pushback`] a failure whose server sent `grpc-retry-pushback-ms`
//! opens the breaker at once for that long.
//!
//! # Where the status is
//!
//! A layer below the codec sees HTTP/2 responses, not `Status`es, and the status is in one
//! of two places:
//!
//! - **in the headers** of a trailers-only response: what a server sends when it fails a
//!   call before any message (a tonic handler that returns `Err(status)`, an
//!   `UNIMPLEMENTED` method, a deadline). Counted as soon as the response arrives.
//! - **in the trailers**, after the body: every successful call, and a streaming call that
//!   fails after its first message. The layer cannot know the outcome when the response
//!   future completes, so [`StatusRules`] moves the call's verdict into the response body
//!   ([`Classify::unsettled`](lazybreaker::classify::Classify::unsettled)), which settles it when
//!   its trailers arrive; the call stays in flight until then (a half-open probe that
//!   streams holds its slot to the end of the stream). A body dropped before its end (the
//!   caller stopped reading a stream) abandons the call; a body that ends without a status
//!   is `UNKNOWN`, a failure, as gRPC says.
//!
//! What such a layer cannot see: a status the codec makes on the client's side after the
//! response (a message that does not decode is `INTERNAL` to the caller, but the server
//! answered `OK`). Classify at the codec level for that
//! ([`StatusRules::classifier`] with
//! [`Breaker::execute_async_classified`](lazybreaker::Breaker::execute_async_classified)).
//!
//! # Rejections
//!
//! A rejected call is answered with [`rejected_status`]: `UNAVAILABLE`, with the time left
//! in the open period as `grpc-retry-pushback-ms`, which gRPC's retry policy honours. With
//! the layers' default answer (an error, [`FailFast`](lazybreaker_tower::FailFast)) tonic's
//! client would see an `UNKNOWN` status and its server would reset the stream: give the
//! layer [`AsStatus`] (`.on_rejected(grpc::AsStatus)`) or a fallback
//! (`.fallback(|r| grpc::rejected_status(r).into_http())`).
//!
//! # Retries
//!
//! gRPC's retry design (proposal A6), from the service config gRPC users already write:
//! [`ServiceConfig`] reads its `methodConfig[].retryPolicy` and `retryThrottling` (validated
//! as gRPC does, every error naming its path), and [`RetryLayer`] retries a channel's calls
//! as it says. Put the retry layer outside the breaker's, so that every attempt is a call
//! the breaker counts, and answer rejections with [`AsStatus`]: a rejection is never
//! retried.
//!
//! ```
//! use lazybreaker::Breaker;
//! use lazybreaker_grpc as grpc;
//! use lazybreaker_tower::BreakerLayer;
//! use std::sync::Arc;
//! use tower::ServiceBuilder;
//!
//! const SERVICE_CONFIG: &str = r#"{
//!   "methodConfig": [{
//!     "name": [{"service": "echo.Echo", "method": "Sub"}, {"service": "billing.Ledger"}],
//!     "timeout": "2s",
//!     "retryPolicy": {
//!       "maxAttempts": 4,
//!       "initialBackoff": "0.1s",
//!       "maxBackoff": "1s",
//!       "backoffMultiplier": 2,
//!       "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
//!     }
//!   }],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lazybreaker::ConfigError> {
//! let retries = grpc::RetryLayer::from_service_config(SERVICE_CONFIG)?;
//! let breaker = Arc::new(Breaker::builder().name("echo").build());
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//! let service = ServiceBuilder::new()
//!     .layer(retries.clone().count_on(Arc::clone(&breaker)))
//!     .layer(
//!         BreakerLayer::new(breaker)
//!             .classify(grpc::status_classifier())
//!             .on_rejected(grpc::AsStatus),
//!     )
//!     .service(channel);
//! // `tonic::client::Grpc::new(service)`, or a generated client's `new(service)`; later:
//! let sub = retries.config().policy("/echo.Echo/Sub").expect("named");
//! assert_eq!(sub.retry().stats().retries, 0);
//! # let _ = service;
//! # Ok(())
//! # }
//! ```
//!
//! Retried: a unary or server-streaming call (whose request is whole at once, within
//! [`RetryLayer::max_buffer`]) whose status is in `retryableStatusCodes` and came before the
//! server committed the call (a trailers-only response, or a transport error), as long as
//! the server's `grpc-retry-pushback-ms` allows it (a negative or malformed one says *do
//! not retry*; a valid one is the wait), the throttling has more than half its tokens, and
//! the policy's [`Retry`](lazybreaker::retry::Retry) has attempts, time before the deadline
//! (`grpc-timeout`, or the method's `timeout`) and budget left. The waits are
//! `tokio::time::sleep`s.
//!
//! # Hedging
//!
//! A method config may hedge instead of retrying (A6: one or the other, a config with both
//! is refused): its `hedgingPolicy` ([`HedgingPolicy`], from [`ServiceConfig::hedging`]) is
//! a core [`Hedge`](lazybreaker::retry::Hedge), and [`HedgeLayer`] sends a unary call's
//! request again each `hedgingDelay` without an answer, at most `maxAttempts` attempts; the
//! first `OK` or fatal status is the answer and the other attempts are cancelled, a
//! non-fatal status (`nonFatalStatusCodes`) sends the next hedge at once (or after the
//! server's pushback; a negative one stops the hedges). Hedges are paid for in the policy's
//! budget and ask the same `retryThrottling` as the retries. It goes where the retry layer
//! goes: outside the breaker's, rejections answered with [`AsStatus`] (never hedged).
//!
//! # Correspondence
//!
//! Kitex keeps a breaker per method and classifies errors before they count; brpc ignores
//! `ELIMIT` and isolates a node on `ECONNREFUSED`; gRPC's retry design (A6) reads the
//! server's pushback, and retries as a service config says. This module is those three on
//! tonic.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod body;
mod check;
mod key;
mod reject;
mod retry;
mod rules;

pub use body::GrpcBody;
pub use check::{check, health_check, CHECK_DEADLINE};
pub use key::per_method;
pub use reject::{rejected_status, AsStatus};
pub use retry::{
    GrpcHedge, GrpcRetry, HedgeLayer, HedgingPolicy, RetryLayer, RetryPolicy, ServiceConfig,
    MAX_BUFFER,
};
pub use rules::{status_classifier, StatusRules};

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue, Response};
    use lazybreaker::classify::Classify;
    use lazybreaker::policy::Outcome;
    use std::time::Duration;
    use tonic::{Code, Status};

    type AtTower = Result<Response<tonic::body::Body>, tonic::Status>;

    fn trailers_only(code: &'static str, pushback: Option<&'static str>) -> AtTower {
        let mut response = Response::builder().header("grpc-status", code);
        if let Some(ms) = pushback {
            response = response.header("grpc-retry-pushback-ms", ms);
        }
        Ok(response.body(Default::default()).unwrap())
    }

    #[test]
    fn every_code_counts_as_the_table_says() {
        use Outcome::{Excluded, Failure, Success};
        let want = [
            (Code::Ok, Success),
            (Code::Cancelled, Excluded),
            (Code::Unknown, Failure),
            (Code::InvalidArgument, Excluded),
            (Code::DeadlineExceeded, Failure),
            (Code::NotFound, Excluded),
            (Code::AlreadyExists, Excluded),
            (Code::PermissionDenied, Excluded),
            (Code::ResourceExhausted, Excluded),
            (Code::FailedPrecondition, Excluded),
            (Code::Aborted, Excluded),
            (Code::OutOfRange, Excluded),
            (Code::Unimplemented, Excluded),
            (Code::Internal, Failure),
            (Code::Unavailable, Failure),
            (Code::DataLoss, Failure),
            (Code::Unauthenticated, Excluded),
        ];
        let rules = StatusRules::new();
        for (code, outcome) in want {
            assert_eq!(rules.outcome(code), outcome, "{code:?}");
            // The same code, as a trailers-only response's header.
            let header = (code as i32).to_string();
            let header: &'static str = Box::leak(header.into_boxed_str());
            assert_eq!(
                rules.classify(&trailers_only(header, None)),
                outcome,
                "{code:?}"
            );
            assert!(!rules.unsettled(&trailers_only(header, None)));
        }
        let strict = rules.code(Code::ResourceExhausted, Outcome::Failure);
        assert_eq!(strict.outcome(Code::ResourceExhausted), Outcome::Failure);
        assert_eq!(strict.outcome(Code::Unavailable), Outcome::Failure);
    }

    #[test]
    fn a_response_without_a_status_is_unsettled_only_when_it_is_a_200() {
        let rules = status_classifier();
        let plain = |status: u16| -> AtTower {
            Ok(Response::builder()
                .status(status)
                .body(Default::default())
                .unwrap())
        };
        assert!(rules.unsettled(&plain(200)));
        assert_eq!(rules.classify(&plain(200)), Outcome::Success, "provisional");
        for (status, want) in [
            (404, Outcome::Excluded), // UNIMPLEMENTED
            (503, Outcome::Failure),  // UNAVAILABLE
            (429, Outcome::Failure),  // UNAVAILABLE
            (401, Outcome::Excluded), // UNAUTHENTICATED
            (400, Outcome::Failure),  // INTERNAL
            (500, Outcome::Failure),  // UNKNOWN
        ] {
            assert!(!rules.unsettled(&plain(status)));
            assert_eq!(rules.classify(&plain(status)), want, "{status}");
        }
        let err: AtTower = Err(Status::internal("x"));
        assert!(!rules.unsettled(&err));
    }

    #[test]
    fn pushback_opens_only_when_honoured_on_failures() {
        let plain = StatusRules::new();
        let honour = plain.honor_pushback();
        let two_seconds = Some(Duration::from_secs(2));
        assert_eq!(plain.open_for(&trailers_only("14", Some("2000"))), None);
        assert_eq!(
            honour.open_for(&trailers_only("14", Some("2000"))),
            two_seconds
        );
        assert_eq!(
            honour.open_for(&trailers_only("8", Some("2000"))),
            None,
            "excluded"
        );
        assert_eq!(honour.open_for(&trailers_only("0", Some("2000"))), None);
        assert_eq!(honour.open_for(&trailers_only("14", Some("-1"))), None);
        assert_eq!(honour.open_for(&trailers_only("14", Some("0"))), None);
        assert_eq!(honour.open_for(&trailers_only("14", Some("soon"))), None);
        assert_eq!(honour.open_for(&trailers_only("14", None)), None);
        // Above the codec: the pushback is the status' metadata.
        let mut status = Status::unavailable("busy");
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", "250".parse().unwrap());
        let result: Result<tonic::Response<()>, Status> = Err(status);
        assert_eq!(honour.open_for(&result), Some(Duration::from_millis(250)));
        assert!(honour.overloaded(&result), "pushback: alive and shedding");
        let exhausted: Result<tonic::Response<()>, Status> =
            Err(Status::resource_exhausted("limit"));
        assert!(honour.overloaded(&exhausted));
        assert!(!honour.overloaded(&Err::<tonic::Response<()>, _>(Status::internal("x"))));
    }

    #[test]
    fn the_trailers_decide_the_end_of_a_body() {
        let rules = StatusRules::new();
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("13"));
        assert_eq!(rules.by_trailers(Some(&trailers)), Outcome::Failure);
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        assert_eq!(rules.by_trailers(Some(&trailers)), Outcome::Success);
        assert_eq!(rules.by_trailers(Some(&HeaderMap::new())), Outcome::Failure);
        assert_eq!(
            rules.by_trailers(None),
            Outcome::Failure,
            "no status: UNKNOWN"
        );
    }

    #[test]
    fn transport_errors_count_by_their_causes() {
        use std::io::{Error as IoError, ErrorKind};
        type BoxError = Box<dyn std::error::Error + Send + Sync>;
        let rules = StatusRules::new();
        let refused: Result<Response<tonic::body::Body>, BoxError> =
            Err(IoError::from(ErrorKind::ConnectionRefused).into());
        assert_eq!(rules.classify(&refused), Outcome::Fatal);
        let server: Result<Response<tonic::body::Body>, BoxError> =
            Err(Status::resource_exhausted("limit").into());
        assert_eq!(rules.classify(&server), Outcome::Excluded);
        // A status tonic made from a client-side error counts by that error.
        let mut made = Status::unavailable("tcp connect error");
        made.set_source(std::sync::Arc::new(IoError::from(
            ErrorKind::ConnectionRefused,
        )));
        let above: Result<tonic::Response<()>, Status> = Err(made);
        assert_eq!(rules.classify(&above), Outcome::Fatal);
        let mut timed_out = Status::cancelled("Timeout expired");
        timed_out.set_source(std::sync::Arc::new(tonic::TimeoutExpired(())));
        let above: Result<tonic::Response<()>, Status> = Err(timed_out);
        assert_eq!(
            rules.classify(&above),
            Outcome::Failure,
            "a deadline inside"
        );
        let classify = rules.classifier::<u32>();
        assert_eq!(classify(&Ok(1)), Outcome::Success);
        assert_eq!(classify(&Err(Status::not_found("x"))), Outcome::Excluded);
        // Another breaker's rejection is not the server's failure.
        let inner: Result<
            Response<tonic::body::Body>,
            lazybreaker::Error<BoxError, lazybreaker::RejectedBy>,
        > = Err(lazybreaker::Error::Rejected(lazybreaker::RejectedBy::new(
            "inner",
            lazybreaker::Rejected::ForcedOpen,
        )));
        assert_eq!(rules.classify(&inner), Outcome::Excluded);
    }

    #[test]
    fn a_rejection_is_unavailable_with_its_pushback_rounded_up() {
        use lazybreaker::Rejected;
        let open = |retry_after| rejected_status(&Rejected::Open { retry_after });
        let pushback = |s: &Status| {
            s.metadata()
                .get("grpc-retry-pushback-ms")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(open(Duration::from_secs(30)).code(), Code::Unavailable);
        assert_eq!(
            pushback(&open(Duration::from_secs(30))).as_deref(),
            Some("30000")
        );
        assert_eq!(
            pushback(&open(Duration::from_nanos(1))).as_deref(),
            Some("1")
        );
        assert_eq!(
            pushback(&open(Duration::from_nanos(2_000_001))).as_deref(),
            Some("3")
        );
        for rejected in [
            Rejected::TooManyRequests,
            Rejected::ForcedOpen,
            Rejected::Checking,
            Rejected::NoEndpoint { retry_after: None },
        ] {
            let status = rejected_status(&rejected);
            assert_eq!(status.code(), Code::Unavailable, "{rejected:?}");
            assert_eq!(pushback(&status), None, "{rejected:?}");
        }
        let pool = rejected_status(&Rejected::NoEndpoint {
            retry_after: Some(Duration::from_millis(7)),
        });
        assert_eq!(pushback(&pool).as_deref(), Some("7"));
    }
}
