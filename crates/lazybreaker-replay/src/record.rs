//! Recording a trace from a running service: off until asked, then the last calls kept in a
//! bounded buffer, to write as the CSV a replay reads.

use std::collections::HashMap;
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::trace::{Entry, Trace, NO_KEY};
use lazybreaker::observe::Observer;
use lazybreaker::policy::Outcome;
use lazybreaker::policy::TripPolicy;
use lazybreaker::Breaker;
use lazybreaker::Error;
use lazybreaker::{Clock, MonotonicClock};

/// Records calls as a [`Trace`]: off until [`start`](Recorder::start)ed, then each call
/// made through [`begin`](Recorder::begin) (or [`execute`](Recorder::execute)) is kept with
/// its start, latency, outcome and key, the last `capacity` of them in a ring allocated up
/// front. [`trace`](Recorder::trace) and [`write_csv`](Recorder::write_csv) give what it
/// kept, its times shifted so that the first call kept starts at zero.
///
/// **Cost.** Off, a call pays one relaxed atomic load ([`begin`](Recorder::begin) answers
/// `None`). On, it reads the clock twice and takes a short lock to store 24 bytes (and, for
/// a key, to look it up: a key is stored once, the first time it is seen); nothing is
/// allocated per call but a new key. docs/performance.md has the figures.
///
/// **What a recording holds.** The calls that were made: a call a breaker rejected was never
/// made, so its outcome is unknown and it is not in the trace. For a complete trace, record
/// through a breaker in dry run ([`Builder::dry_run`](lazybreaker::Builder::dry_run)), which makes
/// every call, or in front of no breaker at all.
///
/// # Examples
///
/// ```
/// use lazybreaker_replay::Recorder;
/// use lazybreaker::{Breaker, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let recorder = Recorder::with_clock(1000, clock.clone());
/// let breaker = Breaker::builder().dry_run(true).build();
///
/// let _ = recorder.execute(&breaker, || Ok::<_, ()>(())); // off: not recorded
/// recorder.start();
/// clock.advance(Duration::from_millis(100));
/// let _ = recorder.execute(&breaker, || {
///     clock.advance(Duration::from_millis(7)); // the call takes 7 ms
///     Err::<(), _>("refused")
/// });
/// let mut csv = Vec::new();
/// recorder.write_csv(&mut csv)?;
/// assert_eq!(String::from_utf8(csv).unwrap(), "start_ms,latency_ms,outcome\n0,7,failure\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Recorder {
    on: AtomicBool,
    clock: Box<dyn Clock>,
    ring: Mutex<Ring>,
    seen: AtomicU64,
}

/// The calls kept: a ring of at most `capacity` entries, and the keys they name.
struct Ring {
    entries: Vec<Entry>,
    /// Where the next entry goes once the ring is full.
    next: usize,
    capacity: usize,
    keys: Vec<String>,
    index: HashMap<String, u32>,
}

/// A call being recorded: ended with its outcome ([`end`](Recording::end)); dropped without
/// one, it is not recorded.
#[must_use = "a recording is kept only when ended with the call's outcome"]
pub struct Recording<'a> {
    recorder: &'a Recorder,
    start: Duration,
}

impl Recorder {
    /// A recorder, off, that keeps the last `capacity` calls once started, on the real
    /// clock ([`MonotonicClock`]). A capacity of zero keeps nothing.
    pub fn new(capacity: usize) -> Self {
        Self::with_clock(capacity, MonotonicClock::new())
    }

    /// Like [`new`](Recorder::new), on `clock` (a [`ManualClock`](lazybreaker::ManualClock) in
    /// tests).
    pub fn with_clock(capacity: usize, clock: impl Clock + 'static) -> Self {
        Self {
            on: AtomicBool::new(false),
            clock: Box::new(clock),
            ring: Mutex::new(Ring {
                entries: Vec::with_capacity(capacity),
                next: 0,
                capacity,
                keys: Vec::new(),
                index: HashMap::new(),
            }),
            seen: AtomicU64::new(0),
        }
    }

    /// Starts recording (it keeps what it recorded before, if anything).
    pub fn start(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Stops recording; what it kept stays until [`clear`](Recorder::clear).
    pub fn stop(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// Whether it is recording.
    pub fn is_recording(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Forgets every call kept (the keys too).
    pub fn clear(&self) {
        let mut ring = self.ring.lock();
        ring.entries.clear();
        ring.next = 0;
        ring.keys.clear();
        ring.index.clear();
    }

    /// Calls recorded since it was built, kept or since overwritten.
    pub fn recorded(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// Begins recording a call that starts now: `None` when the recorder is off (the whole
    /// cost of a recorder that is off).
    #[inline]
    pub fn begin(&self) -> Option<Recording<'_>> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        Some(Recording {
            recorder: self,
            start: self.clock.now(),
        })
    }

    /// Runs `call` through `breaker` ([`Breaker::execute`]) and records it, when on: `Ok` a
    /// success, `Err` a failure. A call the breaker rejects is not recorded (it was not
    /// made).
    ///
    /// # Errors
    ///
    /// As [`Breaker::execute`].
    pub fn execute<P, O, T, E, F>(&self, breaker: &Breaker<P, O>, call: F) -> Result<T, Error<E>>
    where
        P: TripPolicy,
        O: Observer,
        F: FnOnce() -> Result<T, E>,
    {
        let recording = self.begin();
        // A call that panics is a failure to the breaker, and so to the trace; the panic
        // then continues.
        let result = match std::panic::catch_unwind(AssertUnwindSafe(|| breaker.execute(call))) {
            Ok(result) => result,
            Err(payload) => {
                if let Some(recording) = recording {
                    recording.end(Outcome::Failure);
                }
                std::panic::resume_unwind(payload)
            }
        };
        if let Some(recording) = recording {
            match &result {
                Ok(_) => recording.end(Outcome::Success),
                Err(Error::Inner(_)) => recording.end(Outcome::Failure),
                Err(_) => drop(recording),
            }
        }
        result
    }

    /// What it kept, as a trace: its calls in start order, times shifted so that the first
    /// starts at zero.
    pub fn trace(&self) -> Trace {
        let ring = self.ring.lock();
        let origin = ring.entries.iter().map(|e| e.start).min().unwrap_or(0);
        let mut trace = Trace::new();
        let (older, newer) = ring.entries.split_at(ring.next.min(ring.entries.len()));
        for e in newer.iter().chain(older) {
            let start = Duration::from_nanos(e.start - origin);
            let latency = Duration::from_nanos(e.latency);
            match e.key() {
                Some(k) => trace.push_keyed(&ring.keys[k], start, latency, e.outcome),
                None => trace.push(start, latency, e.outcome),
            };
        }
        // The ring holds calls in the order they ended: sorted once, here.
        trace.put_in_order();
        trace
    }

    /// Writes what it kept as CSV ([`Trace::write_csv`] of [`trace`](Recorder::trace)).
    ///
    /// # Errors
    ///
    /// The writer's.
    pub fn write_csv(&self, writer: impl io::Write) -> io::Result<()> {
        self.trace().write_csv(writer)
    }

    fn keep(&self, start: Duration, key: Option<&str>, outcome: Outcome) {
        let end = self.clock.now();
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (start, latency) = (nanos(start), nanos(end.saturating_sub(start)));
        self.seen.fetch_add(1, Ordering::Relaxed);
        let mut ring = self.ring.lock();
        if ring.capacity == 0 {
            return;
        }
        let key = match key {
            None => NO_KEY,
            Some(k) => match ring.index.get(k) {
                Some(&i) => i,
                None if ring.keys.len() < NO_KEY as usize - 1 => {
                    let i = ring.keys.len() as u32;
                    ring.keys.push(k.to_owned());
                    ring.index.insert(k.to_owned(), i);
                    i
                }
                None => NO_KEY - 1,
            },
        };
        let entry = Entry {
            start,
            latency,
            outcome,
            key,
        };
        if ring.entries.len() < ring.capacity {
            ring.entries.push(entry);
        } else {
            let at = ring.next;
            ring.entries[at] = entry;
            ring.next = (at + 1) % ring.capacity;
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("recording", &self.is_recording())
            .field("recorded", &self.recorded())
            .finish_non_exhaustive()
    }
}

impl Recording<'_> {
    /// The call ended with `outcome`, now: it is recorded.
    pub fn end(self, outcome: Outcome) {
        self.recorder.keep(self.start, None, outcome);
    }

    /// The call, through the breaker of `key`, ended with `outcome`, now: it is recorded.
    pub fn end_keyed(self, key: &str, outcome: Outcome) {
        self.recorder.keep(self.start, Some(key), outcome);
    }
}

impl std::fmt::Debug for Recording<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazybreaker::ManualClock;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_ring_keeps_the_last_calls_in_start_order_from_zero() {
        let clock = ManualClock::new();
        let r = Recorder::with_clock(3, clock.clone());
        assert!(r.begin().is_none(), "off until started");
        r.start();
        for i in 0..5u64 {
            clock.advance(ms(10));
            let call = r.begin().unwrap();
            clock.advance(ms(i));
            call.end_keyed(["a", "b"][i as usize % 2], Outcome::Success);
        }
        let dropped = r.begin().unwrap();
        drop(dropped); // not ended: not recorded
        assert_eq!(r.recorded(), 5);
        let t = r.trace();
        let calls: Vec<_> = t.iter().map(|c| (c.start, c.latency, c.key)).collect();
        // Calls 2, 3, 4 started at 31, 43, 56 ms (each 10 ms after the last one ended).
        assert_eq!(
            calls,
            [
                (ms(0), ms(2), Some("a")),
                (ms(12), ms(3), Some("b")),
                (ms(25), ms(4), Some("a"))
            ]
        );
        r.stop();
        assert!(r.begin().is_none());
        r.clear();
        assert!(r.trace().is_empty());
    }

    #[test]
    fn a_recorder_of_no_capacity_keeps_nothing() {
        let r = Recorder::with_clock(0, ManualClock::new());
        r.start();
        r.begin().unwrap().end(Outcome::Failure);
        assert_eq!((r.recorded(), r.trace().len()), (1, 0));
    }
}
