//! gRPC with a breaker per method, from a TOML file: Kitex's "Sub may be broken, Health must
//! not be", against a real tonic server on 127.0.0.1.
//!
//! Run it with `cargo run -p lazybreaker-grpc --example grpc`. The breakers' time is
//! simulated (a `ManualClock` shared by the registry), so the 16 simulated seconds run in
//! well under a second, with real calls over loopback, and print the same thing every time.
//!
//! The script: the server's `Sub` fails with `UNAVAILABLE` from 3 s to 9 s, and its
//! `grpc.health.v1` status says `NOT_SERVING` meanwhile. `Sub`'s breaker trips; each time its
//! open period ends, the next call asks the server's health service first and goes through
//! only once it says `SERVING`. A rejected call reaches the client as `UNAVAILABLE`, with
//! the rest of the open period as `grpc-retry-pushback-ms`. `Get` is untouched. `Health`
//! fails now and then, and the file makes it exempt: counted, never broken.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use lazybreaker::config::RegistrySettings;
use lazybreaker::human;
use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::{ManualClock, Registry, State};
use lazybreaker_grpc as grpc;
use lazybreaker_tower::KeyedBreakerLayer;
use tonic::body::Body;
use tonic::server::{NamedService, UnaryService};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::{Service, ServiceBuilder};

const METHODS: [&str; 3] = ["/echo.Echo/Get", "/echo.Echo/Sub", "/echo.Echo/Health"];
const CALL_EVERY: Duration = Duration::from_millis(100); // 10 calls per method per second
const SECONDS: u64 = 16;
/// When `Sub` is broken, in simulated milliseconds.
const BROKEN: std::ops::Range<u64> = 3_000..9_000;

#[derive(Clone, PartialEq, prost::Message)]
struct Ping {
    #[prost(uint64, tag = "1")]
    n: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Pong {}

/// The server: `echo.Echo`, whose methods answer as the script says at simulated time `now`.
#[derive(Clone)]
struct Echo {
    now: Arc<AtomicU64>,
}

impl NamedService for Echo {
    const NAME: &'static str = "echo.Echo";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let method = Method {
            path: request.uri().path().to_owned(),
            now: self.now.load(Ordering::SeqCst),
        };
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Pong, Ping>::default());
            Ok(grpc.unary(method, request).await)
        })
    }
}

struct Method {
    path: String,
    now: u64,
}

impl UnaryService<Ping> for Method {
    type Response = Pong;
    type Future = BoxFuture<Result<tonic::Response<Pong>, Status>>;

    fn call(&mut self, request: tonic::Request<Ping>) -> Self::Future {
        let n = request.into_inner().n;
        let answer = match self.path.as_str() {
            "/echo.Echo/Sub" if BROKEN.contains(&self.now) => Err(Status::unavailable("down")),
            "/echo.Echo/Health" if n.is_multiple_of(5) => Err(Status::unavailable("hiccup")),
            _ => Ok(tonic::Response::new(Pong {})),
        };
        Box::pin(std::future::ready(answer))
    }
}

/// Transitions, printed in the timeline row of the second they happened in.
#[derive(Clone, Default)]
struct Changes(Arc<Mutex<Vec<String>>>);

impl Observer for Changes {
    fn on_transition(&self, t: &Transition<'_>) {
        let why = match t.origin {
            Origin::HealthCheck => " (grpc.health.v1)",
            _ => "",
        };
        self.0.lock().unwrap().push(format!(
            "{}: {:?} -> {:?}{why} at {}",
            t.breaker,
            t.from,
            t.to,
            human::span(t.at)
        ));
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/grpc.toml");
    let settings: RegistrySettings = toml::from_str(&std::fs::read_to_string(path)?)?;
    println!("{path}: exempt {:?}\n", settings.exempt);

    // The server, with tonic-health's `grpc.health.v1` beside it.
    let now = Arc::new(AtomicU64::new(0));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<Echo>().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(Echo {
                now: Arc::clone(&now),
            })
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .timeout(Duration::from_secs(2))
        .connect_lazy();

    // The file's registry, a breaker per method, each revived through the health service
    // (over the plain channel: the check does not go through a breaker).
    let clock = ManualClock::new();
    let changes = Changes::default();
    let factory = settings.factory()?;
    let registry = {
        let (changes, channel) = (changes.clone(), channel.clone());
        Arc::new(
            Registry::new(move |method: &String| {
                factory(method)
                    .observer(changes.clone())
                    .health_check(grpc::health_check(channel.clone(), "echo.Echo"))
            })
            .clock(clock.clone()),
        )
    };
    let client = ServiceBuilder::new()
        .layer(
            KeyedBreakerLayer::new(Arc::clone(&registry), grpc::per_method)
                .classify(grpc::status_classifier())
                .on_rejected(grpc::AsStatus),
        )
        .service(channel);

    println!("  time  {:<22}{:<22}{:<22}", "Get", "Sub", "Health");
    let mut n = 0;
    let mut pushback_shown = false;
    for second in 0..SECONDS {
        let mut row: BTreeMap<&str, (u32, u32, u32)> = BTreeMap::new();
        for _ in 0..(1_000 / CALL_EVERY.as_millis() as u64) {
            let t = clock.now().as_millis() as u64;
            now.store(t, Ordering::SeqCst);
            if BROKEN.contains(&t) {
                health.set_not_serving::<Echo>().await;
            } else {
                health.set_serving::<Echo>().await;
            }
            for method in METHODS {
                n += 1;
                let mut grpc = tonic::client::Grpc::new(client.clone());
                grpc.ready().await?;
                let answer = grpc
                    .unary(
                        tonic::Request::new(Ping { n }),
                        PathAndQuery::from_static(method),
                        ProstCodec::<Ping, Pong>::default(),
                    )
                    .await;
                let cell = row.entry(method).or_default();
                match answer {
                    Ok(_) => cell.0 += 1,
                    Err(status) if status.message().starts_with("circuit breaker") => {
                        cell.2 += 1;
                        if !pushback_shown && status.code() == Code::Unavailable {
                            pushback_shown = true;
                            changes.0.lock().unwrap().push(format!(
                                "client: {:?} \"{}\", grpc-retry-pushback-ms: {:?}",
                                status.code(),
                                status.message(),
                                status.metadata().get("grpc-retry-pushback-ms"),
                            ));
                        }
                    }
                    Err(_) => cell.1 += 1,
                }
            }
            clock.advance(CALL_EVERY);
        }
        let cells: Vec<String> = METHODS
            .iter()
            .map(|m| {
                let (ok, failed, rejected) = row[*m];
                let state = match registry.breaker(*m).state() {
                    State::Closed => "closed",
                    State::HalfOpen => "half-open",
                    State::Open => "open",
                };
                format!("{state:<9} {ok:>2}/{failed:>2}/{rejected:>2}")
            })
            .collect();
        println!(
            "{:>5}s  {:<22}{:<22}{:<22}",
            second, cells[0], cells[1], cells[2]
        );
        for change in changes.0.lock().unwrap().drain(..) {
            println!("        {change}");
        }
    }
    let sub = registry.breaker("/echo.Echo/Sub").totals();
    let health_totals = registry.breaker("/echo.Echo/Health").totals();
    println!(
        "\nSub: {} health checks, {} failed; Health: {} failures counted, opened {} times",
        sub.health_checks, sub.health_checks_failed, health_totals.failures, health_totals.opened
    );
    println!(
        "(a row per simulated second; each cell: the state at the end of the second, then its
ok/failed/rejected calls; the changes of the second below it)"
    );
    Ok(())
}
