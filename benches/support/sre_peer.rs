//! go-zero's `googlebreaker` design, written in Rust for the throttle benches: Google SRE's
//! formula over a rolling window of buckets behind a lock, every bucket summed on each
//! admission (`RollingWindow.Reduce`), each result added under the lock (`RollingWindow.Add`),
//! the clock read on each, and the draw from a generator behind its own lock
//! (`mathx.Proba`). Its defaults: a 10 s window of 40 buckets, `k = 1.5`, no throttling
//! below 5 requests. The clock is the coarse one lazybreaker reads by default, so the two
//! differ in design, not in clock.

use parking_lot::Mutex;

/// Buckets in the window, and each one's span.
const BUCKETS: usize = 40;
const BUCKET_NANOS: u64 = 250_000_000;

/// One bucket: calls counted, and those accepted.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    total: u64,
    accepts: u64,
}

#[derive(Debug)]
struct Window {
    buckets: [Bucket; BUCKETS],
    /// The bucket of the latest update, and when it started.
    offset: usize,
    last: u64,
}

impl Window {
    /// Moves the window to `now`, clearing the buckets it passed (go-zero's `updateOffset`).
    fn update(&mut self, now: u64) {
        let span = ((now.saturating_sub(self.last)) / BUCKET_NANOS) as usize;
        if span == 0 {
            return;
        }
        for i in 1..=span.min(BUCKETS) {
            self.buckets[(self.offset + i) % BUCKETS] = Bucket::default();
        }
        self.offset = (self.offset + span) % BUCKETS;
        self.last = now - (now - self.last) % BUCKET_NANOS;
    }
}

/// The breaker: `accept()` before a call, `mark(ok)` after it.
#[derive(Debug)]
pub(crate) struct GoZeroSre {
    window: Mutex<Window>,
    draws: Mutex<u64>,
    start: coarsetime::Instant,
    k: f64,
    protection: u64,
}

impl GoZeroSre {
    pub(crate) fn new() -> Self {
        Self {
            window: Mutex::new(Window {
                buckets: [Bucket::default(); BUCKETS],
                offset: 0,
                last: 0,
            }),
            draws: Mutex::new(0x9e37_79b9_7f4a_7c15),
            start: coarsetime::Instant::now(),
            k: 1.5,
            protection: 5,
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos()
    }

    /// Whether the next call may go: the drop ratio from every bucket's sum, and a draw
    /// when it is above zero.
    pub(crate) fn accept(&self) -> bool {
        let now = self.now();
        let (total, accepts) = {
            let mut w = self.window.lock();
            w.update(now);
            w.buckets
                .iter()
                .fold((0, 0), |(t, a), b| (t + b.total, a + b.accepts))
        };
        let ratio = ((total.saturating_sub(self.protection)) as f64 - self.k * accepts as f64)
            / (total + 1) as f64;
        if ratio <= 0.0 {
            return true;
        }
        let mut state = self.draws.lock();
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        ((*state >> 11) as f64 / (1u64 << 53) as f64) >= ratio
    }

    /// Counts a call's result.
    pub(crate) fn mark(&self, ok: bool) {
        let now = self.now();
        let mut w = self.window.lock();
        w.update(now);
        let offset = w.offset;
        w.buckets[offset].total += 1;
        w.buckets[offset].accepts += u64::from(ok);
    }
}
