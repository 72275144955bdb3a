//! Steps of work, counted for the tests that bound an algorithm's cost without timing it:
//! comparisons, entries moved, states looked at. Outside tests, counting is nothing.

#[cfg(test)]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` steps on this thread (in tests only).
#[inline]
pub(crate) fn add(n: u64) {
    #[cfg(test)]
    STEPS.with(|steps| steps.set(steps.get() + n));
    #[cfg(not(test))]
    let _ = n;
}

/// The steps counted on this thread since the last call, counting again from zero.
#[cfg(test)]
pub(crate) fn take() -> u64 {
    STEPS.with(|steps| steps.replace(0))
}
