//! [`Gradient2`]: a concurrency limit that follows the ratio of a long-run latency to the
//! latest one.

use super::algorithm::Algorithm;
use super::sample::Sample;
use crate::atomic::{AtomicU64, Ordering};
use crate::error::{ConfigError, Number};

/// Samples the long-run latency takes as a plain mean before it becomes an exponential
/// average (Netflix's warm-up window).
const WARM_UP: u32 = 10;

/// The low mantissa bits of the long-run latency that hold the warm-up count instead.
const COUNT_BITS: u32 = 0xf;

/// The largest `max_limit`: every integer up to it is exact in an `f32`.
const MAX_LIMIT: u32 = 1 << 24;

/// A concurrency limit that grows by the queue size while the latest latency stays within a
/// tolerance of the long-run latency, and shrinks by their ratio (at most by half, smoothed)
/// when it does not, within `[min_limit, max_limit]` (Netflix's `Gradient2Limit`, whose
/// defaults it takes: 20 at first, 20 to 200, a smoothing of 0.2, a queue size of 4, a
/// tolerance of 1.5, a long window of 600 samples).
///
/// Each call's latency is the short-run latency; the long-run latency is its mean over the
/// first 10 calls, then an exponential average over `long_window` calls (a weight of
/// `2 / (long_window + 1)` for the newest). When the long-run latency is more than twice the
/// short-run one, it is cut by 5 % (latency back to normal after a long overload: the average
/// would take too long to come down). Then, unless the calls in flight are under half the
/// limit (the caller, not the dependency, limits them: nothing learned), the gradient is
/// `rtt_tolerance × long / short` within `[0.5, 1]`, and the estimate becomes
/// `estimate × (1 − smoothing) + (estimate × gradient + queue_size) × smoothing`, within the
/// bounds. The limit given is the estimate rounded down. A dropped call counts as any other:
/// Netflix's `Gradient2Limit` does not read the drop either (its latency says enough). A
/// call of zero latency carries no measure and changes nothing (Netflix's would divide by
/// zero).
///
/// No lock, no timer: the whole state is one 64-bit word, updated with a compare-and-swap per
/// sample, so that no sample is lost and the estimate, the long-run latency and its warm-up
/// move together (Netflix updates them under a lock). The estimate is an `f32` (the high 32 bits), every
/// integer limit up to `max_limit` exact; the long-run latency in nanoseconds is an `f32` (the
/// low 32 bits) whose 4 lowest mantissa bits hold the warm-up count (0 to 10), which leaves it
/// 19 bits of mantissa: a relative error under 2⁻¹⁹ (2 × 10⁻⁶). Both are computed in `f64` and
/// stored rounded to the nearest `f32` (a relative error under 2⁻²⁴ a sample); so that this
/// rounding, summed over samples, does not cost a call where Netflix's `f64` lands on an
/// integer (20 + 0.8 five times), an estimate within 1/1024 below an integer gives that
/// integer. The first limit is `initial_limit` as given (a sample brings it within the bounds).
///
/// # Examples
///
/// ```
/// use lazybreaker::limit::{Gradient2, Sample};
/// use std::time::Duration;
///
/// let limit = Gradient2::new();
/// limit.validate()?;
/// let ms = Duration::from_millis;
/// // Calls at the usual latency, the limit in use: it grows by the queue size, smoothed
/// // (20 × 0.8 + (20 + 4) × 0.2 = 20.8, then 21.6, then 22.4).
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 20)), 20);
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 20)), 21);
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 20)), 22);
/// // Five calls in flight, under half the limit: nothing to learn.
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 5)), 22);
/// // A call ten times slower than usual: the gradient falls to its floor, 0.5
/// // (22.4 × 0.8 + (22.4 × 0.5 + 4) × 0.2 = 20.96).
/// assert_eq!(limit.on_sample(Sample::new(ms(100), 30)), 20);
///
/// let err = Gradient2::new().smoothing(0.0).validate().unwrap_err();
/// assert_eq!(err.field(), "limit.smoothing");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Gradient2 {
    /// The estimate (high half) and the long-run latency with the warm-up count (low half):
    /// see [`State`].
    state: AtomicU64,
    min_limit: u32,
    max_limit: u32,
    smoothing: f64,
    queue_size: f64,
    rtt_tolerance: f64,
    long_window: u32,
}

impl Default for Gradient2 {
    fn default() -> Self {
        Self::new()
    }
}

impl Gradient2 {
    /// Netflix's defaults: 20 at first, within 20 to 200, a smoothing of 0.2, a queue size of
    /// 4, a latency tolerance of 1.5, a long window of 600 samples.
    pub fn new() -> Self {
        Self {
            state: AtomicU64::new(State::initial(20).pack()),
            min_limit: 20,
            max_limit: 200,
            smoothing: 0.2,
            queue_size: 4.0,
            rtt_tolerance: 1.5,
            long_window: 600,
        }
    }

    /// The limit at first (its learned latency forgotten).
    #[must_use]
    pub fn initial_limit(self, limit: u32) -> Self {
        self.state
            .store(State::initial(limit).pack(), Ordering::Relaxed);
        self
    }

    /// The least the limit falls to.
    #[must_use]
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.min_limit = limit;
        self
    }

    /// The most the limit grows to (Netflix's `maxConcurrency`), at most 2²⁴.
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max_limit = limit;
        self
    }

    /// How much of a new estimate the limit takes, in (0, 1]: 1 takes it whole.
    #[must_use]
    pub fn smoothing(mut self, smoothing: f64) -> Self {
        self.smoothing = smoothing;
        self
    }

    /// How much the limit grows by (before smoothing) while the latency stays low: the
    /// calls allowed to queue at the dependency.
    #[must_use]
    pub fn queue_size(mut self, size: f64) -> Self {
        self.queue_size = size;
        self
    }

    /// How much slower than the long-run latency a call may be before the limit shrinks, at
    /// least 1: 2 accepts twice as slow.
    #[must_use]
    pub fn rtt_tolerance(mut self, tolerance: f64) -> Self {
        self.rtt_tolerance = tolerance;
        self
    }

    /// How many calls the long-run latency averages over, at least 1.
    #[must_use]
    pub fn long_window(mut self, samples: u32) -> Self {
        self.long_window = samples;
        self
    }

    /// Refuses a setting out of its range, naming it: `limit.smoothing` outside (0, 1],
    /// `limit.rtt_tolerance` under 1 or not finite, `limit.max_limit` of zero, below
    /// `min_limit` or above 2²⁴ (16 777 216, the integers an `f32` holds exactly),
    /// `limit.long_window` of zero, `limit.queue_size` negative or not finite.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first setting out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                "limit.smoothing",
                Number(self.smoothing),
                "must be within (0, 1]",
            ));
        }
        if !(self.rtt_tolerance.is_finite() && self.rtt_tolerance >= 1.0) {
            return Err(ConfigError::new(
                "limit.rtt_tolerance",
                Number(self.rtt_tolerance),
                "must be a number of at least 1",
            ));
        }
        if self.max_limit == 0 || self.max_limit < self.min_limit || self.max_limit > MAX_LIMIT {
            return Err(ConfigError::new(
                "limit.max_limit",
                self.max_limit,
                "must be at least 1, at least `min_limit` and at most 16777216",
            ));
        }
        if self.long_window == 0 {
            return Err(ConfigError::new(
                "limit.long_window",
                0,
                "must be at least 1",
            ));
        }
        if !(self.queue_size.is_finite() && self.queue_size >= 0.0) {
            return Err(ConfigError::new(
                "limit.queue_size",
                Number(self.queue_size),
                "must be a number of at least 0",
            ));
        }
        Ok(())
    }

    /// The limit now: the estimate rounded down (see the type's docs).
    pub fn limit(&self) -> u32 {
        State::unpack(self.state.load(Ordering::Relaxed)).whole()
    }

    /// Learns from one call, and gives the limit it leaves (see the type's docs for the
    /// rule). A call of zero latency changes nothing.
    pub fn on_sample(&self, sample: Sample) -> u32 {
        if sample.latency.is_zero() {
            return self.limit();
        }
        let rtt = sample.latency.as_nanos() as f64;
        let next = |word: u64| self.next(State::unpack(word), rtt, sample.in_flight).pack();
        // A sample that moves nothing (a steady long-run latency, the caller limiting the
        // calls) writes nothing, as `Aimd`.
        match self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let moved = next(word);
                (moved != word).then_some(moved)
            }) {
            Ok(previous) => State::unpack(next(previous)).whole(),
            Err(unmoved) => State::unpack(unmoved).whole(),
        }
    }

    /// The state one call of latency `rtt` (nanoseconds, above 0) leaves, `in_flight` calls
    /// out when it started.
    fn next(&self, state: State, rtt: f64, in_flight: u32) -> State {
        // The long-run latency: a running mean while warming up, then an exponential average.
        let (long, warm_up) = if state.warm_up < WARM_UP {
            let n = f64::from(state.warm_up);
            ((state.long_rtt * n + rtt) / (n + 1.0), state.warm_up + 1)
        } else {
            let weight = 2.0 / (f64::from(self.long_window) + 1.0);
            (state.long_rtt * (1.0 - weight) + rtt * weight, WARM_UP)
        };
        // Latency back to normal: the long-run latency comes down faster. (Netflix cuts its
        // measure while warming up too, but the next sample's mean forgets the cut: only a
        // cut at the end of the warm-up lasts.)
        let kept = if long / rtt > 2.0 && warm_up == WARM_UP {
            long * 0.95
        } else {
            long
        };
        let estimate = state.limit;
        let limit = if f64::from(in_flight) < estimate / 2.0 {
            estimate
        } else {
            let gradient = (self.rtt_tolerance * long / rtt).clamp(0.5, 1.0);
            let grown = estimate * gradient + self.queue_size;
            let smoothed = estimate * (1.0 - self.smoothing) + grown * self.smoothing;
            // `min`/`max` rather than `clamp`: a NaN from unchecked settings stays bounded.
            let low = self.min_limit.min(self.max_limit);
            smoothed.min(f64::from(self.max_limit)).max(f64::from(low))
        };
        State {
            limit,
            long_rtt: kept,
            warm_up,
        }
    }
}

/// The state of a [`Gradient2`], as its word holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    /// The estimate.
    limit: f64,
    /// The long-run latency, in nanoseconds.
    long_rtt: f64,
    /// Samples taken into the long-run mean so far, up to [`WARM_UP`].
    warm_up: u32,
}

impl State {
    fn initial(limit: u32) -> Self {
        Self {
            limit: f64::from(limit),
            long_rtt: 0.0,
            warm_up: 0,
        }
    }

    /// The limit it gives: the estimate rounded down, within 1/1024 of the integer above
    /// counting as it (the `f32`'s rounding, summed over samples).
    fn whole(self) -> u32 {
        (self.limit + 1.0 / 1024.0) as u32
    }

    /// High 32 bits: the estimate as an `f32`; low 32 bits: the long-run latency as an
    /// `f32` whose 4 low mantissa bits are the warm-up count. Both rounded to the nearest.
    fn pack(self) -> u64 {
        let limit = (self.limit as f32).to_bits();
        let long = ((self.long_rtt as f32).to_bits() & !COUNT_BITS) | self.warm_up;
        (u64::from(limit) << 32) | u64::from(long)
    }

    fn unpack(word: u64) -> Self {
        let long = word as u32;
        Self {
            limit: f64::from(f32::from_bits((word >> 32) as u32)),
            long_rtt: f64::from(f32::from_bits(long & !COUNT_BITS)),
            warm_up: long & COUNT_BITS,
        }
    }
}

impl Clone for Gradient2 {
    /// The same settings, and the state it has now.
    fn clone(&self) -> Self {
        Self {
            state: AtomicU64::new(self.state.load(Ordering::Relaxed)),
            ..*self
        }
    }
}

impl Algorithm for Gradient2 {
    fn limit(&self) -> u32 {
        Gradient2::limit(self)
    }

    fn on_sample(&self, sample: Sample) -> u32 {
        Gradient2::on_sample(self, sample)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        Gradient2::validate(self)
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    fn state(limit: &Gradient2) -> State {
        State::unpack(limit.state.load(Ordering::Relaxed))
    }

    // Netflix's repository has no `Gradient2LimitTest` (none in its history either); its
    // `ExpAvgMeasurementTest`, the long-run latency's measure, replayed here, and cases worked
    // from `Gradient2Limit`'s source below.

    // `ExpAvgMeasurementTest.testWarmup`: a window of 100, samples 10, 11, .., 19, then 100.
    #[test]
    fn netflix_exp_avg_measurement_warmup() {
        let limit = Gradient2::new().long_window(100);
        let expected = [10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5, 14.0, 14.5];
        for (i, mean) in expected.iter().enumerate() {
            limit.on_sample(Sample::new(Duration::from_nanos(10 + i as u64), 1));
            assert!((state(&limit).long_rtt - mean).abs() < 0.01, "sample {i}");
            assert_eq!(state(&limit).warm_up, i as u32 + 1);
        }
        limit.on_sample(Sample::new(Duration::from_nanos(100), 1));
        assert!((state(&limit).long_rtt - 16.2).abs() < 0.1);
        assert_eq!(state(&limit).warm_up, WARM_UP);
    }

    #[test]
    fn netflix_initial_limit() {
        assert_eq!(Gradient2::new().initial_limit(50).limit(), 50);
        assert_eq!(Gradient2::new().limit(), 20);
    }

    #[test]
    fn steady_latency_grows_by_the_queue_size_smoothed() {
        // Gradient 1 (1.5 × long / short, capped): + 4 × 0.2 a sample.
        let limit = Gradient2::new();
        for n in 1..=10 {
            limit.on_sample(Sample::new(10 * MS, 200));
            let expected = 20.0 + 0.8 * f64::from(n);
            assert!((state(&limit).limit - expected).abs() < 1e-4, "{n}");
        }
        assert_eq!(limit.limit(), 28);
        // Smoothing 1 takes the estimate whole: + 4 a sample.
        let whole = Gradient2::new().smoothing(1.0);
        assert_eq!(whole.on_sample(Sample::new(10 * MS, 200)), 24);
        assert_eq!(whole.on_sample(Sample::new(10 * MS, 200)), 28);
    }

    #[test]
    fn a_slower_call_shrinks_the_limit_by_the_gradient() {
        let limit = Gradient2::new()
            .initial_limit(100)
            .smoothing(1.0)
            .queue_size(0.0);
        limit.on_sample(Sample::new(10 * MS, 100));
        assert_eq!(limit.limit(), 100);
        // Long: the mean of 10 and 20 ms, 15 ms; gradient 1.5 × 15 / 20 = 1.125, capped at 1.
        assert_eq!(limit.on_sample(Sample::new(20 * MS, 100)), 100);
        // Long: (10 + 20 + 40) / 3 ms; gradient 1.5 × 23.33 / 40 = 0.875.
        assert_eq!(limit.on_sample(Sample::new(40 * MS, 100)), 87);
        // Long: (70 + 1000) / 4 = 267.5 ms; gradient 1.5 × 267.5 / 1000 = 0.401: floored at 0.5.
        assert_eq!(limit.on_sample(Sample::new(1000 * MS, 100)), 43);
        // Never below the least limit.
        for _ in 0..20 {
            limit.on_sample(Sample::new(10_000 * MS, 100));
        }
        assert_eq!(limit.limit(), 20);
    }

    #[test]
    fn an_app_limited_call_leaves_the_limit_but_teaches_the_latency() {
        let limit = Gradient2::new().initial_limit(40);
        assert_eq!(limit.on_sample(Sample::new(10 * MS, 19)), 40);
        assert_eq!(state(&limit).warm_up, 1);
        assert_eq!(state(&limit).long_rtt, 1e7);
        // 20 is half the limit: no longer limited by the caller.
        assert_eq!(limit.on_sample(Sample::new(10 * MS, 20)), 40);
        assert!(state(&limit).limit > 40.0);
    }

    #[test]
    fn a_long_rtt_over_twice_the_short_one_is_cut_once_warm() {
        let limit = Gradient2::new().long_window(1);
        // Warming up: the mean (100 ms after 9 samples, 91 ms with a 10 ms sample); the cut
        // of the warm-up is forgotten, as Netflix's next mean forgets it.
        for _ in 0..9 {
            limit.on_sample(Sample::new(100 * MS, 1));
        }
        assert_eq!(state(&limit).long_rtt, 1e8);
        // The tenth sample ends the warm-up: a mean of 91 ms, over twice 10 ms, cut by 5 %.
        limit.on_sample(Sample::new(10 * MS, 1));
        assert!((state(&limit).long_rtt - 0.95 * 9.1e7).abs() < 1e3);
        // Window 1: the average is the last sample, 10 ms: no cut.
        limit.on_sample(Sample::new(10 * MS, 1));
        assert_eq!(state(&limit).long_rtt, 1e7);
        // Warm, the cut lasts: the next average starts from it.
        let warm = Gradient2::new();
        for _ in 0..10 {
            warm.on_sample(Sample::new(100 * MS, 1));
        }
        let weight = 2.0 / 601.0;
        let cut = 0.95 * (1e8 * (1.0 - weight) + 1e7 * weight);
        warm.on_sample(Sample::new(10 * MS, 1));
        assert!((state(&warm).long_rtt - cut).abs() < 1e3);
        let next = 0.95 * (cut * (1.0 - weight) + 1e7 * weight);
        warm.on_sample(Sample::new(10 * MS, 1));
        assert!((state(&warm).long_rtt - next).abs() < 1e3);
    }

    #[test]
    fn drops_and_zero_latencies() {
        let limit = Gradient2::new();
        // A dropped call counts as any other: Netflix's Gradient2 does not read the drop.
        let other = Gradient2::new();
        limit.on_sample(Sample::dropped(10 * MS, 20));
        other.on_sample(Sample::new(10 * MS, 20));
        assert_eq!(state(&limit), state(&other));
        // Zero latency: nothing learned.
        let before = state(&limit);
        assert_eq!(limit.on_sample(Sample::new(Duration::ZERO, 20)), 20);
        assert_eq!(state(&limit), before);
    }

    #[test]
    fn the_bounds_hold() {
        let limit = Gradient2::new().max_limit(30);
        for _ in 0..100 {
            limit.on_sample(Sample::new(MS, 1_000));
        }
        assert_eq!(limit.limit(), 30, "never above max_limit");
        // An initial limit out of the bounds is brought within them by a sample.
        let high = Gradient2::new().initial_limit(500);
        assert_eq!(high.limit(), 500);
        assert_eq!(high.on_sample(Sample::new(MS, 1_000)), 200);
        let low = Gradient2::new().initial_limit(1).min_limit(5).max_limit(10);
        assert_eq!(low.on_sample(Sample::new(MS, 1_000)), 5);
        // The largest limit is exact.
        let top = Gradient2::new()
            .initial_limit(MAX_LIMIT)
            .min_limit(MAX_LIMIT)
            .max_limit(MAX_LIMIT);
        assert_eq!(top.on_sample(Sample::new(MS, u32::MAX)), MAX_LIMIT);
    }

    #[test]
    fn the_word_keeps_the_state_to_its_precision() {
        for x in [0.0, 1.0, 20.8, 21.0, 16_777_215.0, 16_777_216.0] {
            let state = State {
                limit: x,
                long_rtt: 1.234_567_89e9,
                warm_up: 7,
            };
            let back = State::unpack(state.pack());
            assert_eq!(back.whole(), x as u32, "{x}");
            assert!((back.limit - x).abs() <= x / f64::from(1 << 24));
            assert_eq!(back.warm_up, 7);
            assert!((state.long_rtt - back.long_rtt).abs() / state.long_rtt < 2e-6);
        }
        // Within 1/1024 below an integer: the integer.
        let near = |limit| {
            State::unpack(
                State {
                    limit,
                    long_rtt: 0.0,
                    warm_up: 0,
                }
                .pack(),
            )
        };
        assert_eq!(near(23.999_996).whole(), 24);
        assert_eq!(near(23.998).whole(), 23);
    }

    #[test]
    fn settings_out_of_range_name_their_field() {
        for (limit, field) in [
            (Gradient2::new().smoothing(0.0), "limit.smoothing"),
            (Gradient2::new().smoothing(1.5), "limit.smoothing"),
            (Gradient2::new().smoothing(f64::NAN), "limit.smoothing"),
            (Gradient2::new().rtt_tolerance(0.9), "limit.rtt_tolerance"),
            (
                Gradient2::new().rtt_tolerance(f64::INFINITY),
                "limit.rtt_tolerance",
            ),
            (
                Gradient2::new().max_limit(0).min_limit(0),
                "limit.max_limit",
            ),
            (
                Gradient2::new().min_limit(50).max_limit(10),
                "limit.max_limit",
            ),
            (Gradient2::new().max_limit(MAX_LIMIT + 1), "limit.max_limit"),
            (Gradient2::new().long_window(0), "limit.long_window"),
            (Gradient2::new().queue_size(-1.0), "limit.queue_size"),
            (Gradient2::new().queue_size(f64::NAN), "limit.queue_size"),
        ] {
            assert_eq!(limit.validate().unwrap_err().field(), field);
        }
        assert!(Gradient2::new().validate().is_ok());
        assert!(Gradient2::new()
            .smoothing(1.0)
            .rtt_tolerance(1.0)
            .queue_size(0.0)
            .long_window(1)
            .max_limit(MAX_LIMIT)
            .validate()
            .is_ok());
    }

    #[test]
    fn a_clone_has_the_settings_and_the_state_now() {
        let limit = Gradient2::new().max_limit(1_000).queue_size(10.0);
        for _ in 0..5 {
            limit.on_sample(Sample::new(MS, 1_000));
        }
        let copy = limit.clone();
        assert_eq!(state(&copy), state(&limit));
        // Its own state from now on, moving by the same settings.
        assert_eq!(
            copy.on_sample(Sample::new(MS, 1_000)),
            limit.on_sample(Sample::new(MS, 1_000))
        );
        copy.on_sample(Sample::new(MS, 1_000));
        assert!(copy.limit() > limit.limit());
        let boxed = Algorithm::boxed_clone(&limit);
        assert_eq!(boxed.limit(), limit.limit());
    }

    #[test]
    fn samples_from_threads_lose_no_update() {
        // Identical samples: the order does not matter, so the state after them all is the
        // one a sequential replay leaves; a lost update would leave the estimate short.
        let sample = Sample::new(MS, u32::MAX);
        let limit = std::sync::Arc::new(Gradient2::new().max_limit(MAX_LIMIT));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let limit = std::sync::Arc::clone(&limit);
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        limit.on_sample(sample);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let replay = Gradient2::new().max_limit(MAX_LIMIT);
        for _ in 0..4_000 {
            replay.on_sample(sample);
        }
        assert_eq!(state(&limit), state(&replay));
        // + 0.8 a sample.
        assert!((state(&limit).limit - (20.0 + 0.8 * 4_000.0)).abs() < 2.0);
    }
}
