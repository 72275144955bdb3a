//! A half-open probe that hangs while it holds the fleet's probe lease: one story for the
//! local breaker's takeover (`probe_timeout`) and the fleet's lease (`lease_for`). While the
//! lease is held the fleet has not written the probe off, so the local breaker does not take
//! it over either, and the calls turned away meanwhile cost no store round trip; once the
//! lease expires, the next call takes the probe over and leases the slot itself. What the
//! local breaker drops, the fleet does not count.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker_test_support::run;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_fleet::{MemoryStore, SharedBreaker};

const OPEN: Duration = Duration::from_millis(500);
const LEASE: Duration = Duration::from_secs(10);

type Member = SharedBreaker<MemoryStore, ConsecutiveFailures>;

fn member(store: &MemoryStore, clock: &ManualClock, probe_timeout: Option<Duration>) -> Member {
    let mut breaker = Breaker::builder()
        .name("svc")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN)
        .clock(clock.clone());
    if let Some(d) = probe_timeout {
        breaker = breaker.probe_timeout(d);
    }
    SharedBreaker::builder(store.clone())
        .sync_interval(Duration::from_millis(10))
        .lease_for(LEASE)
        .build(breaker)
        .unwrap()
}

/// A call through `member` that waits (admitted, leased) until the sender lets it succeed.
async fn held_call(
    member: &Arc<Member>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), Error<()>>>,
) {
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let call = Arc::clone(member);
    let held = tokio::spawn(async move {
        call.execute(|| async move {
            let _ = released.await;
            Ok::<_, ()>(())
        })
        .await
    });
    for _ in 0..4 {
        tokio::task::yield_now().await; // admitted, leased, waiting
    }
    (release, held)
}

/// Two members; `a` trips the fleet, and its half-open probe hangs (holding the fleet's
/// lease) until the returned sender lets it succeed.
async fn hung_probe(
    probe_timeout: Option<Duration>,
) -> (
    Arc<Member>,
    Member,
    ManualClock,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), Error<()>>>,
) {
    let clock = ManualClock::new();
    let store = MemoryStore::new();
    let a = Arc::new(member(&store, &clock, probe_timeout));
    let b = member(&store, &clock, probe_timeout);
    b.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
    let _ = a.execute(|| async { Err::<(), _>(()) }).await;
    assert_eq!(a.state(), State::Open);
    clock.advance(OPEN + Duration::from_millis(100));
    let (release, hung) = held_call(&a).await;
    assert_eq!(a.breaker().totals().admitted, 2, "the probe is out");
    (a, b, clock, release, hung)
}

fn one_story(probe_timeout: Option<Duration>) {
    run(async {
        let (a, b, clock, release, hung) = hung_probe(probe_timeout).await;
        // Past the probe timeout (the open period's, or the one given), within the lease.
        clock.advance(Duration::from_millis(1_200));
        let got = a.execute(|| async { Ok::<_, ()>(()) }).await;
        assert!(
            matches!(got, Err(Error::Rejected(Rejected::TooManyRequests))),
            "{got:?}"
        );
        let trips = a.stats().round_trips;
        for _ in 0..100 {
            let got = a.execute(|| async { Ok::<_, ()>(()) }).await;
            assert!(matches!(
                got,
                Err(Error::Rejected(Rejected::TooManyRequests))
            ));
        }
        assert_eq!(
            a.stats().round_trips,
            trips,
            "a rejection while the fleet's slot is held costs no store round trip"
        );
        let t = a.breaker().totals();
        assert_eq!(
            t.probes_taken_over, 0,
            "no local takeover while the fleet holds the lease"
        );
        assert_eq!(t.rejected_half_open, 101, "{t:?}");
        // The probe answers at last: counted here, so counted by the fleet.
        release.send(()).unwrap();
        hung.await.unwrap().unwrap();
        let t = a.breaker().totals();
        assert_eq!((t.successes, t.dropped), (1, 0), "{t:?}");
        assert_eq!(a.state(), State::Closed);
        clock.advance(Duration::from_millis(20));
        b.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
        assert_eq!(b.state(), State::Closed, "the fleet closed on it");
    });
}

#[test]
fn with_the_default_probe_timeout_a_held_lease_keeps_the_probe() {
    one_story(None);
}

#[test]
fn with_a_probe_timeout_given_a_held_lease_keeps_the_probe() {
    one_story(Some(Duration::from_secs(1)));
}

/// Past the lease, the fleet has written the probe off: the local breaker takes it over and
/// its call leases the slot; the old probe's late success, dropped by the local breaker (a
/// probe timeout given), does not count for the fleet either.
#[test]
fn past_the_lease_the_takeover_leases_the_slot_and_a_dropped_result_counts_nowhere() {
    run(async {
        let (a, b, clock, release, hung) = hung_probe(Some(Duration::from_secs(1))).await;
        clock.advance(LEASE + Duration::from_millis(1));
        let (release_second, second) = held_call(&a).await;
        assert_eq!(a.breaker().totals().probes_taken_over, 1);
        release.send(()).unwrap();
        hung.await.unwrap().unwrap();
        let t = a.breaker().totals();
        assert_eq!((t.successes, t.dropped), (0, 1), "{t:?}");
        assert_eq!(
            a.state(),
            State::HalfOpen,
            "the dropped success closed nothing"
        );
        clock.advance(Duration::from_millis(20));
        let got = b.execute(|| async { Ok::<_, ()>(()) }).await;
        assert!(
            got.is_err(),
            "the fleet did not close on it either: {got:?}"
        );
        release_second.send(()).unwrap();
        second.await.unwrap().unwrap();
        assert_eq!(a.state(), State::Closed);
        clock.advance(Duration::from_millis(20));
        b.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
        assert_eq!(b.state(), State::Closed);
    });
}
