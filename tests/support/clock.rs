//! [`Behind`]: a clock that reads a fixed time behind a `ManualClock` while a test says so,
//! as a thread whose reading is older than another thread's step would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::ManualClock;

/// Reads `skew` behind `base` while [`set`](Behind::set) to `true`, else what `base` reads.
/// Clones share the switch.
#[derive(Clone, Debug)]
pub(crate) struct Behind {
    base: ManualClock,
    skew: Duration,
    behind: Arc<AtomicBool>,
}

impl Behind {
    /// A clock `skew` behind `base` once switched on (off at first).
    pub(crate) fn new(base: &ManualClock, skew: Duration) -> Self {
        Self {
            base: base.clone(),
            skew,
            behind: Arc::default(),
        }
    }

    /// Whether it reads behind from now on.
    pub(crate) fn set(&self, behind: bool) {
        self.behind.store(behind, Ordering::SeqCst);
    }
}

impl lazybreaker::Clock for Behind {
    fn now(&self) -> Duration {
        let skew = if self.behind.load(Ordering::SeqCst) {
            self.skew
        } else {
            Duration::ZERO
        };
        self.base.now().saturating_sub(skew)
    }
}
