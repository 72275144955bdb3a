//! The status page on 127.0.0.1 while a simulated outage runs: `payments` fails for a while,
//! trips, is probed and recovers; `search` is forced open by an operator.
//!
//! Prints the address and stops by itself after a few seconds; set
//! `LAZYBREAKER_KEEP_RUNNING=1` to keep it up for a person to look at.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::History;
use lazybreaker::Breaker;
use lazybreaker_dashboard::Dashboard;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let history = Arc::new(History::new(256));
    let build = |name: &str| {
        Arc::new(
            Breaker::builder()
                .name(name)
                .ready_to_trip(|c| c.consecutive_failures >= 3)
                .timeout(Duration::from_millis(800))
                .observer(Arc::clone(&history))
                .build(),
        )
    };
    let (payments, search, inventory) = (build("payments"), build("search"), build("inventory"));
    search.force_open();
    let router = Dashboard::new()
        .breaker(Arc::clone(&payments))
        .breaker(Arc::clone(&search))
        .breaker(Arc::clone(&inventory))
        .controls("change-me")
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!(
        "dashboard on http://{}/ (controls token: change-me)",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let keep = std::env::var_os("LAZYBREAKER_KEEP_RUNNING").is_some();
    let ticks = if keep { u64::MAX } else { 40 };
    for tick in 0..ticks {
        // Ticks 5 to 20: payments is down.
        let down = (5..20).contains(&(tick % 60));
        let _ = payments.execute(|| if down { Err("timeout") } else { Ok(()) });
        let _ = inventory.execute(|| Ok::<_, ()>(()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = payments.snapshot();
    println!("payments: {} (opened {} times)", s.state, s.times_opened);
    println!("recorded changes: {}", history.recorded());
    assert!(s.times_opened >= 1);
}
