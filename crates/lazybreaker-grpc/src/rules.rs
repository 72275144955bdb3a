//! [`StatusRules`]: how a gRPC call counts, by its status code, wherever the status is.

use std::any::Any;
use std::error::Error as StdError;
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use tonic::{Code, Status};

use lazybreaker::classify::{transport, transport_any, Classify};
use lazybreaker::policy::Outcome;

/// The header (and trailer, and `Status` metadata) in which a gRPC server asks its clients
/// to wait before they retry, in whole milliseconds (gRPC's retry design, A6).
pub(crate) const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// How many codes gRPC has: `OK` (0) to `UNAUTHENTICATED` (16).
const CODES: usize = 17;

/// How gRPC calls count, by status code: the table of the [module documentation](super),
/// every code configurable ([`code`](StatusRules::code)), and the server's
/// `grpc-retry-pushback-ms` honoured on request ([`honor_pushback`](StatusRules::honor_pushback)).
///
/// `StatusRules` is itself a [`Classify`], in the two shapes a gRPC call has:
///
/// - **Below the codec**, a tower layer on a tonic `Channel` (or on a tonic server's routes)
///   sees `Result<http::Response<tonic::body::Body>, E>`. The status is in the response's
///   headers when the server answered with no message (a "trailers-only" response: what a
///   tonic or grpc-go handler that returns an error sends), and in the trailers at the end
///   of the body otherwise (every successful call, and a stream that fails after its first
///   message). A status in the headers counts at once; for one in the trailers the layer
///   hands the call's verdict to the response body ([`Classify::unsettled`]), which settles
///   it when the trailers arrive, so the call stays in flight until its body ends. A body
///   dropped before its end abandons the call; one that ends with no status is `UNKNOWN`,
///   as gRPC says. An HTTP status other than 200 without a `grpc-status` counts as gRPC
///   maps it (404 is `UNIMPLEMENTED`, 429, 502, 503 and 504 are `UNAVAILABLE`, the rest
///   `UNKNOWN`, 400 `INTERNAL`). A transport error (`E`: tonic's `transport::Error`, a
///   `BoxError` from a timeout layer) counts by its causes: a refused or unreachable
///   connection is [`Outcome::Fatal`], a `Status` counts by its code, another breaker's
///   rejection is excluded, anything else (an elapsed deadline, a reset) is a failure.
/// - **Above the codec**, the generated client's `Result<tonic::Response<T>, Status>`: the
///   codec has already merged the trailers into the `Status`. A `Status` that tonic made
///   from a client-side error (it has a [`source`](std::error::Error::source): no
///   connection, a `Channel` timeout) counts by that error, as above, not by the code tonic
///   gave it (`UNAVAILABLE`, `CANCELLED`): a refused connection is fatal, an elapsed
///   `Endpoint::timeout` is a failure.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::Classify;
/// use lazybreaker_grpc::StatusRules;
/// use lazybreaker::policy::Outcome;
/// use tonic::{Code, Status};
///
/// let rules = StatusRules::new();
/// let answer = |status: Status| Err::<tonic::Response<()>, _>(status);
/// assert_eq!(rules.classify(&answer(Status::unavailable("down"))), Outcome::Failure);
/// assert_eq!(rules.classify(&answer(Status::resource_exhausted("busy"))), Outcome::Excluded);
/// assert_eq!(rules.classify(&answer(Status::not_found("no such user"))), Outcome::Excluded);
/// assert_eq!(rules.classify(&Ok(tonic::Response::new(()))), Outcome::Success);
///
/// // A server at its concurrency limit that should count after all:
/// let rules = rules.code(Code::ResourceExhausted, Outcome::Failure);
/// assert_eq!(rules.outcome(Code::ResourceExhausted), Outcome::Failure);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusRules {
    codes: [Outcome; CODES],
    honor_pushback: bool,
}

impl StatusRules {
    /// The default rules: the table of the [module documentation](super); the server's
    /// pushback is not honoured.
    pub const fn new() -> Self {
        use Outcome::{Excluded, Failure, Success};
        Self {
            codes: [
                Success,  // OK
                Excluded, // CANCELLED: the caller gave up
                Failure,  // UNKNOWN
                Excluded, // INVALID_ARGUMENT
                Failure,  // DEADLINE_EXCEEDED
                Excluded, // NOT_FOUND
                Excluded, // ALREADY_EXISTS
                Excluded, // PERMISSION_DENIED
                Excluded, // RESOURCE_EXHAUSTED: overloaded (brpc's ELIMIT)
                Excluded, // FAILED_PRECONDITION
                Excluded, // ABORTED: a conflict with another caller
                Excluded, // OUT_OF_RANGE
                Excluded, // UNIMPLEMENTED
                Failure,  // INTERNAL
                Failure,  // UNAVAILABLE
                Failure,  // DATA_LOSS
                Excluded, // UNAUTHENTICATED
            ],
            honor_pushback: false,
        }
    }

    /// The same rules, with a status of `code` counting as `outcome`.
    #[must_use]
    pub const fn code(mut self, code: Code, outcome: Outcome) -> Self {
        self.codes[index(code)] = outcome;
        self
    }

    /// Honours the server's `grpc-retry-pushback-ms` (in the response's headers or trailers,
    /// or the `Status`' metadata) on a status that counts as a failure: the breaker opens at
    /// once for that many milliseconds, whatever its policy says, bounded by its
    /// [`max_open_duration`](lazybreaker::Builder::max_open_duration); then it probes as usual.
    /// A value that is not a whole number of milliseconds (gRPC's "do not retry", a negative
    /// number) or is zero is ignored: the failure counts as without this rule.
    #[must_use]
    pub const fn honor_pushback(mut self) -> Self {
        self.honor_pushback = true;
        self
    }

    /// How a status of `code` counts.
    pub const fn outcome(&self, code: Code) -> Outcome {
        self.codes[index(code)]
    }

    /// How a transport error counts: a `Status` among its causes by its code (unless tonic
    /// made it from a client-side error: then by that error), an `std::io::Error` as
    /// [`classify::io_error`](lazybreaker::classify::io_error) says (a refused connection is
    /// [`Outcome::Fatal`]), another breaker's rejection excluded, anything else a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_grpc::StatusRules;
    /// use lazybreaker::policy::Outcome;
    /// use std::io::{Error, ErrorKind};
    ///
    /// let rules = StatusRules::new();
    /// assert_eq!(rules.transport(&Error::from(ErrorKind::ConnectionRefused)), Outcome::Fatal);
    /// assert_eq!(rules.transport(&tonic::Status::internal("boom")), Outcome::Failure);
    /// assert_eq!(rules.transport(&std::fmt::Error), Outcome::Failure);
    /// ```
    pub fn transport(&self, error: &(dyn StdError + 'static)) -> Outcome {
        transport(error, &|e| self.status_cause(e))
    }

    /// A cause that is a server's `Status` (one without a source of its own) counts by its
    /// code; tonic's statuses made from a client-side error are looked through.
    fn status_cause(&self, cause: &(dyn StdError + 'static)) -> Option<Outcome> {
        let status = cause.downcast_ref::<Status>()?;
        status
            .source()
            .is_none()
            .then(|| self.outcome(status.code()))
    }

    /// A transport error of any type: tonic's own, a `BoxError`, an `io::Error`, a layer's.
    pub(crate) fn transport_any<E: 'static>(&self, error: &E) -> Outcome {
        transport_any(error, &tonic_error, &|e| self.status_cause(e))
    }

    /// How a response counts by its headers: its `grpc-status`, or the code gRPC maps its
    /// HTTP status to; `None` for a 200 without `grpc-status` (the status is in the
    /// trailers).
    pub(crate) fn by_headers(&self, status: StatusCode, headers: &HeaderMap) -> Option<Outcome> {
        match code_in(headers) {
            Some(code) => Some(self.outcome(code)),
            None if status == StatusCode::OK => None,
            None => Some(self.outcome(http_code(status))),
        }
    }

    /// How the end of a response counts: its trailers' `grpc-status`; `UNKNOWN` without one
    /// (gRPC: a stream that ends with no status).
    pub(crate) fn by_trailers(&self, trailers: Option<&HeaderMap>) -> Outcome {
        self.outcome(trailers.and_then(code_in).unwrap_or(Code::Unknown))
    }

    /// How long the server asked its clients to wait, when these rules honour it and
    /// `outcome` is a failure.
    pub(crate) fn pushback(&self, outcome: Outcome, headers: &HeaderMap) -> Option<Duration> {
        if !self.honor_pushback || !matches!(outcome, Outcome::Failure | Outcome::Fatal) {
            return None;
        }
        pushback_in(headers)
    }

    /// These rules as a closure over `Result<T, Status>`, for the calls that take one
    /// ([`Breaker::execute_async_classified`](lazybreaker::Breaker::execute_async_classified)
    /// around a generated client's method): `Ok` is a success, a `Status` counts as
    /// [`transport`](StatusRules::transport) says.
    pub fn classifier<T>(self) -> impl Fn(&Result<T, Status>) -> Outcome + Clone + Send + Sync {
        move |result: &Result<T, Status>| match result {
            Ok(_) => Outcome::Success,
            Err(status) => self.transport(status),
        }
    }
}

impl Default for StatusRules {
    fn default() -> Self {
        Self::new()
    }
}

/// The default rules ([`StatusRules::new`]): give them to a layer on a tonic `Channel`,
/// `KeyedBreakerLayer::new(registry, grpc::per_method).classify(grpc::status_classifier())`.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::Classify;
/// use lazybreaker_grpc as grpc;
/// use lazybreaker::policy::Outcome;
///
/// let classify = grpc::status_classifier();
/// let trailers_only = |code: &str| -> Result<http::Response<tonic::body::Body>, tonic::Status> {
///     Ok(http::Response::builder().header("grpc-status", code).body(Default::default()).unwrap())
/// };
/// assert_eq!(classify.classify(&trailers_only("14")), Outcome::Failure); // UNAVAILABLE
/// assert_eq!(classify.classify(&trailers_only("8")), Outcome::Excluded); // RESOURCE_EXHAUSTED
/// ```
pub fn status_classifier() -> StatusRules {
    StatusRules::new()
}

impl<T> Classify<tonic::Response<T>, Status> for StatusRules {
    #[inline]
    fn classify(&self, result: &Result<tonic::Response<T>, Status>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(status) => self.transport(status),
        }
    }

    fn open_for(&self, result: &Result<tonic::Response<T>, Status>) -> Option<Duration> {
        let status = result.as_ref().err()?;
        let outcome = self.outcome(status.code());
        self.pushback(outcome, status.metadata().as_ref())
    }

    fn overloaded(&self, result: &Result<tonic::Response<T>, Status>) -> bool {
        match result {
            Ok(_) => false,
            Err(status) => overloaded_by(Some(status.code()), status.metadata().as_ref()),
        }
    }
}

/// `RESOURCE_EXHAUSTED`, or an answer that carries the server's pushback.
pub(crate) fn overloaded_by(code: Option<Code>, headers: &HeaderMap) -> bool {
    code == Some(Code::ResourceExhausted) || (code.is_some() && pushback_in(headers).is_some())
}

/// Tonic's transport error (a `Channel`'s), and a bare `Status`, as errors to walk.
fn tonic_error(error: &dyn Any) -> Option<&(dyn StdError + 'static)> {
    if let Some(e) = error.downcast_ref::<tonic::transport::Error>() {
        return Some(e);
    }
    error.downcast_ref::<Status>().map(|e| e as _)
}

/// The `grpc-status` in `headers`, if there is one.
pub(crate) fn code_in(headers: &HeaderMap) -> Option<Code> {
    headers
        .get("grpc-status")
        .map(|v| Code::from_bytes(v.as_bytes()))
}

/// The wait `grpc-retry-pushback-ms` asks for: a whole, positive number of milliseconds.
fn pushback_in(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(PUSHBACK)?.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ms = text.parse().unwrap_or(u64::MAX);
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The code gRPC gives a response with HTTP status `status` and no `grpc-status`
/// (gRPC's "HTTP to gRPC Status Code Mapping").
pub(crate) fn http_code(status: StatusCode) -> Code {
    match status {
        StatusCode::BAD_REQUEST => Code::Internal,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The table's row of `code`.
const fn index(code: Code) -> usize {
    let i = code as usize;
    if i < CODES {
        i
    } else {
        Code::Unknown as usize
    }
}
