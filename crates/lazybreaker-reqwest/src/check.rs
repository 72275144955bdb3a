//! Health checks for [`Builder::health_check`](lazybreaker::Builder::health_check) and
//! [`Pool::health_check`](lazybreaker::pool::Pool::health_check): a TCP connect and a GET of
//! a health path that must answer 2xx, each within a deadline of its own (shorter than the
//! breaker's [`check_timeout`](lazybreaker::Builder::check_timeout), 500 ms by default, so
//! that a check that hangs fails before anyone takes it over).
//!
//! Each comes in two forms: [`check_tcp`] and [`check_path`] run one check now (its
//! future: what a pool's check, `Fn(&K) -> Future`, returns for a key), [`tcp_check`] and
//! [`path_check`] make a breaker's check (a `Fn() -> Future` that runs one each time it is
//! called).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use reqwest::{Client, IntoUrl, Url};

/// A health check's future, as the helpers return it.
pub type CheckFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// A check that passes when a TCP connection to `addr` opens within `deadline` (brpc's
/// default health check; the connection is closed at once). A node that accepts
/// connections but answers every request with an error passes it: check a health path
/// ([`path_check`]) to tell that apart.
///
/// A breaker's check: each call of the returned closure runs one check. For a
/// [`Pool`](lazybreaker::pool::Pool)'s check, or to run one now, call [`check_tcp`].
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
    move || check_tcp(addr, deadline)
}

/// A check that passes when a GET of `url` (a node's health path) answers with a 2xx status
/// within `deadline`, sent by `client` (its connection pool, TLS and proxy settings): brpc's
/// `health_check_path`. A refused connection, a timeout, or any other status fails it.
///
/// A breaker's check: each call of the returned closure runs one check (the client and the
/// URL are kept, and cloned for each). For a [`Pool`](lazybreaker::pool::Pool)'s check,
/// whose URL depends on the endpoint, or to run one now, call [`check_path`].
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
    move || check_path(&client, url.clone(), deadline)
}

/// Runs one TCP check now: passes when a connection to `addr` opens within `deadline` (and
/// closes it at once). The check [`tcp_check`] makes, run once: what a
/// [`Pool`](lazybreaker::pool::Pool)'s check returns for an endpoint.
///
/// # Examples
///
/// ```
/// use lazybreaker::pool::Pool;
/// use lazybreaker::Breaker;
/// use lazybreaker_reqwest::check_tcp;
/// use std::net::SocketAddr;
/// use std::time::Duration;
///
/// let pool = Pool::new(|_: &SocketAddr| Breaker::builder())
///     // An isolated endpoint comes back once it accepts connections again.
///     .health_check(|addr: &SocketAddr| check_tcp(*addr, Duration::from_millis(200)));
/// # let _ = pool;
/// ```
pub fn check_tcp(addr: SocketAddr, deadline: Duration) -> CheckFuture {
    Box::pin(async move {
        let connect = tokio::net::TcpStream::connect(addr);
        matches!(tokio::time::timeout(deadline, connect).await, Ok(Ok(_)))
    })
}

/// Runs one health-path check now: a GET of `url` sent by `client`, that passes when it
/// answers with a 2xx status within `deadline`. A URL that does not parse, a refused
/// connection, a timeout, or any other status fails it. The check [`path_check`] makes, run
/// once: what a [`Pool`](lazybreaker::pool::Pool)'s check returns for an endpoint, whose
/// health path depends on its address. The request is built at once (the client is not
/// kept; `reqwest::Client` shares its connection pool between clones).
///
/// # Examples
///
/// ```
/// use lazybreaker::pool::Pool;
/// use lazybreaker::Breaker;
/// use lazybreaker_reqwest::check_path;
/// use std::net::SocketAddr;
/// use std::time::Duration;
///
/// let checker = reqwest::Client::new();
/// let pool = Pool::new(|_: &SocketAddr| Breaker::builder())
///     // An isolated endpoint comes back once its health path answers 2xx.
///     .health_check(move |addr: &SocketAddr| {
///         check_path(&checker, format!("http://{addr}/health"), Duration::from_millis(200))
///     });
/// # let _ = pool;
/// ```
pub fn check_path(client: &Client, url: impl IntoUrl, deadline: Duration) -> CheckFuture {
    let request = client.get(url).timeout(deadline).send();
    Box::pin(async move {
        // The client's timeout bounds the exchange; this one bounds the future as a whole,
        // should a client be built without timers.
        match tokio::time::timeout(deadline, request).await {
            Ok(Ok(response)) => response.status().is_success(),
            _ => false,
        }
    })
}
