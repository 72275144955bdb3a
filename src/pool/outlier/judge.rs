//! The statistics of one interval: which endpoints are outliers, from each one's successes
//! and failures in it. Pure arithmetic (sans-IO): no clock, no endpoint, no randomness.

use crate::origin::Ejection;

use super::{FailurePercentage, Spread, SuccessRate};

/// One endpoint's results in the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

impl Tally {
    /// Its request volume: successes and failures (exclusions do not count).
    pub(crate) fn volume(&self) -> u64 {
        self.successes.saturating_add(self.failures)
    }

    /// Its success rate, in percent (100 for no call).
    pub(crate) fn success_rate(&self) -> f64 {
        match self.volume() {
            0 => 100.0,
            v => 100.0 * self.successes as f64 / v as f64,
        }
    }
}

/// The success rate below which an endpoint of `rates` (the rates of the endpoints with the
/// volume) is an outlier, or `None` when too few endpoints have the volume.
pub(crate) fn success_rate_threshold(
    rule: &SuccessRate,
    spread: Spread,
    rates: &[f64],
) -> Option<f64> {
    if rates.len() < rule.minimum_hosts.max(1) {
        return None;
    }
    Some(match spread {
        Spread::StandardDeviation => {
            let n = rates.len() as f64;
            let mean = rates.iter().sum::<f64>() / n;
            let variance = rates.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / n;
            mean - rule.stdev_factor * variance.sqrt()
        }
        Spread::MedianAbsoluteDeviation {
            factor,
            min_difference,
        } => {
            let median = median(rates.to_vec());
            let mad = median_of(rates.iter().map(|r| (r - median).abs()));
            // 1.4826 · MAD estimates σ for normally distributed rates.
            median - (factor * 1.4826 * mad).max(min_difference)
        }
    })
}

fn median_of(values: impl Iterator<Item = f64>) -> f64 {
    median(values.collect())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The outliers among `tallies`, in their order, each with its reason: the success-rate
/// detector's first (as Envoy and gRPC run it first), then the failure percentage's, an
/// endpoint named once. An endpoint is judged only with the detector's request volume.
pub(crate) fn outliers(
    tallies: &[Tally],
    success_rate: Option<&SuccessRate>,
    spread: Spread,
    failure_percentage: Option<&FailurePercentage>,
) -> Vec<(usize, Ejection)> {
    let mut found = Vec::new();
    if let Some(rule) = success_rate {
        let with_volume = || {
            tallies
                .iter()
                .enumerate()
                .filter(|(_, t)| t.volume() >= rule.request_volume.max(1))
        };
        let rates: Vec<f64> = with_volume().map(|(_, t)| t.success_rate()).collect();
        if let Some(threshold) = success_rate_threshold(rule, spread, &rates) {
            found.extend(
                with_volume()
                    .filter(|(_, t)| t.success_rate() < threshold)
                    .map(|(i, _)| (i, Ejection::SuccessRate)),
            );
        }
    }
    if let Some(rule) = failure_percentage {
        let with_volume = || {
            tallies
                .iter()
                .enumerate()
                .filter(|(_, t)| t.volume() >= rule.request_volume.max(1))
        };
        if with_volume().count() >= rule.minimum_hosts.max(1) {
            for (i, t) in with_volume() {
                let failed = 100.0 - t.success_rate();
                if failed >= rule.threshold && !found.iter().any(|(j, _)| *j == i) {
                    found.push((i, Ejection::FailurePercentage));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SD: Spread = Spread::StandardDeviation;

    fn tally(successes: u64, failures: u64) -> Tally {
        Tally {
            successes,
            failures,
        }
    }

    fn envoy() -> SuccessRate {
        SuccessRate {
            stdev_factor: 1.9,
            minimum_hosts: 5,
            request_volume: 100,
        }
    }

    #[test]
    fn the_mean_less_the_deviations_by_hand() {
        // Rates 100, 100, 100, 100, 50: mean 90, σ = 20 (population), 90 − 1.9 × 20 = 52.
        let t = success_rate_threshold(&envoy(), SD, &[100.0, 100.0, 100.0, 100.0, 50.0]).unwrap();
        assert!((t - 52.0).abs() < 1e-9, "{t}");
        // Too few endpoints with the volume: no threshold.
        assert_eq!(success_rate_threshold(&envoy(), SD, &[100.0, 50.0]), None);
    }

    #[test]
    fn the_median_less_the_deviations_by_hand() {
        let (rule, mad) = (
            envoy(),
            Spread::MedianAbsoluteDeviation {
                factor: 3.0,
                min_difference: 1.0,
            },
        );
        // Median 99, deviations 0, 0.5, 0.5, 1, 49: MAD 0.5 → 99 − 3 × 1.4826 × 0.5 = 96.776.
        let t = success_rate_threshold(&rule, mad, &[99.0, 99.5, 98.5, 100.0, 50.0]).unwrap();
        assert!((t - (99.0 - 3.0 * 1.4826 * 0.5)).abs() < 1e-9, "{t}");
        // All equal: the floor keeps the threshold a point below the median.
        let t = success_rate_threshold(&rule, mad, &[100.0; 6]).unwrap();
        assert!((t - 99.0).abs() < 1e-9, "{t}");
    }

    #[test]
    fn an_endpoint_without_the_volume_is_not_judged() {
        let mut tallies = vec![tally(100, 0); 5];
        tallies.push(tally(10, 89)); // 99 calls: below the volume of 100
        assert_eq!(outliers(&tallies, Some(&envoy()), SD, None), []);
        tallies[5] = tally(10, 90);
        assert_eq!(
            outliers(&tallies, Some(&envoy()), SD, None),
            [(5, Ejection::SuccessRate)]
        );
    }

    #[test]
    fn the_failure_percentage_is_reached_at_the_threshold() {
        let rule = FailurePercentage {
            threshold: 85.0,
            minimum_hosts: 5,
            request_volume: 50,
        };
        let mut tallies = vec![tally(50, 0); 4];
        tallies.push(tally(15, 85)); // 85 %: ejected (Envoy: at or above)
        tallies.push(tally(16, 84)); // 84 %: not
        assert_eq!(
            outliers(&tallies, None, SD, Some(&rule)),
            [(4, Ejection::FailurePercentage)]
        );
        // Four endpoints with the volume: below minimum_hosts.
        assert_eq!(outliers(&tallies[2..], None, SD, Some(&rule)), []);
    }
}
