//! Three real OS processes share one breaker through a real `redis-server`: a
//! trip in one is seen by the other two within the sync interval of their next call.
//!
//! This test binary is its own fleet: run plainly, it starts a server on a loopback port of
//! its own and three copies of itself as the members (`LAZYBREAKER_FLEET_MEMBER` set), reads
//! what each prints, and checks it; every member exits by itself within a few seconds, and
//! is killed if it has not. The members run on the real clock, as real processes do: the
//! waits are short and bounded.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use lazybreaker::observe::{Observer, Transition};
use lazybreaker::{Breaker, Error, State};
use lazybreaker_fleet::redis::SharedBreaker;
use lazybreaker_fleet::FleetStore;

mod redis_server;
use redis_server::Server;

const SYNC: Duration = Duration::from_millis(50);
const OPEN: Duration = Duration::from_secs(5);
const MEMBERS: usize = 3;

fn main() {
    match std::env::var("LAZYBREAKER_FLEET_MEMBER") {
        Ok(index) => member(index.parse().unwrap(), &std::env::var("REDIS_URL").unwrap()),
        Err(_) => {
            a_trip_in_one_process_is_seen_by_the_others_within_the_sync_interval();
            println!(
                "test a_trip_in_one_process_is_seen_by_the_others_within_the_sync_interval ... ok"
            );
        }
    }
}

/// Counts the transitions adopted from the fleet.
#[derive(Default)]
struct FleetChanges(AtomicU32);

impl Observer for FleetChanges {
    fn on_transition(&self, t: &Transition<'_>) {
        if t.origin == lazybreaker::observe::Origin::Adopted && t.to == State::Open {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One member: member 0 trips the shared breaker once the others run; the others call a
/// healthy dependency every 5 ms until the fleet stops them, then print how long after the
/// trip (in the server's time) that was.
fn member(index: usize, url: &str) {
    redis_server::run(async {
        let client = redis::Client::open(url).unwrap();
        let changes = Arc::new(FleetChanges::default());
        let shared = SharedBreaker::builder(client.clone())
            .sync_interval(SYNC)
            .store_timeout(Duration::from_millis(500))
            .build(
                Breaker::builder()
                    .name("processes")
                    .ready_to_trip(|c| c.consecutive_failures >= 1)
                    .timeout(OPEN)
                    .observer(Arc::clone(&changes)),
            )
            .unwrap();
        let store = redis_server::store(&client).await;
        shared.sync().await;
        println!("ready");
        let started = Instant::now();
        if index == 0 {
            // The others run: the test says so on stdin.
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            assert_eq!(go.trim(), "go");
            let r = shared.execute(|| async { Err::<(), _>("down") }).await;
            assert!(matches!(r, Err(Error::Inner("down"))));
            println!("published={}", shared.stats().published);
            return;
        }
        let mut admitted_after_trip = 0u32;
        while started.elapsed() < Duration::from_secs(8) {
            let r = shared.execute(|| async { Ok::<_, ()>(()) }).await;
            let record = store.read("processes", Duration::ZERO).await.unwrap();
            let trip_at = record
                .open_until_us
                .map(|until| until - OPEN.as_micros() as u64);
            match (r, trip_at) {
                (Ok(()), Some(_)) => admitted_after_trip += 1,
                (Ok(()), None) => {}
                (Err(e), Some(trip_at)) => {
                    assert!(e.is_rejected(), "{e:?}");
                    let lag_ms = (record.server_now_us - trip_at) / 1_000;
                    println!("lag_ms={lag_ms}");
                    println!("admitted_after_trip={admitted_after_trip}");
                    println!("fleet_changes={}", changes.0.load(Ordering::Relaxed));
                    return;
                }
                (Err(e), None) => panic!("rejected before any trip: {e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never stopped by the fleet");
    });
}

/// The members, killed on drop if still running.
struct Members(Vec<Child>);

impl Drop for Members {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn a_trip_in_one_process_is_seen_by_the_others_within_the_sync_interval() {
    let server = Server::start();
    let exe = std::env::current_exe().unwrap();
    let mut members = Members(Vec::new());
    for index in 0..MEMBERS {
        let child = Command::new(&exe)
            .env("LAZYBREAKER_FLEET_MEMBER", index.to_string())
            .env("REDIS_URL", server.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        members.0.push(child);
    }
    // Bounded: each member exits within about 8 s. Their output is read on threads, and
    // waited for with a deadline: past 30 s the test fails, and the drop kills them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    for (i, child) in members.0.iter_mut().enumerate() {
        let stdout = child.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((i, Some(line))).is_err() {
                    return;
                }
            }
            let _ = tx.send((i, None)); // end of output
        });
    }
    drop(tx);
    let next = || {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left)
            .expect("the members answer within 30 s")
    };
    let mut outputs = vec![Vec::<String>::new(); MEMBERS];
    let mut ended = 0;
    while outputs.iter().any(Vec::is_empty) {
        match next() {
            (i, Some(line)) => outputs[i].push(line),
            (i, None) => panic!("member {i} stopped before it was ready"),
        }
    }
    assert!(
        outputs.iter().all(|lines| lines[0] == "ready"),
        "{outputs:?}"
    );
    // Every member has synced and member 1 and 2 are calling: member 0 trips now.
    let mut stdin = members.0[0].stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    drop(stdin);
    while ended < MEMBERS {
        match next() {
            (i, Some(line)) => outputs[i].push(line),
            (_, None) => ended += 1,
        }
    }
    for (child, lines) in members.0.iter_mut().zip(&outputs) {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "a member did not stop");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "a member failed: {lines:?}");
    }
    let value = |lines: &[String], key: &str| -> u64 {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {lines:?}"))
            .parse()
            .unwrap()
    };
    assert_eq!(
        value(&outputs[0], "published"),
        1,
        "member 0 published its trip"
    );
    for lines in &outputs[1..] {
        // Its next call after the sync interval is rejected: a call every 5 ms, so within
        // the interval plus one call period, plus slack for two cores running three
        // processes and a server (and the read that measured it).
        let lag = value(lines, "lag_ms");
        println!("a member stopped sending {lag} ms after the trip (server time)");
        assert!(lag <= 50 + 5 + 250, "seen {lag} ms after the trip");
        assert!(value(lines, "admitted_after_trip") <= 20, "{lines:?}");
        assert_eq!(
            value(lines, "fleet_changes"),
            1,
            "delivered as from the fleet"
        );
    }
}
