//! [`Vegas`]: a concurrency limit from the queue a call's latency implies (TCP Vegas).

use super::algorithm::Algorithm;
use super::sample::Sample;
use crate::atomic::{AtomicU64, Ordering};
use crate::error::{ConfigError, Number};
use crate::jitter::draw;

/// The largest `max_limit`: the word's estimate holds 16 significant bits.
const MAX_LIMIT: u32 = u16::MAX as u32;

/// Where each part of the state lies in the word, and its width.
const COUNT_SHIFT: u32 = 48;
const COUNT_MAX: u64 = 0xffff;
const DRAWS_SHIFT: u32 = 40;
const DRAWS_MASK: u64 = 0xff;
const LIMIT_SHIFT: u32 = 20;
const FIELD_MASK: u64 = (1 << 20) - 1;

/// The estimate: 5 bits of exponent (2⁻¹⁵ to 2¹⁵, zero below), 15 of mantissa.
const LIMIT_FLOAT: Small = Small {
    exponent_bits: 5,
    mantissa_bits: 15,
    bias: 16,
};

/// The no-load latency in nanoseconds: 6 bits of exponent (1 ns to 2⁶³ ns), 14 of mantissa.
const RTT_FLOAT: Small = Small {
    exponent_bits: 6,
    mantissa_bits: 14,
    bias: 1,
};

/// A concurrency limit that reads the queue at the dependency from a call's latency against
/// the least latency seen (TCP Vegas), and grows while the queue is short, shrinks when it is
/// long or a call is dropped, within `[1, max_limit]` (Netflix's `VegasLimit`, whose defaults
/// it takes: 20 at first, at most 1 000, a smoothing of 1, a probe multiplier of 30, and its
/// functions of the limit).
///
/// The queue a call implies is `⌈limit × (1 − rtt_noload / rtt)⌉`, `rtt_noload` the least
/// latency seen. With `l` the logarithm of the limit ([`Vegas::log10`]: `⌊log10(limit)⌋`, at
/// least 1):
/// - a dropped call: the limit becomes `decrease(limit)` (by default `limit − l`);
/// - else, calls in flight under half the limit (the caller limits them): no change;
/// - a queue at most `threshold` (by default `l`): `limit + beta` (by default `6 l`);
/// - under `alpha` (by default `3 l`): `increase(limit)` (by default `limit + l`);
/// - over `beta`: `decrease(limit)`; between `alpha` and `beta`: no change.
///
/// The new limit, within `[1, max_limit]`, is smoothed: `limit × (1 − smoothing) + new ×
/// smoothing`. The limit given is the estimate rounded down. A call faster than `rtt_noload`
/// (or the first call) only sets it. To follow a dependency that got slower for good, every
/// `limit × probe_multiplier × jitter` calls (`jitter` drawn in [0.5, 1) for each period) a
/// call is taken as the new `rtt_noload` whatever its latency. A call of zero latency counts
/// as nothing (Netflix refuses one).
///
/// The jitter is drawn from the [`seed`](Vegas::seed) and the count of draws so far
/// (SplitMix64, as a breaker's jitter), so that the same seed and the same samples give the
/// same limits, live or replayed: give each copy that should not probe in step its own seed.
///
/// No lock, no timer: the whole state is one 64-bit word, updated with a compare-and-swap per
/// sample, so that no sample is lost and the count, the least latency and the estimate move
/// together (Netflix updates them under a lock). To fit, each part is cut to what it needs.
/// From the top: the calls since the last probe (16 bits, saturating: whatever the limit, a
/// probe at least every 65 535 calls), the draws so far (8 bits, counted modulo 256: the
/// jitters repeat after 256 probes), the estimate (a float of 20 bits: 15 bits of mantissa,
/// every integer limit up to 65 535 exact, a relative error under 2⁻¹⁶ in between) and
/// `rtt_noload` in nanoseconds (20 bits: 14 of mantissa, a relative error under 2⁻¹⁵,
/// 3 × 10⁻⁵), both rounded to the nearest. Every latency is read at that precision before it
/// is compared, so equal latencies stay equal. An estimate within 1/1024 below an integer
/// gives that integer (as [`Gradient2`](super::Gradient2): the word's rounding does not cost
/// a call). The first limit is `initial_limit` as given, at most 65 535 (a sample brings it
/// within the bounds).
///
/// # Examples
///
/// ```
/// use lazybreaker::limit::{Sample, Vegas};
/// use std::time::Duration;
///
/// let limit = Vegas::new().seed(7);
/// limit.validate()?;
/// let ms = Duration::from_millis;
/// // The first call sets the no-load latency.
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 20)), 20);
/// // No queue (the same latency), the limit in use: + beta, 6 × log10(20) rounded down.
/// assert_eq!(limit.on_sample(Sample::new(ms(10), 20)), 26);
/// // Five times slower: a queue of ⌈26 × 0.8⌉ = 21, over beta: − log10(26) rounded down.
/// assert_eq!(limit.on_sample(Sample::new(ms(50), 20)), 25);
/// // A drop: the same decrease.
/// assert_eq!(limit.on_sample(Sample::dropped(ms(10), 1)), 24);
///
/// let err = Vegas::new().max_limit(0).validate().unwrap_err();
/// assert_eq!(err.field(), "limit.max_limit");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Vegas {
    /// The calls since the last probe, the draws so far, the estimate and the no-load
    /// latency: see [`State`].
    state: AtomicU64,
    max_limit: u32,
    smoothing: f64,
    probe_multiplier: u32,
    seed: u64,
    alpha: fn(u32) -> u32,
    beta: fn(u32) -> u32,
    threshold: fn(u32) -> u32,
    increase: fn(f64) -> f64,
    decrease: fn(f64) -> f64,
}

impl Default for Vegas {
    fn default() -> Self {
        Self::new()
    }
}

impl Vegas {
    /// Netflix's defaults: 20 at first, at most 1 000, a smoothing of 1, a probe multiplier
    /// of 30, alpha `3 l`, beta `6 l`, threshold `l`, increase `limit + l`, decrease
    /// `limit − l` (`l` is [`Vegas::log10`] of the limit); a seed of 0.
    pub fn new() -> Self {
        Self {
            state: AtomicU64::new(State::initial(20).pack()),
            max_limit: 1_000,
            smoothing: 1.0,
            probe_multiplier: 30,
            seed: 0,
            alpha: |limit| 3 * Vegas::log10(limit),
            beta: |limit| 6 * Vegas::log10(limit),
            threshold: Vegas::log10,
            increase: |limit| limit + f64::from(Vegas::log10(limit as u32)),
            decrease: |limit| limit - f64::from(Vegas::log10(limit as u32)),
        }
    }

    /// Netflix's `Log10RootIntFunction`: `⌊log10(limit)⌋`, at least 1.
    ///
    /// ```
    /// use lazybreaker::limit::Vegas;
    ///
    /// assert_eq!([0, 9, 10, 100, 999, 10_000].map(Vegas::log10), [1, 1, 1, 2, 2, 4]);
    /// ```
    pub fn log10(limit: u32) -> u32 {
        limit.checked_ilog10().unwrap_or(0).max(1)
    }

    /// The limit at first (at most 65 535; the state learned forgotten).
    #[must_use]
    pub fn initial_limit(self, limit: u32) -> Self {
        let draws = State::unpack(self.state.load(Ordering::Relaxed)).draws;
        let state = State {
            draws,
            ..State::initial(limit)
        };
        self.state.store(state.pack(), Ordering::Relaxed);
        self
    }

    /// The most the limit grows to (Netflix's `maxConcurrency`), at most 65 535.
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max_limit = limit;
        self
    }

    /// How much of a new limit the estimate takes, in (0, 1]: 1 takes it whole.
    #[must_use]
    pub fn smoothing(mut self, smoothing: f64) -> Self {
        self.smoothing = smoothing;
        self
    }

    /// How many times the limit the calls between two probes of the no-load latency are
    /// (times a jitter in [0.5, 1)), at least 1.
    #[must_use]
    pub fn probe_multiplier(mut self, multiplier: u32) -> Self {
        self.probe_multiplier = multiplier;
        self
    }

    /// The seed of the probes' jitter: the same seed and the same samples give the same
    /// limits.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// A queue under it (and over the threshold) grows the limit by `increase`: a function
    /// of the limit rounded down (Netflix's `alphaFunction`).
    #[must_use]
    pub fn alpha(mut self, alpha: fn(u32) -> u32) -> Self {
        self.alpha = alpha;
        self
    }

    /// A queue over it shrinks the limit by `decrease`; the growth of a queue at most the
    /// threshold: a function of the limit rounded down (Netflix's `betaFunction`).
    #[must_use]
    pub fn beta(mut self, beta: fn(u32) -> u32) -> Self {
        self.beta = beta;
        self
    }

    /// A queue at most it grows the limit by beta: a function of the limit rounded down
    /// (Netflix's `thresholdFunction`).
    #[must_use]
    pub fn threshold(mut self, threshold: fn(u32) -> u32) -> Self {
        self.threshold = threshold;
        self
    }

    /// The limit after a short queue, from the limit (Netflix's `increaseFunction`).
    #[must_use]
    pub fn increase(mut self, increase: fn(f64) -> f64) -> Self {
        self.increase = increase;
        self
    }

    /// The limit after a long queue or a drop, from the limit (Netflix's
    /// `decreaseFunction`).
    #[must_use]
    pub fn decrease(mut self, decrease: fn(f64) -> f64) -> Self {
        self.decrease = decrease;
        self
    }

    /// Refuses a setting out of its range, naming it: `limit.smoothing` outside (0, 1],
    /// `limit.max_limit` of zero or above 65 535, `limit.probe_multiplier` of zero.
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
        if self.max_limit == 0 || self.max_limit > MAX_LIMIT {
            return Err(ConfigError::new(
                "limit.max_limit",
                self.max_limit,
                "must be within [1, 65535]",
            ));
        }
        if self.probe_multiplier == 0 {
            return Err(ConfigError::new(
                "limit.probe_multiplier",
                0,
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// The limit now: the estimate rounded down (see the type's docs).
    pub fn limit(&self) -> u32 {
        State::unpack(self.state.load(Ordering::Relaxed)).whole()
    }

    /// Learns from one call, and gives the limit it leaves (see the type's docs for the
    /// rule). A call of zero latency counts as nothing.
    pub fn on_sample(&self, sample: Sample) -> u32 {
        if sample.latency.is_zero() {
            return self.limit();
        }
        // Read at the precision the word keeps, so that equal latencies stay equal.
        let rtt = RTT_FLOAT.round(sample.latency.as_nanos() as f64);
        let next = |word: u64| self.next(State::unpack(word), rtt, sample).pack();
        // Every sample counts towards the next probe: every one writes.
        match self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                Some(next(word))
            }) {
            Ok(previous) | Err(previous) => State::unpack(next(previous)).whole(),
        }
    }

    /// The jitter of the probe period after `draws` draws: within [0.5, 1).
    fn jitter(&self, draws: u64) -> f64 {
        0.5 + (draw(self.seed, draws) >> 11) as f64 * (0.5 / (1u64 << 53) as f64)
    }

    /// The state one call of latency `rtt` (nanoseconds, above 0, at the word's precision)
    /// leaves.
    fn next(&self, mut state: State, rtt: f64, sample: Sample) -> State {
        state.count = (state.count + 1).min(COUNT_MAX);
        // A limit below one (an initial limit of 0) probes as a limit of one would, so that
        // the samples that follow bring it within the bounds.
        let due =
            self.jitter(state.draws) * f64::from(self.probe_multiplier) * state.limit.max(1.0);
        if state.count == COUNT_MAX || due <= state.count as f64 {
            state.count = 0;
            state.draws = (state.draws + 1) & DRAWS_MASK;
            state.rtt_noload = rtt;
            return state;
        }
        if state.rtt_noload == 0.0 || rtt < state.rtt_noload {
            state.rtt_noload = rtt;
            return state;
        }
        let limit = state.limit;
        let queue = (limit * (1.0 - state.rtt_noload / rtt)).ceil();
        let new = if sample.dropped {
            (self.decrease)(limit)
        } else if f64::from(sample.in_flight) * 2.0 < limit {
            return state;
        } else {
            let whole = limit as u32;
            let beta = f64::from((self.beta)(whole));
            if queue <= f64::from((self.threshold)(whole)) {
                limit + beta
            } else if queue < f64::from((self.alpha)(whole)) {
                (self.increase)(limit)
            } else if queue > beta {
                (self.decrease)(limit)
            } else {
                return state;
            }
        };
        // `min`/`max` rather than `clamp`: a NaN from a function stays bounded.
        let new = new.min(f64::from(self.max_limit)).max(1.0);
        state.limit = limit * (1.0 - self.smoothing) + new * self.smoothing;
        state
    }
}

/// The state of a [`Vegas`], as its word holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    /// Calls since the last probe, up to [`COUNT_MAX`].
    count: u64,
    /// Jitters drawn so far, modulo 256.
    draws: u64,
    /// The estimate.
    limit: f64,
    /// The least latency seen since the last probe, in nanoseconds; 0 before the first.
    rtt_noload: f64,
}

impl State {
    fn initial(limit: u32) -> Self {
        Self {
            count: 0,
            draws: 0,
            limit: f64::from(limit.min(MAX_LIMIT)),
            rtt_noload: 0.0,
        }
    }

    /// The limit it gives: the estimate rounded down, within 1/1024 of the integer above
    /// counting as it.
    fn whole(self) -> u32 {
        (self.limit + 1.0 / 1024.0) as u32
    }

    fn pack(self) -> u64 {
        (self.count << COUNT_SHIFT)
            | (self.draws << DRAWS_SHIFT)
            | (LIMIT_FLOAT.pack(self.limit) << LIMIT_SHIFT)
            | RTT_FLOAT.pack(self.rtt_noload)
    }

    fn unpack(word: u64) -> Self {
        Self {
            count: word >> COUNT_SHIFT,
            draws: (word >> DRAWS_SHIFT) & DRAWS_MASK,
            limit: LIMIT_FLOAT.unpack((word >> LIMIT_SHIFT) & FIELD_MASK),
            rtt_noload: RTT_FLOAT.unpack(word & FIELD_MASK),
        }
    }
}

/// A small unsigned float: a biased exponent (0 is zero) and a mantissa below an implicit
/// leading 1, rounded to the nearest, saturating at its largest value.
#[derive(Clone, Copy)]
struct Small {
    exponent_bits: u32,
    mantissa_bits: u32,
    bias: i64,
}

impl Small {
    /// `x` packed: 0 for anything under the least value (and a NaN).
    fn pack(self, x: f64) -> u64 {
        if x.is_nan() || x <= 0.0 {
            return 0;
        }
        // Half the last kept bit added: the cut below rounds to the nearest (a carry out of
        // the mantissa moves the exponent up, as it should).
        let bits = x.to_bits() + (1 << (51 - self.mantissa_bits));
        let code = ((bits >> 52) & 0x7ff) as i64 - 1023 + self.bias;
        let most = (1 << self.exponent_bits) - 1;
        let mantissa_mask = (1 << self.mantissa_bits) - 1;
        if code < 1 {
            0
        } else if code > most {
            ((most as u64) << self.mantissa_bits) | mantissa_mask
        } else {
            ((code as u64) << self.mantissa_bits)
                | ((bits >> (52 - self.mantissa_bits)) & mantissa_mask)
        }
    }

    fn unpack(self, packed: u64) -> f64 {
        if packed == 0 {
            return 0.0;
        }
        let exponent = (packed >> self.mantissa_bits) as i64 - self.bias + 1023;
        let mantissa = packed & ((1 << self.mantissa_bits) - 1);
        f64::from_bits(((exponent as u64) << 52) | (mantissa << (52 - self.mantissa_bits)))
    }

    /// `x` at this precision.
    fn round(self, x: f64) -> f64 {
        self.unpack(self.pack(x))
    }
}

impl Clone for Vegas {
    /// The same settings (seed included), and the state it has now.
    fn clone(&self) -> Self {
        Self {
            state: AtomicU64::new(self.state.load(Ordering::Relaxed)),
            ..*self
        }
    }
}

impl Algorithm for Vegas {
    fn limit(&self) -> u32 {
        Vegas::limit(self)
    }

    fn on_sample(&self, sample: Sample) -> u32 {
        Vegas::on_sample(self, sample)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        Vegas::validate(self)
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        Box::new(self.clone())
    }

    /// A copy whose seed is this one's mixed with `salt` (a pool's endpoint's key): the
    /// endpoints re-probe at times of their own, each replayable.
    fn boxed_clone_salted(&self, salt: u64) -> Box<dyn Algorithm> {
        let seed = draw(self.seed ^ salt, 0);
        Box::new(self.clone().seed(seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    fn state(limit: &Vegas) -> State {
        State::unpack(limit.state.load(Ordering::Relaxed))
    }

    // Netflix's `VegasLimitTest`, case for case.
    fn netflix_create() -> Vegas {
        Vegas::new()
            .alpha(|_| 3)
            .beta(|_| 6)
            .smoothing(1.0)
            .initial_limit(10)
            .max_limit(20)
    }

    #[test]
    fn netflix_large_limit_increase() {
        let limit = Vegas::new().initial_limit(10_000).max_limit(20_000);
        limit.on_sample(Sample::new(Duration::from_secs(10), 5_000));
        assert_eq!(limit.limit(), 10_000);
        limit.on_sample(Sample::new(Duration::from_secs(10), 6_000));
        assert_eq!(limit.limit(), 10_024);
    }

    #[test]
    fn netflix_increase_limit() {
        let limit = netflix_create();
        limit.on_sample(Sample::new(10 * MS, 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(Sample::new(10 * MS, 11));
        assert_eq!(limit.limit(), 16);
    }

    #[test]
    fn netflix_decrease_limit() {
        let limit = netflix_create();
        limit.on_sample(Sample::new(10 * MS, 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(Sample::new(50 * MS, 11));
        assert_eq!(limit.limit(), 9);
    }

    #[test]
    fn netflix_no_change_if_within_thresholds() {
        let limit = netflix_create();
        limit.on_sample(Sample::new(10 * MS, 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(Sample::new(14 * MS, 14));
        assert_eq!(limit.limit(), 10);
    }

    // Also `decreaseSmoothingDeprecatedBuilderMethod`: the same case through Netflix's
    // deprecated builder method, which this type has not.
    #[test]
    fn netflix_decrease_smoothing() {
        let limit = Vegas::new()
            .decrease(|limit| limit / 2.0)
            .smoothing(0.5)
            .initial_limit(100)
            .max_limit(200);
        // Pick up first min-rtt
        limit.on_sample(Sample::new(10 * MS, 100));
        assert_eq!(limit.limit(), 100);
        // First decrease
        limit.on_sample(Sample::new(20 * MS, 100));
        assert_eq!(limit.limit(), 75);
        // Second decrease
        limit.on_sample(Sample::new(20 * MS, 100));
        assert_eq!(limit.limit(), 56);
    }

    // Also `decreaseWithoutSmoothingDeprecatedBuilderMethod` (see above).
    #[test]
    fn netflix_decrease_without_smoothing() {
        let limit = Vegas::new()
            .decrease(|limit| limit / 2.0)
            .initial_limit(100)
            .max_limit(200);
        // Pick up first min-rtt
        limit.on_sample(Sample::new(10 * MS, 100));
        assert_eq!(limit.limit(), 100);
        // First decrease
        limit.on_sample(Sample::new(20 * MS, 100));
        assert_eq!(limit.limit(), 50);
        // Second decrease
        limit.on_sample(Sample::new(20 * MS, 100));
        assert_eq!(limit.limit(), 25);
    }

    // Netflix's `Log10RootIntFunctionTest`: `test0Index`, `testInRange`,
    // `testOutofLookupRange`.
    #[test]
    fn netflix_log10_root_int_function() {
        assert_eq!(Vegas::log10(0), 1);
        assert_eq!(Vegas::log10(100), 2);
        assert_eq!(Vegas::log10(10_000), 4);
        assert_eq!(Vegas::log10(u32::MAX), 9);
    }

    #[test]
    fn a_drop_decreases_an_app_limited_call_does_not_move() {
        let limit = Vegas::new().initial_limit(100);
        limit.on_sample(Sample::new(10 * MS, 1));
        // Few calls in flight: no change, even with a long queue.
        assert_eq!(limit.on_sample(Sample::new(100 * MS, 49)), 100);
        // A drop: 100 − 2, however few calls were in flight.
        assert_eq!(limit.on_sample(Sample::dropped(10 * MS, 1)), 98);
        // A faster drop only sets the no-load latency (as Netflix).
        assert_eq!(limit.on_sample(Sample::dropped(5 * MS, 1)), 98);
        assert_eq!(state(&limit).rtt_noload, RTT_FLOAT.round(5e6));
        // Between alpha (6) and beta (12): no change. 10 ms against 9.25 ms: ⌈100 × 0.075⌉ = 8.
        let between = Vegas::new().initial_limit(100);
        between.on_sample(Sample::new(Duration::from_micros(9_250), 1));
        assert_eq!(between.on_sample(Sample::new(10 * MS, 100)), 100);
        // Over the threshold (2), under alpha: + log10. 10 ms against 9.55 ms: ⌈4.5⌉ = 5.
        let under = Vegas::new().initial_limit(100);
        under.on_sample(Sample::new(Duration::from_micros(9_550), 1));
        assert_eq!(under.on_sample(Sample::new(10 * MS, 100)), 102);
    }

    #[test]
    fn zero_latencies_count_as_nothing() {
        let limit = Vegas::new();
        limit.on_sample(Sample::new(10 * MS, 20));
        let before = state(&limit);
        assert_eq!(limit.on_sample(Sample::new(Duration::ZERO, 20)), 20);
        assert_eq!(limit.on_sample(Sample::dropped(Duration::ZERO, 20)), 20);
        assert_eq!(state(&limit), before);
    }

    #[test]
    fn a_probe_takes_the_latency_as_the_new_no_load_one() {
        // A multiplier of 1: a probe within 10 calls (10 × a jitter in [0.5, 1)).
        let limit = Vegas::new().initial_limit(10).probe_multiplier(1).seed(3);
        let due = (limit.jitter(0) * 10.0).ceil() as u64;
        assert!((5..=10).contains(&due));
        limit.on_sample(Sample::new(10 * MS, 1));
        for n in 2..due {
            limit.on_sample(Sample::new(20 * MS, 1));
            assert_eq!(state(&limit).rtt_noload, RTT_FLOAT.round(1e7), "call {n}");
            assert_eq!(state(&limit).count, n);
        }
        limit.on_sample(Sample::new(20 * MS, 1));
        assert_eq!(state(&limit).rtt_noload, RTT_FLOAT.round(2e7));
        assert_eq!((state(&limit).count, state(&limit).draws), (0, 1));
        // No queue at 20 ms now: + beta.
        assert_eq!(limit.on_sample(Sample::new(20 * MS, 10)), 16);
    }

    #[test]
    fn the_probe_count_saturates() {
        let limit = Vegas::new().initial_limit(10_000).max_limit(MAX_LIMIT);
        limit.on_sample(Sample::new(MS, 1));
        limit.state.store(
            State {
                count: COUNT_MAX - 1,
                ..state(&limit)
            }
            .pack(),
            Ordering::Relaxed,
        );
        limit.on_sample(Sample::new(2 * MS, 1));
        assert_eq!(state(&limit).count, 0, "probed at 65 535 calls");
        assert_eq!(state(&limit).rtt_noload, RTT_FLOAT.round(2e6));
    }

    #[test]
    fn the_bounds_hold() {
        let limit = Vegas::new().max_limit(100);
        limit.on_sample(Sample::new(MS, 1));
        for _ in 0..100 {
            limit.on_sample(Sample::new(MS, 1_000));
        }
        assert_eq!(limit.limit(), 100, "never above max_limit");
        for _ in 0..1_000 {
            limit.on_sample(Sample::dropped(MS, 1));
        }
        assert_eq!(limit.limit(), 1, "never below 1");
        // The largest limit is exact, and so is every integer below it.
        let top = Vegas::new()
            .initial_limit(MAX_LIMIT)
            .max_limit(MAX_LIMIT)
            .probe_multiplier(1_000);
        assert_eq!(top.limit(), MAX_LIMIT);
        top.on_sample(Sample::new(MS, u32::MAX));
        assert_eq!(top.on_sample(Sample::new(MS, u32::MAX)), MAX_LIMIT);
        for n in 0..=MAX_LIMIT {
            assert_eq!(LIMIT_FLOAT.round(f64::from(n)), f64::from(n));
        }
        assert_eq!(Vegas::new().initial_limit(u32::MAX).limit(), MAX_LIMIT);
    }

    #[test]
    fn the_word_keeps_the_state_to_its_precision() {
        for x in [1.0, 56.25, 999.999, 65_535.4, 1e-4] {
            let back = LIMIT_FLOAT.round(x);
            assert!((x - back).abs() / x <= 1.0 / f64::from(1 << 16), "{x}");
        }
        for rtt in [1.0, 999.0, 1e7, 1.234_567e9, 3.6e12] {
            let back = RTT_FLOAT.round(rtt);
            assert!(
                (rtt - back).abs() / rtt <= 1.0 / f64::from(1 << 15),
                "{rtt}"
            );
        }
        assert_eq!(RTT_FLOAT.round(f64::MAX), RTT_FLOAT.unpack((1 << 20) - 1));
        assert_eq!(LIMIT_FLOAT.round(65_535.9), 65_535.0, "saturates");
        assert_eq!(LIMIT_FLOAT.pack(0.0), 0);
        assert_eq!(LIMIT_FLOAT.pack(f64::NAN), 0);
        // Rounding carries into the exponent: just under 2 is 2.
        assert_eq!(LIMIT_FLOAT.round(1.999_999), 2.0);
        let full = State {
            count: COUNT_MAX,
            draws: DRAWS_MASK,
            limit: 65_535.0,
            rtt_noload: RTT_FLOAT.round(1e7),
        };
        assert_eq!(State::unpack(full.pack()), full);
        let whole = |limit| State { limit, ..full }.whole();
        assert_eq!((whole(23.9995), whole(23.998)), (24, 23));
    }

    #[test]
    fn settings_out_of_range_name_their_field() {
        for (limit, field) in [
            (Vegas::new().smoothing(0.0), "limit.smoothing"),
            (Vegas::new().smoothing(1.1), "limit.smoothing"),
            (Vegas::new().smoothing(f64::NAN), "limit.smoothing"),
            (Vegas::new().max_limit(0), "limit.max_limit"),
            (Vegas::new().max_limit(MAX_LIMIT + 1), "limit.max_limit"),
            (Vegas::new().probe_multiplier(0), "limit.probe_multiplier"),
        ] {
            assert_eq!(limit.validate().unwrap_err().field(), field);
        }
        assert!(Vegas::new().validate().is_ok());
        assert!(Vegas::new()
            .smoothing(0.01)
            .max_limit(MAX_LIMIT)
            .probe_multiplier(1)
            .validate()
            .is_ok());
    }

    /// Samples drawn from `seed`: latencies of 1 to 64 ms, 1 to 128 in flight, one in 16
    /// dropped.
    fn samples(seed: u64) -> impl Iterator<Item = Sample> {
        (0..5_000).map(move |n| {
            let bits = draw(seed, n);
            let latency = Duration::from_micros(1_000 + (bits & 0xffff) % 63_000);
            let in_flight = 1 + ((bits >> 16) & 0x7f) as u32;
            if (bits >> 32) & 0xf == 0 {
                Sample::dropped(latency, in_flight)
            } else {
                Sample::new(latency, in_flight)
            }
        })
    }

    fn replay(limit: &Vegas, seed: u64) -> Vec<u32> {
        samples(seed).map(|s| limit.on_sample(s)).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_limits() {
        let settings = Vegas::new().probe_multiplier(1).max_limit(200);
        let a = replay(&settings.clone().seed(11), 5);
        let b = replay(&settings.clone().seed(11), 5);
        assert_eq!(a, b);
        // Probes happened, and another seed draws other periods.
        let other = settings.clone().seed(12);
        let c = replay(&other, 5);
        assert_ne!(a, c);
        assert!(state(&other).draws > 0);
        assert!(a.iter().any(|&l| l != a[0]));
    }

    #[test]
    fn an_initial_limit_of_zero_is_brought_within_the_bounds() {
        let limit = Vegas::new().initial_limit(0).seed(1);
        assert_eq!(limit.limit(), 0);
        for _ in 0..200 {
            limit.on_sample(Sample::new(Duration::from_millis(10), 1_000));
        }
        assert!(limit.limit() >= 1, "{}", limit.limit());
    }

    #[test]
    fn salted_copies_draw_their_own_probes_and_replay() {
        let settings = Vegas::new().probe_multiplier(1).max_limit(200).seed(11);
        let run = |salt| -> Vec<u32> {
            let limit = settings.boxed_clone_salted(salt);
            samples(5).map(|s| limit.on_sample(s)).collect()
        };
        assert_eq!(run(1), run(1), "the same salt: the same limits");
        assert_ne!(run(1), run(2), "another salt: other probe times");
        // Unsalted copies keep the seed as given.
        let plain = settings.boxed_clone();
        let plain: Vec<u32> = samples(5).map(|s| plain.on_sample(s)).collect();
        assert_eq!(plain, replay(&settings.clone(), 5));
    }

    #[test]
    fn a_clone_has_the_settings_and_the_state_now() {
        let limit = Vegas::new()
            .decrease(|limit| limit / 2.0)
            .seed(9)
            .initial_limit(100)
            .max_limit(200);
        limit.on_sample(Sample::new(10 * MS, 100));
        let copy = limit.clone();
        assert_eq!(state(&copy), state(&limit));
        // The same function, the same seed: the same limits from now on.
        for s in samples(1).take(500) {
            assert_eq!(copy.on_sample(s), limit.on_sample(s));
        }
        assert_eq!(state(&copy), state(&limit));
        copy.on_sample(Sample::dropped(MS, 1));
        assert_ne!(state(&copy), state(&limit));
        let boxed = Algorithm::boxed_clone(&limit);
        assert_eq!(boxed.limit(), limit.limit());
    }

    #[test]
    fn samples_from_threads_lose_no_update() {
        // Identical samples: the order does not matter, so the state after them all is the
        // one a sequential replay leaves (the calls since the last probe, the draws, the
        // estimate); a lost update would leave a count short.
        let sample = Sample::new(MS, u32::MAX);
        let settings = Vegas::new().max_limit(100).probe_multiplier(1).seed(4);
        let limit = std::sync::Arc::new(settings.clone());
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
        for _ in 0..4_000 {
            settings.on_sample(sample);
        }
        assert_eq!(state(&limit), state(&settings));
        assert!(state(&limit).draws > 0, "probed");
    }
}
