//! [`run`]: a future on a current-thread tokio runtime with timers, bounded in time, for the
//! async tests that need no server.

use std::future::Future;
use std::time::Duration;

/// Runs `f` to completion on a fresh current-thread runtime (timers enabled); panics if it
/// takes longer than 10 s of real time (a hung test fails instead of hanging CI).
pub(crate) fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(10), f)
                .await
                .expect("bounded")
        })
}
