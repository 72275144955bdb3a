//! The status page served for real on 127.0.0.1 and fetched as a user would: the JSON, the
//! metrics, the guarded controls, untrusted names, and the page itself in a real headless
//! Chromium (the DOM after its script ran, and a screenshot).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazybreaker::observe::{History, Origin};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{Balance, OutlierDetection, Pick, Pool};
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::{Breaker, Clock, Forced, ManualClock, Registry, State};
use lazybreaker_dashboard::{metrics, Dashboard};

/// A name made of everything that could break out of HTML, JSON or a label.
const HOSTILE: &str = "<b>\"tom & jerry\"\n</script><script>alert(1)</script>";

/// Breakers in every state the page shows, on one manual clock, all kept in one history.
struct Fleet {
    history: Arc<History>,
    closed: Arc<Breaker<ConsecutiveFailures, Arc<History>>>,
    open: Arc<Breaker<ConsecutiveFailures, Arc<History>>>,
    half_open: Arc<Breaker<ConsecutiveFailures, Arc<History>>>,
    forced: Arc<Breaker<ConsecutiveFailures, Arc<History>>>,
    hosts: Arc<Registry<String, ConsecutiveFailures, Arc<History>>>,
}

fn fleet() -> Fleet {
    let clock = ManualClock::new();
    let history = Arc::new(History::new(64));
    let build = |name: &str, timeout: u64| {
        Arc::new(
            Breaker::builder()
                .name(name)
                .policy(ConsecutiveFailures::new(2).unwrap())
                .timeout(Duration::from_secs(timeout))
                .clock(clock.clone())
                .observer(Arc::clone(&history))
                .build(),
        )
    };
    let fail = |b: &Breaker<_, Arc<History>>| {
        for _ in 0..2 {
            let _ = b.execute(|| Err::<(), _>("down"));
        }
    };
    let closed = build("inventory", 60);
    let _ = closed.execute(|| Ok::<_, ()>(()));
    let half_open = build("search", 10);
    fail(&half_open);
    clock.advance(Duration::from_secs(30)); // search's open period is over: half-open
    let open = build("payments", 60);
    fail(&open);
    let forced = build("ledger", 60);
    forced.force_open();
    let (c, h) = (clock.clone(), Arc::clone(&history));
    let hosts = Arc::new(Registry::new(move |_: &String| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .clock(c.clone())
            .observer(Arc::clone(&h))
    }));
    let _ = hosts.breaker("api.example.com").execute(|| Ok::<_, ()>(()));
    let _ = hosts.breaker(HOSTILE).execute(|| Err::<(), _>("down"));
    Fleet {
        history,
        closed,
        open,
        half_open,
        forced,
        hosts,
    }
}

fn dashboard(f: &Fleet) -> Dashboard {
    Dashboard::new()
        .registry(Arc::clone(&f.hosts))
        .breaker(Arc::clone(&f.closed))
        .breaker(Arc::clone(&f.open))
        .breaker(Arc::clone(&f.half_open))
        .breaker(Arc::clone(&f.forced))
}

/// A pool whose endpoints' breakers keep their changes in a history.
type Endpoints = Pool<u32, ConsecutiveFailures, Arc<History>>;

/// A pick of an [`Endpoints`] pool.
type Held = Pick<u32, ConsecutiveFailures, Arc<History>>;

/// A round-robin pool of endpoints 0 to 4 named `name`, on a clock of its own, whose
/// endpoint 2 failed 90 % of its 100 calls: the first pick after the interval ejected it
/// (failure percentage, Envoy's 85 %), for 30 s. Its breakers keep their changes in
/// `history` and never trip on their own.
fn ejecting_pool(name: &str, history: &Arc<History>) -> (Arc<Endpoints>, ManualClock) {
    let clock = ManualClock::new();
    let h = Arc::clone(history);
    let pool = Arc::new(
        Pool::new(move |_: &u32| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1_000).unwrap())
                .observer(Arc::clone(&h))
        })
        .clock(clock.clone())
        .named(name)
        .balance(Balance::RoundRobin)
        .outlier_detection(OutlierDetection::new().failure_percentage(85, 5, 50)),
    );
    pool.set(0..5);
    let mut calls_to_2 = 0;
    for _ in 0..500 {
        let pick = pool.pick().unwrap();
        if *pick.key() == 2 {
            calls_to_2 += 1;
            if calls_to_2 % 10 != 0 {
                pick.failure();
                continue;
            }
        }
        pick.success();
    }
    assert_eq!(calls_to_2, 100);
    clock.advance(Duration::from_secs(10));
    pool.pick().unwrap().success(); // judges the interval
    assert_eq!(pool.breaker(&2).unwrap().state(), State::Open);
    (pool, clock)
}

/// A pool of endpoints 10 and 11 named `name`, with a deadline of 300 ms, whose calls (one
/// each, returned) never came back: a deadline later both hung, out whatever the cap, and
/// one pick was answered `NoEndpoint`.
fn hung_pool(name: &str, history: &Arc<History>) -> (Arc<Endpoints>, Vec<Held>) {
    let clock = ManualClock::new();
    let h = Arc::clone(history);
    let pool = Arc::new(
        Pool::new(move |_: &u32| Breaker::builder().observer(Arc::clone(&h)))
            .clock(clock.clone())
            .named(name)
            .balance(Balance::RoundRobin)
            .deadline(Duration::from_millis(300)),
    );
    pool.set([10, 11]);
    let hanging = vec![pool.pick().unwrap(), pool.pick().unwrap()];
    clock.advance(Duration::from_millis(300));
    assert!(pool.pick().is_err(), "both hung: NoEndpoint");
    (pool, hanging)
}

/// The text of the cell labelled `label` in the pools' table row of `pool` (its name as
/// the page escapes it).
fn pool_cell<'a>(html: &'a str, pool: &str, label: &str) -> &'a str {
    let start = format!("<tr class=\"pool\" data-pool=\"{pool}\">");
    let row = html
        .split(start.as_str())
        .nth(1)
        .unwrap_or_else(|| panic!("no row for pool {pool}: {html}"));
    let row = &row[..row.find("</tr>").expect("a whole row")];
    let cell = row
        .split(format!("data-label=\"{label}\">").as_str())
        .nth(1)
        .unwrap_or_else(|| panic!("no cell {label} in {row}"));
    &cell[..cell.find("</td>").expect("a whole cell")]
}

/// A server for `router` on a free port of 127.0.0.1, on a runtime of its own that lives
/// as long as the returned guard.
struct Server {
    addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

fn serve(router: axum::Router) -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, router).await.unwrap() });
    Server {
        addr,
        _runtime: runtime,
    }
}

/// What the server answered.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request over a fresh connection, read to its end (bounded: 10 s).
fn request(server: &Server, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: 0\r\n",
        server.addr
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn get(server: &Server, path: &str) -> Reply {
    request(server, "GET", path, &[])
}

/// The JSON object of the breaker named `name`.
fn entry<'a>(all: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    all.as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no breaker {name:?} in {all}"))
}

#[test]
fn the_json_has_every_breaker_with_its_state_forced_mode_and_history() {
    let f = fleet();
    let server = serve(dashboard(&f).router());
    let reply = get(&server, "/breakers");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let all = reply.json();
    assert_eq!(all.as_array().unwrap().len(), 6);
    for (name, state, forced) in [
        ("inventory", "closed", serde_json::Value::Null),
        ("payments", "open", serde_json::Value::Null),
        ("search", "half-open", serde_json::Value::Null),
        ("ledger", "open", "open".into()),
        ("api.example.com", "closed", serde_json::Value::Null),
        (HOSTILE, "open", serde_json::Value::Null),
    ] {
        let b = entry(&all, name);
        assert_eq!(
            (&b["state"], &b["forced"]),
            (&state.into(), &forced),
            "{name}"
        );
    }
    // Open and half-open first.
    let states: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["open", "open", "open", "half-open", "closed", "closed"]
    );
    // The trip, with the counts that caused it, on the breaker's clock.
    let payments = entry(&all, "payments");
    let trip = &payments["history"][0];
    assert_eq!(
        (&trip["from"], &trip["to"]),
        (&"closed".into(), &"open".into())
    );
    assert_eq!(trip["origin"], "breaker");
    assert_eq!(trip["counts"]["consecutive_failures"], 2);
    assert_eq!(trip["at"], "30s");
    assert_eq!(payments["retry_after"], "1m");
    assert_eq!(payments["totals"]["failures"], 2);
    assert_eq!(entry(&all, "ledger")["history"][0]["origin"], "manual");
    // Half-open by expiry: no call moved it, so its history ends at the trip.
    let search = entry(&all, "search");
    assert_eq!(search["history"].as_array().unwrap().len(), 1);
    assert_eq!(f.half_open.totals().opened, 1);
}

/// Checks the JSON rule for durations in `value` and everything inside it: a duration `x` is
/// a duration string (or `null`) with `x_ms` beside it, whole milliseconds as an integer (or
/// `null` with it), a wait (`retry_after`) rounded up and any other duration to the nearest;
/// no other field is in `_ms`, and none in another unit. A policy's own figures (`policy`)
/// are its gauges, named with their units, and are not walked. Counts the durations seen in
/// `seen`, by name, `null` or not.
fn check_durations(value: &serde_json::Value, at: &str, seen: &mut Vec<(String, bool)>) {
    use serde_json::Value;
    const NAMES: [&str; 3] = ["name", "breaker", "pool"];
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_durations(item, &format!("{at}[{i}]"), seen);
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let path = format!("{at}.{key}");
                for unit in ["_ns", "_nanos", "_us", "_micros", "_s", "_secs", "_seconds"] {
                    assert!(!key.ends_with(unit), "{path}: a duration in another unit");
                }
                if key == "policy" {
                    continue;
                }
                if let Some(base) = key.strip_suffix("_ms") {
                    let Some(duration) = fields.get(base) else {
                        panic!("{path} without `{base}` beside it");
                    };
                    assert!(
                        duration.is_null() || duration.is_string(),
                        "{path}: `{base}` is {duration}"
                    );
                    continue;
                }
                let text = match field {
                    Value::String(text) if !NAMES.contains(&key.as_str()) => text,
                    Value::Null if fields.contains_key(&format!("{key}_ms")) => {
                        assert!(fields[&format!("{key}_ms")].is_null(), "{path}_ms");
                        seen.push((key.clone(), false));
                        continue;
                    }
                    other => {
                        check_durations(other, &path, seen);
                        continue;
                    }
                };
                let Ok(d) = humantime::parse_duration(text) else {
                    continue; // not a duration: a state, an origin, a forced mode
                };
                let nanos = d.as_nanos();
                let expected = if key == "retry_after" {
                    nanos.div_ceil(1_000_000)
                } else {
                    (nanos + 500_000) / 1_000_000
                };
                let ms = fields
                    .get(&format!("{key}_ms"))
                    .unwrap_or_else(|| panic!("{path} = {text:?} without `{key}_ms` beside it"));
                assert_eq!(
                    ms.as_u64().map(u128::from),
                    Some(expected),
                    "{path}_ms for {text:?}"
                );
                seen.push((key.clone(), true));
            }
        }
        _ => {}
    }
}

/// The JSON writes every duration by one rule (see [`check_durations`]), in every place a
/// duration shows: a breaker's `at` and `retry_after`, a change's `at`, `open_for` and
/// `first_at`, on `/breakers`, on `/pools` and in a control's answer. Durations of whole
/// seconds and of odd nanoseconds, to see the rounding.
#[test]
fn every_duration_in_the_json_is_a_string_with_its_whole_milliseconds_beside_it() {
    let f = fleet();
    let (edge, _clock) = ejecting_pool("edge", &f.history);
    let (stuck, _hanging) = hung_pool("stuck", &f.history);
    // Tripped at 2.5 ms for 1 s, read 400.000001 ms later: `at` 402.500001 ms (403 to the
    // nearest), 599.999999 ms left to wait (600, rounded up).
    let clock = ManualClock::new();
    let odd = Arc::new(
        Breaker::builder()
            .name("odd")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(1))
            .clock(clock.clone())
            .observer(Arc::clone(&f.history))
            .build(),
    );
    clock.advance(Duration::from_micros(2_500));
    let _ = odd.execute(|| Err::<(), _>("down"));
    clock.advance(Duration::from_nanos(400_000_001));
    let server = serve(
        dashboard(&f)
            .breaker(Arc::clone(&odd))
            .pool(edge)
            .pool(stuck)
            .controls("t0ken")
            .router(),
    );

    let all = get(&server, "/breakers").json();
    let mut seen = Vec::new();
    check_durations(&all, "breakers", &mut seen);
    let odd = entry(&all, "odd");
    assert_eq!(odd["at"], "402ms 500us 1ns");
    assert_eq!(odd["at_ms"], 403);
    assert_eq!(odd["retry_after"], "599ms 999us 999ns");
    assert_eq!(odd["retry_after_ms"], 600);
    let trip = &odd["history"][0];
    assert_eq!(
        (&trip["at"], &trip["at_ms"]),
        (&"2ms 500us".into(), &3.into())
    );
    assert_eq!(
        (&trip["open_for"], &trip["open_for_ms"]),
        (&"1s".into(), &1_000.into())
    );
    assert_eq!(entry(&all, "payments")["retry_after_ms"], 60_000);
    assert!(entry(&all, "inventory")["retry_after_ms"].is_null());
    for (name, present) in [
        ("at", true),
        ("retry_after", true),
        ("retry_after", false),
        ("open_for", true),
        ("open_for", false),
        ("first_at", true),
    ] {
        assert!(
            seen.iter().any(|(n, p)| n == name && *p == present),
            "no {name} ({}) in {all}",
            if present { "set" } else { "null" }
        );
    }

    let pools = get(&server, "/pools").json();
    assert_eq!(pools.as_array().map(Vec::len), Some(2), "{pools}");
    check_durations(&pools, "pools", &mut Vec::new());

    let reply = request(
        &server,
        "POST",
        "/breakers/odd/force_open",
        &[("authorization", "Bearer t0ken")],
    );
    assert_eq!(reply.status, 200);
    let mut seen = Vec::new();
    check_durations(&reply.json(), "force_open", &mut seen);
    assert!(seen.iter().any(|(n, _)| n == "at"));
}

#[test]
fn the_metrics_are_the_collectors_in_the_openmetrics_format() {
    let f = fleet();
    let server = serve(dashboard(&f).router());
    let reply = get(&server, "/metrics");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(reply
        .body
        .contains(r#"circuit_breaker_state{breaker="payments"} 2"#));
    assert!(reply
        .body
        .contains(r#"circuit_breaker_state{breaker="search"} 1"#));
    assert!(reply
        .body
        .contains(r#"circuit_breaker_forced{breaker="ledger"} 1"#));
    // The hostile name is one escaped label value, on one line.
    assert!(reply.body.contains(
        r#"circuit_breaker_state{breaker="<b>\"tom & jerry\"\n</script><script>alert(1)</script>"} 2"#
    ));
    assert!(reply.body.ends_with("# EOF\n"));
}

#[test]
fn under_a_prefix_the_page_answers_with_and_without_the_trailing_slash() {
    for prefix in ["/status", "/status/", "status"] {
        let f = fleet();
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "the application" }))
            .merge(dashboard(&f).controls("t0ken").router_at(prefix));
        let server = serve(app);
        for path in [
            "/status",
            "/status/",
            "/status?filter=pay",
            "/status/?filter=pay",
        ] {
            let page = get(&server, path);
            assert_eq!(page.status, 200, "{prefix:?} {path}: {}", page.body);
            assert_eq!(
                page.header("content-type"),
                Some("text/html; charset=utf-8"),
                "{prefix:?} {path}"
            );
            assert!(
                page.body.starts_with("<!doctype html>"),
                "{prefix:?} {path}"
            );
            assert!(page.body.contains("payments"), "{prefix:?} {path}");
        }
        // The other routes keep working under the prefix, and only there.
        let json = get(&server, "/status/breakers");
        assert_eq!(json.status, 200);
        assert_eq!(entry(&json.json(), "ledger")["forced"], "open");
        assert_eq!(get(&server, "/status/pools").status, 200);
        let metrics = get(&server, "/status/metrics");
        assert_eq!(metrics.status, 200);
        assert!(metrics
            .body
            .contains(r#"circuit_breaker_state{breaker="payments"} 2"#));
        let released = request(
            &server,
            "POST",
            "/status/breakers/ledger/release",
            &[("authorization", "Bearer t0ken")],
        );
        assert_eq!(released.status, 200, "{}", released.body);
        assert_eq!(f.forced.forced(), None);
        assert_eq!(get(&server, "/").body, "the application");
        for elsewhere in ["/breakers", "/metrics", "/status/nowhere", "/statusx"] {
            assert_eq!(
                get(&server, elsewhere).status,
                404,
                "{prefix:?} {elsewhere}"
            );
        }
    }
}

#[test]
fn at_the_root_router_at_is_the_router() {
    for prefix in ["", "/"] {
        let f = fleet();
        let server = serve(dashboard(&f).router_at(prefix));
        let page = get(&server, "/");
        assert_eq!(page.status, 200, "{prefix:?}");
        assert!(page.body.contains("payments"));
        assert_eq!(get(&server, "/breakers").status, 200, "{prefix:?}");
    }
}

#[test]
fn the_metrics_alone_answer_at_the_path_the_user_chose() {
    let f = fleet();
    let collector = BreakerCollector::new()
        .registry(Arc::clone(&f.hosts))
        .breaker(Arc::clone(&f.open))
        .breaker(Arc::clone(&f.forced));
    // In a router with a state of its own: the route takes the router's state type.
    #[derive(Clone)]
    struct App;
    let app = axum::Router::<App>::new()
        .route("/", axum::routing::get(|| async { "the application" }))
        .route("/internal/metrics", metrics(collector))
        .with_state(App);
    let server = serve(app);
    let reply = get(&server, "/internal/metrics");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(reply
        .body
        .contains(r#"circuit_breaker_state{breaker="payments"} 2"#));
    assert!(reply
        .body
        .contains(r#"circuit_breaker_forced{breaker="ledger"} 1"#));
    assert!(reply
        .body
        .contains(r#"circuit_breaker_calls_total{breaker="api.example.com",outcome="success"} 1"#));
    // Only what the collector was given.
    assert!(!reply.body.contains(r#"breaker="inventory""#));
    assert!(reply.body.ends_with("# EOF\n"));
    // The dashboard's /metrics answers the same series for the same breakers.
    let whole = serve(
        Dashboard::new()
            .registry(Arc::clone(&f.hosts))
            .breaker(Arc::clone(&f.open))
            .breaker(Arc::clone(&f.forced))
            .router(),
    );
    assert_eq!(get(&whole, "/metrics").body, reply.body);
    // Only the metrics, only at that path, only for GET (and HEAD).
    assert_eq!(
        request(&server, "POST", "/internal/metrics", &[]).status,
        405
    );
    let head = request(&server, "HEAD", "/internal/metrics", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    for elsewhere in ["/metrics", "/internal/metrics/", "/breakers"] {
        assert_eq!(get(&server, elsewhere).status, 404, "{elsewhere}");
    }
    assert_eq!(get(&server, "/").body, "the application");
}

#[test]
fn without_controls_no_request_changes_a_breaker() {
    let f = fleet();
    let server = serve(dashboard(&f).router());
    for action in ["force_open", "force_closed", "release"] {
        let reply = request(
            &server,
            "POST",
            &format!("/breakers/inventory/{action}"),
            &[("authorization", "Bearer anything")],
        );
        assert!(
            matches!(reply.status, 404 | 405),
            "{action}: {}",
            reply.status
        );
    }
    assert_eq!((f.closed.state(), f.closed.forced()), (State::Closed, None));
    assert_eq!(f.history.recent_for("inventory").len(), 0);
}

#[test]
fn controls_need_the_bearer_token_and_change_nothing_without_it() {
    let f = fleet();
    let server = serve(dashboard(&f).controls("s3cret-token").router());
    let path = "/breakers/inventory/force_open";

    let none = request(&server, "POST", path, &[]);
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    let basic = request(
        &server,
        "POST",
        path,
        &[("authorization", "Basic czNjcmV0")],
    );
    assert_eq!(basic.status, 401);
    for wrong in [
        "Bearer s3cret-toke",
        "Bearer s3cret-tokenX",
        "Bearer S3CRET-TOKEN",
    ] {
        let reply = request(&server, "POST", path, &[("authorization", wrong)]);
        assert_eq!(reply.status, 403, "{wrong:?}");
    }
    assert_eq!((f.closed.state(), f.closed.forced()), (State::Closed, None));
    assert!(f.history.recent_for("inventory").is_empty());

    let ok = request(
        &server,
        "POST",
        path,
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let after = ok.json();
    assert_eq!(
        (&after["state"], &after["forced"]),
        (&"open".into(), &"open".into())
    );
    assert_eq!(f.closed.forced(), Some(Forced::Open));
    let recorded = f.history.recent_for("inventory");
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (recorded[0].from, recorded[0].to, recorded[0].origin),
        (State::Closed, State::Open, Origin::Manual)
    );

    let released = request(
        &server,
        "POST",
        "/breakers/inventory/release",
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(released.status, 200);
    assert_eq!((f.closed.state(), f.closed.forced()), (State::Closed, None));
    // GET is not a control.
    let get = request(
        &server,
        "GET",
        "/breakers/payments/release",
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(get.status, 405);
    assert_eq!(f.open.state(), State::Open);
}

#[test]
fn a_control_that_changes_only_the_forced_mode_is_recorded_too() {
    let f = fleet();
    let server = serve(dashboard(&f).controls("t0ken").router());
    let auth = [("authorization", "Bearer t0ken")];
    let reply = request(&server, "POST", "/breakers/inventory/force_closed", &auth);
    assert_eq!(reply.status, 200);
    assert_eq!(f.closed.forced(), Some(Forced::Closed));
    let recorded = f.history.recent_for("inventory");
    assert_eq!(recorded.len(), 1);
    let r = &recorded[0];
    assert_eq!(
        (r.from, r.to, r.origin, r.forced),
        (
            State::Closed,
            State::Closed,
            Origin::Manual,
            Some(Forced::Closed)
        )
    );
    // A control that changed the state is recorded once, by the observer.
    let reply = request(&server, "POST", "/breakers/payments/force_closed", &auth);
    assert_eq!(reply.status, 200);
    let payments = f.history.recent_for("payments");
    assert_eq!(payments.len(), 2);
    assert_eq!(
        (payments[1].from, payments[1].to),
        (State::Open, State::Closed)
    );
}

#[test]
fn a_control_reaches_registry_breakers_by_their_escaped_name_and_404s_unknown_ones() {
    let f = fleet();
    let server = serve(dashboard(&f).controls("t0ken").router());
    let auth = [("authorization", "Bearer t0ken")];
    let encoded: String = HOSTILE
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let reply = request(
        &server,
        "POST",
        &format!("/breakers/{encoded}/release"),
        &auth,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["name"], HOSTILE);
    assert_eq!(f.hosts.get(HOSTILE).unwrap().state(), State::Closed);

    let unknown = request(&server, "POST", "/breakers/nobody/force_open", &auth);
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].is_string());
}

#[test]
fn the_page_is_readable_without_javascript_and_escapes_names() {
    let f = fleet();
    let server = serve(dashboard(&f).router());
    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let policy = page.header("content-security-policy").unwrap();
    assert!(policy.starts_with("default-src 'none'"));
    let html = &page.body;
    // Self-contained: nothing loaded from anywhere. The one link is the icon, an empty
    // `data:` URL, so that a browser does not ask the server for `/favicon.ico` either.
    for outside in ["src=", "@import", "url("] {
        assert!(!html.contains(outside), "{outside}");
    }
    assert_eq!(html.matches("href=").count(), 1);
    assert!(html.contains(r#"<link rel="icon" href="data:,">"#));
    // Server-rendered rows, open and half-open first.
    let order: Vec<&str> = ["payments", "ledger", "search", "inventory"]
        .iter()
        .map(|n| {
            let at = html.find(&format!("data-name=\"{n}\"")).unwrap();
            (at, *n)
        })
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(
        order[..2]
            .iter()
            .filter(|n| ["payments", "ledger"].contains(n))
            .count(),
        2
    );
    assert_eq!(order[2..], ["search", "inventory"]);
    assert!(html.contains(r#"data-name="search" data-state="half-open""#));
    assert!(html.contains(r#"data-name="ledger" data-state="open" data-forced="open""#));
    assert!(html.contains("<svg class=\"timeline\""));
    // The hostile name, escaped; the page's own script is the only one.
    assert!(html.contains("&lt;b&gt;&quot;tom &amp; jerry&quot;\n&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_eq!(html.matches("<script>").count(), 1);
    assert_eq!(html.matches("</script>").count(), 1);
    // No controls without `controls`.
    assert!(!html.contains("data-action=\""));
}

#[test]
fn the_filter_keeps_the_names_that_contain_it() {
    let f = fleet();
    let server = serve(dashboard(&f).router());
    let html = get(&server, "/?filter=PAY").body;
    assert!(html.contains("data-name=\"payments\""));
    assert!(!html.contains("data-name=\"inventory\""));
    assert!(html.contains("value=\"PAY\""));
}

/// A clock that panics while armed, and reads the manual clock otherwise.
#[derive(Debug, Clone)]
struct Flaky {
    armed: Arc<AtomicBool>,
    clock: ManualClock,
}

impl Clock for Flaky {
    fn now(&self) -> Duration {
        if self.armed.load(Ordering::SeqCst) {
            panic!("the clock is broken");
        }
        self.clock.now()
    }
}

#[test]
fn a_breaker_whose_clock_panics_is_counted_unreadable_and_the_rest_still_served() {
    let f = fleet();
    let armed = Arc::new(AtomicBool::new(false));
    let broken = Arc::new(
        Breaker::builder()
            .name("broken-clock")
            .clock(Flaky {
                armed: Arc::clone(&armed),
                clock: ManualClock::new(),
            })
            .build(),
    );
    let server = serve(dashboard(&f).breaker(Arc::clone(&broken)).router());
    armed.store(true, Ordering::SeqCst);

    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("1 unreadable"), "{}", page.body);
    assert!(!page.body.contains("data-name=\"broken-clock\""));
    assert!(page.body.contains("data-name=\"payments\""));
    let json = get(&server, "/breakers");
    assert_eq!(json.status, 200);
    let all = json.json();
    assert!(all
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["name"] != "broken-clock"));
    assert_eq!(entry(&all, "payments")["state"], "open");
    assert_eq!(get(&server, "/metrics").status, 200);

    // Mended, it is read again: nothing stayed broken in the dashboard.
    armed.store(false, Ordering::SeqCst);
    let all = get(&server, "/breakers").json();
    assert_eq!(entry(&all, "broken-clock")["state"], "closed");
    assert!(!get(&server, "/").body.contains("unreadable"));
}

#[test]
fn a_control_whose_observer_panics_took_effect_and_answers_500() {
    let armed = Arc::new(AtomicBool::new(false));
    let told = Arc::new(AtomicUsize::new(0));
    let (a, t) = (Arc::clone(&armed), Arc::clone(&told));
    let b = Arc::new(
        Breaker::builder()
            .name("touchy")
            .clock(ManualClock::new())
            .on_state_change(move |_, _, _| {
                t.fetch_add(1, Ordering::SeqCst);
                if a.load(Ordering::SeqCst) {
                    panic!("the observer is broken");
                }
            })
            .build(),
    );
    let server = serve(
        Dashboard::new()
            .breaker(Arc::clone(&b))
            .controls("tok")
            .router(),
    );
    let auth = [("authorization", "Bearer tok")];
    armed.store(true, Ordering::SeqCst);

    let forced = request(&server, "POST", "/breakers/touchy/force_open", &auth);
    assert_eq!(forced.status, 500, "{}", forced.body);
    assert!(
        forced.body.contains("force_open took effect"),
        "{}",
        forced.body
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.forced(), Some(Forced::Open));
    assert_eq!(told.load(Ordering::SeqCst), 1);

    // The server is still up, and the next control works as usual once the observer mends.
    assert_eq!(
        entry(&get(&server, "/breakers").json(), "touchy")["state"],
        "open"
    );
    armed.store(false, Ordering::SeqCst);
    let released = request(&server, "POST", "/breakers/touchy/release", &auth);
    assert_eq!(released.status, 200, "{}", released.body);
    assert_eq!(released.json()["state"], "closed");
    assert_eq!(b.forced(), None);
}

/// A pool with an ejected endpoint and one whose endpoints hung: each pool's own figures,
/// exact, on the page (a row per pool), in `GET /pools` and in the metrics; the ejections in
/// the recent changes and in the endpoint's history, with their reasons.
#[test]
fn a_pool_with_an_ejected_endpoint_shows_its_figures_on_the_page_and_in_the_json() {
    let history = Arc::new(History::new(64));
    let (edge, _clock) = ejecting_pool("edge", &history);
    let held = edge.pick().unwrap(); // in flight while the page is read
    let (stuck, hanging) = hung_pool("stuck", &history);
    let server = serve(
        Dashboard::new()
            .pool(Arc::clone(&edge))
            .pool(Arc::clone(&stuck))
            .router(),
    );

    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    let html = &page.body;
    assert!(html.contains("<h2>Pools</h2><table id=\"pools\">"));
    for (pool, figures) in [
        (
            "edge",
            [
                ("nodes", "5"),
                ("isolated", "1"),
                ("ejected", "1"),
                ("down", "0"),
                ("in flight", "1"),
                ("picks", "502"),
                ("over the cap", "0"),
                ("no endpoint", "0"),
                ("outliers detected", "1"),
                (
                    "retries",
                    "0 retried · 0 budget denied · 0 throttled · 0 exhausted",
                ),
                ("hedges", "0 hedged · 0 won · 0 cancelled · 0 budget denied"),
                ("limit", "0 at their limit · 0 limited · 0 skipped"),
                (
                    "ejections",
                    "0 success rate · 1 failure percentage · 0 hung",
                ),
            ],
        ),
        (
            "stuck",
            [
                ("nodes", "2"),
                ("isolated", "2"),
                ("ejected", "2"),
                ("down", "2"),
                ("in flight", "2"),
                ("picks", "2"),
                ("over the cap", "0"),
                ("no endpoint", "1"),
                ("outliers detected", "0"),
                (
                    "retries",
                    "0 retried · 0 budget denied · 0 throttled · 0 exhausted",
                ),
                ("hedges", "0 hedged · 0 won · 0 cancelled · 0 budget denied"),
                ("limit", "0 at their limit · 0 limited · 0 skipped"),
                (
                    "ejections",
                    "0 success rate · 0 failure percentage · 2 hung",
                ),
            ],
        ),
    ] {
        for (label, value) in figures {
            assert_eq!(pool_cell(html, pool, label), value, "{pool}: {label}");
        }
    }
    assert!(
        html.find("data-pool=\"edge\"") < html.find("data-pool=\"stuck\""),
        "the pools in the order given"
    );
    // The ejections in the recent changes, each with its reason.
    assert!(html.contains("data-name=\"2\" data-origin=\"ejected_failure_percentage\">"));
    assert!(html.contains("<span class=\"origin\">ejected by the pool: failure percentage</span>"));
    assert!(html.contains("data-name=\"10\" data-origin=\"ejected_hung\">"));
    assert!(html.contains("<span class=\"origin\">ejected by the pool: hung</span>"));

    let pools = get(&server, "/pools");
    assert_eq!(pools.status, 200);
    assert_eq!(pools.header("content-type"), Some("application/json"));
    assert_eq!(
        pools.json(),
        serde_json::json!([
            {
                "name": "edge",
                "endpoints": 5,
                "isolated": 1,
                "ejected": 1,
                "down": 0,
                "in_flight": 1,
                "warming": 0,
                "at_limit": 0,
                "stats": {
                    // 500 calls, the pick that judged the interval, the one held.
                    "picks": 502,
                    "over_cap": 0,
                    "over_cap_successes": 0,
                    "over_cap_failures": 0,
                    "no_endpoint": 0,
                    "overloaded": 0,
                    "outliers_detected": 1,
                    "ejected_success_rate": 0,
                    "ejected_failure_percentage": 1,
                    "ejected_hung": 0,
                    "retries": 0,
                    "retries_budget_denied": 0,
                    "retries_exhausted": 0,
                    "retries_throttled": 0,
                    "hedges": 0,
                    "hedges_won": 0,
                    "hedges_cancelled": 0,
                    "hedges_budget_denied": 0,
                    "limited": 0,
                    "limit_skips": 0
                }
            },
            {
                "name": "stuck",
                "endpoints": 2,
                "isolated": 2,
                "ejected": 2,
                "down": 2,
                "in_flight": 2,
                "warming": 0,
                "at_limit": 0,
                "stats": {
                    "picks": 2,
                    "over_cap": 0,
                    "over_cap_successes": 0,
                    "over_cap_failures": 0,
                    "no_endpoint": 1,
                    "overloaded": 0,
                    "outliers_detected": 0,
                    "ejected_success_rate": 0,
                    "ejected_failure_percentage": 0,
                    "ejected_hung": 2,
                    "retries": 0,
                    "retries_budget_denied": 0,
                    "retries_exhausted": 0,
                    "retries_throttled": 0,
                    "hedges": 0,
                    "hedges_won": 0,
                    "hedges_cancelled": 0,
                    "hedges_budget_denied": 0,
                    "limited": 0,
                    "limit_skips": 0
                }
            }
        ])
    );
    // The ejected endpoint's row: its pool, its ejection with the reason.
    let breakers = get(&server, "/breakers").json();
    let ejected = entry(&breakers, "2");
    assert_eq!(
        (&ejected["pool"], &ejected["state"]),
        (&"edge".into(), &"open".into())
    );
    assert_eq!(
        ejected["history"][0]["origin"],
        serde_json::json!({ "ejected": "failure_percentage" })
    );
    assert_eq!(
        entry(&breakers, "11")["history"][0]["origin"],
        serde_json::json!({ "ejected": "hung" })
    );
    // The metrics say the same.
    let metrics = get(&server, "/metrics").body;
    for line in [
        r#"circuit_breaker_pool_ejected{pool="edge"} 1"#,
        r#"circuit_breaker_pool_down{pool="stuck"} 2"#,
        r#"circuit_breaker_pool_ejections_total{pool="edge",reason="failure_percentage"} 1"#,
        r#"circuit_breaker_pool_ejections_total{pool="stuck",reason="hung"} 2"#,
        r#"circuit_breaker_pool_outliers_detected_total{pool="edge"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    // The filter keeps breakers by name; the pools' rows stay.
    let filtered = get(&server, "/?filter=no-such-breaker").body;
    assert!(!filtered.contains("data-name=\"2\" data-state="));
    assert_eq!(pool_cell(&filtered, "edge", "ejected"), "1");
    // Read at each request: the held pick comes back.
    held.success();
    assert_eq!(pool_cell(&get(&server, "/").body, "edge", "in flight"), "0");
    assert_eq!(get(&server, "/pools").json()[0]["in_flight"], 0);
    drop(hanging);
}

/// A pool with an adaptive concurrency limit: its endpoints at their limit, the picks it
/// answered `Limited`, and those its limits turned elsewhere, on the page and in the JSON.
#[test]
fn a_pools_limit_shows_on_the_page_and_in_the_json() {
    let pool = Arc::new(
        Pool::new(|_: &u32| Breaker::builder())
            .clock(ManualClock::new())
            .named("bounded")
            .limit(lazybreaker::limit::Fixed::new(1)),
    );
    pool.set([1, 2]);
    let held: Vec<_> = (0..2).map(|_| pool.pick().unwrap()).collect();
    assert_eq!(pool.pick().unwrap_err(), lazybreaker::Rejected::Limited);
    let skipped = pool.stats().limit_skips;
    assert!(
        skipped >= 2,
        "both endpoints' limits turned it away: {skipped}"
    );
    let server = serve(Dashboard::new().pool(Arc::clone(&pool)).router());
    let html = get(&server, "/").body;
    assert_eq!(
        pool_cell(&html, "bounded", "limit"),
        format!("2 at their limit · 1 limited · {skipped} skipped")
    );
    let pools = get(&server, "/pools").json();
    assert_eq!(pools[0]["at_limit"], 2);
    assert_eq!(pools[0]["stats"]["limited"], 1);
    assert_eq!(pools[0]["stats"]["limit_skips"], skipped);
    drop(held);
}

/// A pool's name is untrusted text: escaped on the page (its row, its endpoints' rows), kept
/// verbatim in the JSON; the page's own script stays the only one.
#[test]
fn a_pool_name_with_markup_is_escaped_on_the_page() {
    let pool = Arc::new(
        Pool::new(|_: &u32| Breaker::builder())
            .clock(ManualClock::new())
            .named(HOSTILE),
    );
    pool.set([1, 2]);
    let server = serve(Dashboard::new().pool(Arc::clone(&pool)).router());
    let html = get(&server, "/").body;
    let escaped =
        "&lt;b&gt;&quot;tom &amp; jerry&quot;\n&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;";
    assert!(html.contains(&format!(
        "<tr class=\"pool\" data-pool=\"{escaped}\"><td class=\"name\" data-label=\"pool\"><bdi>{escaped}</bdi></td>"
    )));
    assert_eq!(pool_cell(&html, escaped, "nodes"), "2");
    assert!(html.contains(&format!(" <small>pool <bdi>{escaped}</bdi></small>")));
    assert!(!html.contains("<b>\"tom"));
    assert_eq!(html.matches("<script>").count(), 1);
    assert_eq!(html.matches("</script>").count(), 1);
    let pools = get(&server, "/pools").json();
    assert_eq!(pools[0]["name"], HOSTILE);
    assert_eq!(pools[0]["endpoints"], 2);
}

/// A pool whose clock panics costs that pool its figures, not the page: its row says so,
/// its JSON object is `unreadable`, the other pool's figures and the metrics are served; mended,
/// it is read again.
#[test]
fn a_pool_whose_clock_panics_costs_its_own_figures_only() {
    let history = Arc::new(History::new(64));
    let (edge, _clock) = ejecting_pool("edge", &history);
    let armed = Arc::new(AtomicBool::new(false));
    let flaky = Arc::new(
        Pool::new(|_: &u32| Breaker::builder())
            .clock(Flaky {
                armed: Arc::clone(&armed),
                clock: ManualClock::new(),
            })
            .named("flaky"),
    );
    flaky.set([7, 8]);
    let server = serve(
        Dashboard::new()
            .pool(Arc::clone(&flaky))
            .pool(Arc::clone(&edge))
            .router(),
    );
    armed.store(true, Ordering::SeqCst);

    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    assert_eq!(
        pool_cell(&page.body, "flaky", "figures"),
        "unreadable (its clock panicked)"
    );
    assert_eq!(pool_cell(&page.body, "edge", "ejected"), "1");
    assert!(
        page.body.contains("2 unreadable"),
        "its endpoints' breakers"
    );
    let pools = get(&server, "/pools");
    assert_eq!(pools.status, 200);
    let pools = pools.json();
    assert_eq!(
        pools[0],
        serde_json::json!({ "name": "flaky", "unreadable": true })
    );
    assert_eq!(pools[1]["ejected"], 1);
    let metrics = get(&server, "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .body
        .contains(r#"circuit_breaker_pool_ejected{pool="edge"} 1"#));

    armed.store(false, Ordering::SeqCst);
    assert_eq!(pool_cell(&get(&server, "/").body, "flaky", "nodes"), "2");
    let pools = get(&server, "/pools").json();
    assert_eq!(pools[0]["endpoints"], 2);
    assert!(pools[0].get("unreadable").is_none());
}

/// The Chromium to run: `LAZYBREAKER_CHROMIUM` (which `bash .ci/test` sets), or `chromium`.
fn chromium() -> String {
    std::env::var("LAZYBREAKER_CHROMIUM").unwrap_or_else(|_| "chromium".into())
}

/// Runs headless Chromium on `args` and what it prints (bounded: 90 s).
fn browse(args: &[&str]) -> String {
    let profile = std::env::temp_dir().join(format!(
        "lazybreaker-chromium-{}-{}",
        std::process::id(),
        PROFILES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {:?} ({e}): install Debian's chromium, or run `bash .ci/test`",
                chromium()
            )
        });
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium failed: {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().unwrap()
}

static PROFILES: AtomicUsize = AtomicUsize::new(0);

#[test]
fn in_a_real_browser_the_script_refreshes_the_board_in_place() {
    let f = fleet();
    let late = Arc::clone(&f.closed);
    let (edge, _clock) = ejecting_pool("edge", &f.history);
    let late_endpoint = edge.breaker(&0).unwrap();
    let pages = Arc::new(AtomicUsize::new(0));
    let served = Arc::clone(&pages);
    // After the first page went out, `inventory` trips, and so does the pool's endpoint 0
    // (one more isolated): only the script's refresh can show it.
    let router = dashboard(&f)
        .pool(Arc::clone(&edge))
        .controls("t0ken")
        .router()
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let (late, late_endpoint, served) = (
                    Arc::clone(&late),
                    Arc::clone(&late_endpoint),
                    Arc::clone(&served),
                );
                async move {
                    let first =
                        req.uri().path() == "/" && served.fetch_add(1, Ordering::SeqCst) == 0;
                    let response = next.run(req).await;
                    if first {
                        late.trip_for(Duration::from_secs(45));
                        late_endpoint.trip_for(Duration::from_secs(45));
                    }
                    response
                }
            },
        ));
    let server = serve(router);
    let url = format!("http://{}/", server.addr);
    let dom = browse(&["--virtual-time-budget=5000", "--dump-dom", &url]);
    assert!(
        pages.load(Ordering::SeqCst) >= 2,
        "the script never fetched the page again"
    );

    let body = dom.split("<body").nth(1).expect("a body");
    let refreshed: u32 = body
        .split("data-refreshed=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the script did not mark a refresh: {dom}"));
    assert!(refreshed >= 1);
    assert!(dom.contains("live, updated"), "{dom}");
    // The rows as the refreshed board has them: inventory tripped after the first render.
    for (name, state, forced) in [
        ("inventory", "open", "none"),
        ("payments", "open", "none"),
        ("search", "half-open", "none"),
        ("ledger", "open", "open"),
        ("api.example.com", "closed", "none"),
    ] {
        let row = format!(r#"data-name="{name}" data-state="{state}" data-forced="{forced}""#);
        assert!(dom.contains(&row), "{row} not in the DOM: {dom}");
    }
    // The hostile name is text in the DOM, never markup: no script of its own ran.
    assert!(dom.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!dom.contains("<script>alert(1)</script>"));
    // The controls' buttons, the recent changes with the late trip (manual, by trip_for).
    assert!(dom.contains(r#"data-action="force_open" data-name="inventory""#));
    assert!(
        dom.contains(r#"data-name="inventory" data-origin="manual""#),
        "{dom}"
    );
    // The pool's row, refreshed: endpoint 0 tripped after the first render, endpoint 2 is
    // still ejected; the ejection in the recent changes, with its reason.
    for (label, value) in [
        ("nodes", "5"),
        ("isolated", "2"),
        ("ejected", "1"),
        ("down", "0"),
        ("outliers detected", "1"),
        (
            "ejections",
            "0 success rate · 1 failure percentage · 0 hung",
        ),
    ] {
        assert_eq!(pool_cell(&dom, "edge", label), value, "{label}: {dom}");
    }
    assert!(
        dom.contains("ejected by the pool: failure percentage"),
        "{dom}"
    );

    // A screenshot of the desktop and the phone layouts, to look at (docs/dashboard.png is
    // the example's: `--example dashboard -- --screenshot docs/dashboard.png`).
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (file, size) in [
        ("dashboard.png", "1280,820"),
        ("dashboard-phone.png", "390,844"),
    ] {
        let shot = std::env::var("LAZYBREAKER_SCREENSHOT_DIR")
            .map(|d| std::path::PathBuf::from(d).join(file))
            .unwrap_or_else(|_| dir.join(file));
        let _ = std::fs::remove_file(&shot);
        browse(&[
            "--virtual-time-budget=3000",
            &format!("--window-size={size}"),
            &format!("--screenshot={}", shot.display()),
            &url,
        ]);
        let png = std::fs::read(&shot).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{}", shot.display());
        println!("screenshot: {}", shot.display());
    }
}

/// What the page's first answer gets before `</body>`: a user's clicks, once the page loaded,
/// typing the token and pressing `inventory`'s "force open" (the page's own script sends it).
const CLICKS: &str = r#"<script>addEventListener("load", function () {
  var token = document.getElementById("token");
  token.value = "t0ken";
  token.dispatchEvent(new Event("change"));
  document.querySelector('button[data-action="force_open"][data-name="inventory"]').click();
});</script>"#;

/// Mounted at `/status`, in a real browser, opened at `/status` and at `/status/`: the
/// script's refresh and its controls go to the routes under the prefix, nothing outside it,
/// and a control pressed on the page takes effect and shows.
#[test]
fn in_a_real_browser_under_a_prefix_the_refresh_and_the_controls_stay_under_it() {
    for opened in ["/status", "/status/"] {
        let f = fleet();
        let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, String, u16)>::new()));
        let log = Arc::clone(&seen);
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "the application" }))
            .merge(dashboard(&f).controls("t0ken").router_at("/status"))
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let log = Arc::clone(&log);
                    async move {
                        let (method, path) =
                            (req.method().to_string(), req.uri().path().to_owned());
                        let response = next.run(req).await;
                        let status = response.status().as_u16();
                        let first = {
                            let mut log = log.lock().unwrap();
                            log.push((method.clone(), path, status));
                            log.len() == 1
                        };
                        if !first {
                            return response;
                        }
                        let (mut parts, body) = response.into_parts();
                        let html = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                        let html = String::from_utf8(html.to_vec()).unwrap();
                        assert!(html.contains("</body>"), "{html}");
                        let html = html.replace("</body>", &format!("{CLICKS}</body>"));
                        parts.headers.remove(http::header::CONTENT_LENGTH);
                        axum::response::Response::from_parts(parts, axum::body::Body::from(html))
                    }
                },
            ));
        let server = serve(app);
        let dom = browse(&[
            "--virtual-time-budget=5000",
            "--dump-dom",
            &format!("http://{}{opened}", server.addr),
        ]);

        // The press took effect, through the route under the prefix, with the token.
        assert_eq!(f.closed.forced(), Some(Forced::Open), "{opened}: {dom}");
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.contains(&(
                "POST".into(),
                "/status/breakers/inventory/force_open".into(),
                200
            )),
            "{opened}: {seen:?}"
        );
        // The script refreshed the page it was opened at, and asked nothing outside the
        // prefix (not the application's `/`, not a root `/breakers`).
        let pages = seen
            .iter()
            .filter(|(method, path, status)| method == "GET" && path == opened && *status == 200)
            .count();
        assert!(pages >= 2, "{opened}: no refresh: {seen:?}");
        for (method, path, status) in &seen {
            assert!(
                path == "/status" || path.starts_with("/status/"),
                "{opened}: {method} {path} outside the prefix"
            );
            assert_eq!(*status, 200, "{opened}: {method} {path}");
        }
        // The page says so, still after the refresh that followed (its answer beside
        // "live, updated"), and its refreshed board shows the forced breaker.
        let status = dom
            .split(r#"id="status">"#)
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .unwrap_or_else(|| panic!("{opened}: no status line: {dom}"));
        assert!(status.starts_with("live, updated "), "{opened}: {status}");
        assert!(
            status.ends_with(" \u{b7} \u{2068}inventory\u{2069}: force open done"),
            "{opened}: {status}"
        );
        assert!(
            dom.contains(r#"data-name="inventory" data-state="open" data-forced="open""#),
            "{opened}: {dom}"
        );
    }
}

/// A refresh period longer than a browser's timer holds (2³¹ − 1 ms) is held at it: the
/// page never gets a delay that wraps and fires at once, again and again.
#[test]
fn item_7_a_refresh_longer_than_a_browser_timer_is_held_at_its_longest() {
    let f = fleet();
    for (every, expected) in [
        (std::time::Duration::MAX, "2147483647"),
        (std::time::Duration::from_secs(30 * 86_400), "2147483647"),
        (
            std::time::Duration::from_millis(2_147_483_647),
            "2147483647",
        ),
        (std::time::Duration::from_secs(2), "2000"),
        (std::time::Duration::ZERO, "0"),
    ] {
        let server = serve(dashboard(&f).refresh(every).router());
        let page = get(&server, "/");
        assert_eq!(page.status, 200);
        let attr = format!("data-refresh-ms=\"{expected}\"");
        assert!(page.body.contains(&attr), "{every:?}: no {attr}");
    }
}

/// A name with a bidi override (`"\u{202E}stnemyap"` renders as "payments") is isolated
/// wherever the page shows it as text, so it cannot pose as another breaker or reverse the
/// text around it; the script isolates the names it writes too.
#[test]
fn item_8_names_are_isolated_from_the_text_around_them() {
    let f = fleet();
    let spoof = Arc::new(Breaker::builder().name("\u{202E}stnemyap").build());
    spoof.force_open(); // a change, so the name is in the recent changes too
    let history_board = dashboard(&f).breaker(Arc::clone(&spoof));
    let server = serve(history_board.router());
    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    let html = &page.body;
    let isolated = "<bdi>\u{202E}stnemyap</bdi>";
    assert!(html.contains(isolated), "the row's name is not isolated");
    // Every occurrence as text is inside an isolate; the others are attribute values.
    let as_text = html.matches(">\u{202E}stnemyap").count();
    let in_bdi = html.matches(isolated).count();
    assert_eq!(as_text, in_bdi, "a name shown outside <bdi>");
    assert!(
        html.contains("\\u2068"),
        "the script isolates the names it writes"
    );
}

/// Two breakers with one name (a registry's key beside a breaker given by hand): a control
/// on that name is refused with 409 and changes neither, where it used to act on the first
/// and answer 200 while the other, forced open, stayed so.
#[test]
fn item_5_a_control_on_a_name_two_breakers_share_is_refused_and_changes_neither() {
    let f = fleet();
    let real = Arc::new(Breaker::builder().name("payments").build());
    real.force_open();
    // The registry gets a key named like it (keys often come from traffic).
    let twin = f.hosts.breaker("payments");
    let server = serve(
        Dashboard::new()
            .registry(Arc::clone(&f.hosts))
            .breaker(Arc::clone(&real))
            .controls("t0ken")
            .router(),
    );
    let release = request(
        &server,
        "POST",
        "/breakers/payments/release",
        &[("authorization", "Bearer t0ken")],
    );
    assert_eq!(release.status, 409, "{}", release.body);
    assert_eq!(real.forced(), Some(lazybreaker::Forced::Open), "unchanged");
    assert_eq!(twin.forced(), None, "unchanged");
    // A name one breaker has is controlled as before.
    let other = request(
        &server,
        "POST",
        "/breakers/payments-2/release",
        &[("authorization", "Bearer t0ken")],
    );
    assert_eq!(other.status, 404);
}

/// Item 5, the page's half: two breakers with one name are both shown, each flagged with how
/// many share it and without controls (which refuse the name); the JSON lists both with
/// `name_shared_by`. One breaker given twice (by hand and in a registry) is one row. Before,
/// the page showed the first only: the real, forced-open `payments` was invisible.
#[test]
fn item_5_two_breakers_with_one_name_are_both_shown_and_flagged() {
    let f = fleet();
    let real = Arc::new(Breaker::builder().name("billing").build());
    real.force_open();
    let twin = f.hosts.breaker("billing");
    assert_eq!(twin.forced(), None);
    let server = serve(
        Dashboard::new()
            .registry(Arc::clone(&f.hosts))
            .breaker(Arc::clone(&real))
            // The same breaker twice: one row, and its controls work.
            .breaker(Arc::clone(&f.closed))
            .breaker(Arc::clone(&f.closed))
            .controls("t0ken")
            .router(),
    );
    let json = get(&server, "/breakers");
    let all: serde_json::Value = serde_json::from_str(&json.body).expect("JSON");
    let named = |name: &str| -> Vec<serde_json::Value> {
        all.as_array()
            .expect("a list")
            .iter()
            .filter(|b| b["name"] == name)
            .cloned()
            .collect()
    };
    let billing = named("billing");
    assert_eq!(billing.len(), 2, "both listed: {billing:?}");
    assert!(
        billing.iter().all(|b| b["name_shared_by"] == 2),
        "{billing:?}"
    );
    let forced: Vec<_> = billing.iter().map(|b| b["forced"].clone()).collect();
    assert!(forced.contains(&serde_json::json!("open")), "{forced:?}");
    let inventory = named("inventory");
    assert_eq!(inventory.len(), 1, "one breaker given twice is one row");
    assert!(inventory[0].get("name_shared_by").is_none());

    let page = get(&server, "/");
    let rows = page
        .body
        .matches("data-name=\"billing\" data-state=")
        .count();
    assert_eq!(rows, 2, "both rows on the page");
    assert_eq!(
        page.body
            .matches("2 breakers share this name: controls refused")
            .count(),
        2
    );
    assert!(
        !page
            .body
            .contains("data-action=\"release\" data-name=\"billing\""),
        "no control offered on a shared name"
    );
    assert!(page
        .body
        .contains("data-action=\"release\" data-name=\"inventory\""));
    let release = request(
        &server,
        "POST",
        "/breakers/inventory/release",
        &[("authorization", "Bearer t0ken")],
    );
    assert_eq!(release.status, 200, "{}", release.body);
}

/// A health check the test settles: pending until given a verdict.
#[derive(Clone, Default)]
struct Settled(Arc<std::sync::Mutex<Option<bool>>>);

impl Settled {
    fn run(&self) -> impl std::future::Future<Output = bool> + Send + 'static {
        let verdict = Arc::clone(&self.0);
        std::future::poll_fn(move |_| match *verdict.lock().unwrap() {
            Some(v) => std::task::Poll::Ready(v),
            None => std::task::Poll::Pending,
        })
    }

    fn set(&self, verdict: Option<bool>) {
        *self.0.lock().unwrap() = verdict;
    }
}

fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> std::task::Poll<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    std::pin::Pin::new(f).poll(&mut cx)
}

/// One story on the page: while a health-checked breaker waits for its check, the badge,
/// the wait, the JSON, the metrics and the bar all say "check due" or "checking" (never
/// "retry after 0s", nor a bar ending half-open); failed checks re-arm the open period
/// without counting as openings, and are folded into one line of the recent changes, so the
/// trip and its reason stay in view.
#[test]
fn one_story_a_checked_breaker_reads_the_same_on_the_badge_json_metrics_and_bar() {
    let clock = ManualClock::new();
    let history = Arc::new(History::new(8));
    let check = Settled::default();
    let c = check.clone();
    let breaker = Arc::new(
        Breaker::builder()
            .name("ledger")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(30))
            .clock(clock.clone())
            .observer(Arc::clone(&history))
            .health_check(move || c.run())
            .build(),
    );
    let server = serve(Dashboard::new().breaker(Arc::clone(&breaker)).router());
    let metric = |name: &str| -> f64 {
        let text = get(&server, "/metrics").body;
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{breaker=\"ledger\"}}")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    // What the last stretch of the bar says (its <title>).
    let bar_end = |page: &str| -> String {
        let row = &page[page.find("data-name=\"ledger\"").unwrap()..];
        let svg = &row[..row.find("</svg>").unwrap()];
        let last = &svg[svg.rfind("<rect").unwrap()..];
        let class = &last[last.find("class=\"").unwrap() + 7..];
        let class = &class[..class.find('"').unwrap()];
        let title = &last[last.find("<title>").unwrap() + 7..last.find("</title>").unwrap()];
        format!("{class}: {title}")
    };
    let _ = breaker.execute(|| Err::<(), _>("down"));
    clock.advance(Duration::from_millis(30_001));

    let page = get(&server, "/").body;
    assert!(page.contains(">open · check due</span>"), "the badge");
    assert!(
        page.contains("data-label=\"retry after\">check due</td>"),
        "the wait"
    );
    assert!(
        bar_end(&page).starts_with("check: check due for"),
        "{}",
        bar_end(&page)
    );
    let json = get(&server, "/breakers").json();
    let ledger = entry(&json, "ledger");
    assert_eq!(
        (&ledger["state"], &ledger["check"]),
        (&"open".into(), &"due".into())
    );
    assert!(ledger["retry_after"].is_null(), "{ledger}");
    assert_eq!(metric("circuit_breaker_health_check_status"), 1.0);
    assert_eq!(metric("circuit_breaker_retry_after_seconds"), 0.0);

    // A call runs the check (pending): "checking" everywhere.
    let ok = || std::future::ready(Ok::<_, ()>(()));
    let mut call = Box::pin(breaker.execute_async(ok));
    assert!(poll_once(&mut call).is_pending());
    let page = get(&server, "/").body;
    assert!(page.contains(">open · checking</span>"));
    assert!(page.contains("data-label=\"retry after\">checking</td>"));
    assert!(
        bar_end(&page).starts_with("check: checking for"),
        "{}",
        bar_end(&page)
    );
    assert_eq!(
        entry(&get(&server, "/breakers").json(), "ledger")["check"],
        "running"
    );
    assert_eq!(metric("circuit_breaker_health_check_status"), 2.0);

    // Three checks fail, one per open period.
    for _ in 0..3 {
        check.set(Some(false));
        assert!(poll_once(&mut call).is_ready());
        check.set(None);
        clock.advance(Duration::from_millis(30_001));
        call = Box::pin(breaker.execute_async(ok));
        assert!(poll_once(&mut call).is_pending());
    }
    drop(call);
    let page = get(&server, "/").body;
    let recent = &page[page.find("<ol id=\"recent\">").unwrap()..];
    let lines: Vec<&str> = recent.split("<li").skip(1).collect();
    assert_eq!(
        lines.len(),
        2,
        "the trip and one line of failed checks:\n{recent}"
    );
    assert!(
        lines[0].contains("stays open: 3 checks failed since"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("closed → open"), "{}", lines[1]);
    assert!(
        lines[1].contains("on 1 failed of 1 calls"),
        "the reason stays: {}",
        lines[1]
    );
    assert!(
        page.contains("data-label=\"opened\">1 · 3 checks failed</td>"),
        "one opening, the checks apart"
    );
    let s = breaker.snapshot();
    assert_eq!((s.times_opened, s.totals.health_checks_failed), (1, 3));
    assert_eq!(metric("circuit_breaker_opened_total"), 1.0);
}

/// A throttled breaker's row says how many calls its throttle turned away and the
/// probability the next one meets; its JSON has both; a breaker without one says neither.
#[test]
fn a_throttled_breakers_row_and_json_say_what_its_throttle_did() {
    let throttled = Arc::new(
        Breaker::builder()
            .name("orders")
            .never_trips(true)
            .throttle(
                lazybreaker::throttle::Throttle::new(2.0)
                    .unwrap()
                    .min_requests(4)
                    .max_probability(0.5),
            )
            .clock(ManualClock::new())
            .build(),
    );
    let mut turned_away = 0;
    for _ in 0..100 {
        match throttled.allow() {
            Ok(permit) => permit.failure(),
            Err(_) => turned_away += 1,
        }
    }
    assert!(turned_away > 0);
    let plain = Arc::new(Breaker::builder().name("plain").build());
    let server = serve(
        Dashboard::new()
            .breaker(Arc::clone(&throttled))
            .breaker(Arc::clone(&plain))
            .router(),
    );
    let html = get(&server, "/").body;
    assert!(
        html.contains(&format!(" · {turned_away} throttled (p = 0.50)")),
        "{html}"
    );
    assert_eq!(
        html.matches(" throttled (p = ").count(),
        1,
        "the plain one says nothing"
    );
    let all: serde_json::Value = serde_json::from_str(&get(&server, "/breakers").body).unwrap();
    let orders = entry(&all, "orders");
    assert_eq!(orders["throttle_probability"], 0.5);
    assert_eq!(orders["totals"]["rejected_throttled"], turned_away);
    assert!(entry(&all, "plain").get("throttle_probability").is_none());
}
