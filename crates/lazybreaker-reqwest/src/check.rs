//! Health checks for [`Builder::health_check`](lazybreaker::Builder::health_check): a TCP connect
//! ([`tcp_check`]) and a GET of a health path that must answer 2xx ([`path_check`]), each
//! within a deadline of its own (shorter than the breaker's
//! [`check_timeout`](lazybreaker::Builder::check_timeout), 500 ms by default, so that a check that
//! hangs fails before anyone takes it over).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use reqwest::{Client, Url};

/// A health check's future, as the helpers return it.
pub type CheckFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// A check that passes when a TCP connection to `addr` opens within `deadline` (brpc's
/// default health check; the connection is closed at once). A node that accepts
/// connections but answers every request with an error passes it: check a health path
/// ([`path_check`]) to tell that apart.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use lazybreaker_reqwest::tcp_check;
/// use std::time::Duration;
///
/// let addr = "127.0.0.1:8080".parse().unwrap();
/// let breaker = Breaker::builder()
///     .name("db")
///     .health_check(tcp_check(addr, Duration::from_millis(200)))
///     .build();
/// # let _ = breaker;
/// ```
pub fn tcp_check(
    addr: SocketAddr,
    deadline: Duration,
) -> impl Fn() -> CheckFuture + Send + Sync + 'static {
    move || {
        Box::pin(async move {
            let connect = tokio::net::TcpStream::connect(addr);
            matches!(tokio::time::timeout(deadline, connect).await, Ok(Ok(_)))
        })
    }
}

/// A check that passes when a GET of `url` (a node's health path) answers with a 2xx status
/// within `deadline`, sent by `client` (its connection pool, TLS and proxy settings): brpc's
/// `health_check_path`. A refused connection, a timeout, or any other status fails it.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use lazybreaker_reqwest::path_check;
/// use std::time::Duration;
///
/// let health = "http://127.0.0.1:8080/health".parse().unwrap();
/// let breaker = Breaker::builder()
///     .name("search")
///     .health_check(path_check(reqwest::Client::new(), health, Duration::from_millis(200)))
///     .build();
/// # let _ = breaker;
/// ```
pub fn path_check(
    client: Client,
    url: Url,
    deadline: Duration,
) -> impl Fn() -> CheckFuture + Send + Sync + 'static {
    move || {
        let request = client.get(url.clone()).timeout(deadline).send();
        Box::pin(async move {
            // The client's timeout bounds the exchange; this one bounds the future as a
            // whole, should a client be built without timers.
            match tokio::time::timeout(deadline, request).await {
                Ok(Ok(response)) => response.status().is_success(),
                _ => false,
            }
        })
    }
}
