//! Durations as people read them, in messages, pages and reports: whole milliseconds below a
//! minute (`0ms`, `989ms`, `1000ms`, `59999ms`), whole seconds from a minute on, in hours,
//! minutes and seconds with the zero parts left out (`1m`, `1m 1s`, `2m 5s`, `1h`, `1h 5s`).
//!
//! A wait ([`wait`]: a retry-after, the rest of an open period) is rounded up, as HTTP's
//! `Retry-After` is: a caller who waits the time it reads is never early. Any other duration
//! ([`span`]: an elapsed time, a setting, a timeout) is rounded to the nearest unit, halves up.
//! Machine formats (metrics, configuration files) keep full precision; JSON reports write
//! each duration's exact string with its whole milliseconds beside it, as [`wait_ms`] and
//! [`span_ms`] round them (see `docs/integrations.md`, "Durations in JSON").
//!
//! # Examples
//!
//! ```
//! use lazybreaker::human;
//! use std::time::Duration;
//!
//! let wait = Duration::from_nanos(988_000_001);
//! assert_eq!(human::wait(wait).to_string(), "989ms");
//! assert_eq!(human::span(wait).to_string(), "988ms");
//! assert_eq!(human::wait(Duration::from_secs(125)).to_string(), "2m 5s");
//! ```

use std::fmt;
use std::time::Duration;

const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_SEC: u128 = 1_000_000_000;
/// From this many whole milliseconds on, a duration reads in whole seconds.
const MINUTE_MILLIS: u128 = 60_000;

/// A duration rounded for people; its `Display` is the text (see the [module](self) docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Human(Unit);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Unit {
    Millis(u128),
    Secs(u128),
    /// Above zero, under half a millisecond: [`measured`]'s `<1ms`.
    UnderMilli,
}

/// A wait, rounded up: 1 ns reads `1ms`, 988.000001 ms reads `989ms`, 60.2 s reads `1m 1s`.
/// Zero reads `0ms`.
///
/// # Examples
///
/// ```
/// use lazybreaker::human;
/// use std::time::Duration;
///
/// assert_eq!(human::wait(Duration::from_nanos(1)).to_string(), "1ms");
/// assert_eq!(human::wait(Duration::from_secs(30)).to_string(), "30000ms");
/// ```
pub fn wait(d: Duration) -> Human {
    let nanos = d.as_nanos();
    let millis = nanos.div_ceil(NANOS_PER_MILLI);
    if millis < MINUTE_MILLIS {
        Human(Unit::Millis(millis))
    } else {
        Human(Unit::Secs(nanos.div_ceil(NANOS_PER_SEC)))
    }
}

/// Any other duration, rounded to the nearest unit (halves up): 1 ns reads `0ms`, 988.5 ms
/// reads `989ms`, 90.4 s reads `1m 30s`.
///
/// # Examples
///
/// ```
/// use lazybreaker::human;
/// use std::time::Duration;
///
/// assert_eq!(human::span(Duration::from_micros(988_400)).to_string(), "988ms");
/// assert_eq!(human::span(Duration::from_secs(3_600)).to_string(), "1h");
/// ```
pub fn span(d: Duration) -> Human {
    let nanos = d.as_nanos();
    let millis = (nanos + NANOS_PER_MILLI / 2) / NANOS_PER_MILLI;
    if millis < MINUTE_MILLIS {
        Human(Unit::Millis(millis))
    } else {
        Human(Unit::Secs((nanos + NANOS_PER_SEC / 2) / NANOS_PER_SEC))
    }
}

/// A measured time (a latency, a time to trip), rounded as [`span`] rounds it, but a time
/// above zero that would read `0ms` reads `<1ms`: a loopback call's 0.3 ms, or a breaker
/// that tripped 0.3 ms after a burst began, did not take no time. Zero reads `0ms`.
///
/// # Examples
///
/// ```
/// use lazybreaker::human;
/// use std::time::Duration;
///
/// assert_eq!(human::measured(Duration::from_micros(300)).to_string(), "<1ms");
/// assert_eq!(human::measured(Duration::from_micros(500)).to_string(), "1ms");
/// assert_eq!(human::measured(Duration::ZERO).to_string(), "0ms");
/// ```
pub fn measured(d: Duration) -> Human {
    match span(d) {
        Human(Unit::Millis(0)) if !d.is_zero() => Human(Unit::UnderMilli),
        human => human,
    }
}

/// A wait in whole milliseconds, rounded up as [`wait`] rounds it (below a minute, the
/// number [`wait`] reads): what a JSON report writes in a wait's `_ms` field, so that a
/// script that waits that long is never early. Saturates at `u64::MAX`.
///
/// # Examples
///
/// ```
/// use lazybreaker::human;
/// use std::time::Duration;
///
/// assert_eq!(human::wait_ms(Duration::from_nanos(599_999_999)), 600);
/// assert_eq!(human::wait_ms(Duration::from_nanos(1)), 1);
/// assert_eq!(human::wait_ms(Duration::from_secs(90)), 90_000);
/// ```
pub fn wait_ms(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(NANOS_PER_MILLI)).unwrap_or(u64::MAX)
}

/// Any other duration in whole milliseconds, to the nearest (halves up) as [`span`] rounds
/// it (below a minute, the number [`span`] reads): what a JSON report writes in a
/// duration's `_ms` field. Saturates at `u64::MAX`.
///
/// # Examples
///
/// ```
/// use lazybreaker::human;
/// use std::time::Duration;
///
/// assert_eq!(human::span_ms(Duration::from_nanos(402_500_001)), 403);
/// assert_eq!(human::span_ms(Duration::from_nanos(499_999)), 0);
/// assert_eq!(human::span_ms(Duration::from_secs(90)), 90_000);
/// ```
pub fn span_ms(d: Duration) -> u64 {
    u64::try_from((d.as_nanos() + NANOS_PER_MILLI / 2) / NANOS_PER_MILLI).unwrap_or(u64::MAX)
}

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = match self.0 {
            Unit::Millis(ms) => return f.pad(&format!("{ms}ms")),
            Unit::UnderMilli => return f.pad("<1ms"),
            Unit::Secs(secs) => secs,
        };
        let (h, m, s) = (secs / 3_600, secs / 60 % 60, secs % 60);
        let mut text = String::new();
        for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
            if n > 0 {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&format!("{n}{unit}"));
            }
        }
        f.pad(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::{span, wait};
    use std::time::Duration;

    fn w(d: Duration) -> String {
        wait(d).to_string()
    }

    fn s(d: Duration) -> String {
        span(d).to_string()
    }

    #[test]
    fn zero_reads_zero_milliseconds() {
        assert_eq!(w(Duration::ZERO), "0ms");
        assert_eq!(s(Duration::ZERO), "0ms");
    }

    #[test]
    fn a_wait_rounds_up_to_the_millisecond() {
        assert_eq!(w(Duration::from_nanos(1)), "1ms");
        // 988.000001 ms: 988 ms and 1 ns.
        assert_eq!(w(Duration::from_nanos(988_000_001)), "989ms");
        assert_eq!(w(Duration::from_millis(988)), "988ms");
        assert_eq!(w(Duration::from_secs(1)), "1000ms");
        assert_eq!(w(Duration::from_nanos(1_000_000_001)), "1001ms");
        assert_eq!(w(Duration::from_millis(59_999)), "59999ms");
    }

    #[test]
    fn a_span_rounds_to_the_nearest_millisecond() {
        assert_eq!(s(Duration::from_nanos(1)), "0ms");
        assert_eq!(s(Duration::from_nanos(499_999)), "0ms");
        assert_eq!(s(Duration::from_nanos(500_000)), "1ms");
        assert_eq!(s(Duration::from_nanos(988_000_001)), "988ms");
        assert_eq!(s(Duration::from_secs(1)), "1000ms");
    }

    #[test]
    fn from_a_minute_on_whole_seconds() {
        // Just under a minute, rounded up, is a minute.
        assert_eq!(w(Duration::from_nanos(59_999_000_001)), "1m");
        assert_eq!(w(Duration::from_secs(60)), "1m");
        assert_eq!(w(Duration::from_secs(61)), "1m 1s");
        assert_eq!(w(Duration::from_millis(60_001)), "1m 1s");
        assert_eq!(s(Duration::from_millis(60_499)), "1m");
        assert_eq!(s(Duration::from_millis(60_500)), "1m 1s");
        assert_eq!(s(Duration::from_nanos(59_999_500_000)), "1m");
        assert_eq!(w(Duration::from_secs(125)), "2m 5s");
    }

    #[test]
    fn hours_leave_out_their_zero_parts() {
        assert_eq!(w(Duration::from_secs(3_600)), "1h");
        assert_eq!(w(Duration::from_secs(3_605)), "1h 5s");
        assert_eq!(w(Duration::from_secs(3_661)), "1h 1m 1s");
        assert_eq!(s(Duration::from_secs(36 * 3_600 + 120)), "36h 2m");
    }

    #[test]
    fn the_longest_duration_does_not_overflow() {
        // u64::MAX s and 999_999_999 ns, rounded up: 2^64 s, which is 5124095576030431 h,
        // 0 min and 16 s.
        assert_eq!(w(Duration::MAX), "5124095576030431h 16s");
    }

    #[test]
    fn the_milliseconds_of_a_report_are_the_ones_people_read() {
        use super::{span_ms, wait_ms};
        for nanos in [0, 1, 499_999, 500_000, 988_000_001, 59_999_000_000] {
            let d = Duration::from_nanos(nanos);
            assert_eq!(w(d), format!("{}ms", wait_ms(d)), "{nanos} ns");
            assert_eq!(s(d), format!("{}ms", span_ms(d)), "{nanos} ns");
        }
        assert_eq!(wait_ms(Duration::MAX), u64::MAX);
        assert_eq!(span_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn width_and_alignment_apply_to_the_whole_text() {
        assert_eq!(format!("{:>8}", wait(Duration::from_millis(5))), "     5ms");
        assert_eq!(format!("{:<7}|", span(Duration::from_secs(61))), "1m 1s  |");
    }
}
