//! What a page's `?filter=` costs, counted in bytes allocated rather than timed: the filter
//! comes from the query string, as long as a client likes, and anyone who can reach the page
//! can send it. Its cost must be the filter's length once, not once per breaker.
//!
//! A counting global allocator (`stats_alloc`; the package forbids `unsafe_code`) counts the
//! whole process; this target has its own `main` and a current-thread runtime, so while a
//! request is counted nothing else runs.

#[cfg(not(loom))]
mod cost {
    use std::alloc::System;
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use lazybreaker::Registry;
    use lazybreaker_dashboard::Dashboard;
    use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
    use tower::ServiceExt;

    #[global_allocator]
    static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

    /// The page for `query`, and the bytes its request allocated.
    fn page(router: &axum::Router, query: &str) -> (String, usize) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let request = Request::get(format!("/?filter={query}"))
            .body(Body::empty())
            .expect("a request");
        let region = Region::new(GLOBAL);
        let response = runtime
            .block_on(router.clone().oneshot(request))
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        let body = runtime
            .block_on(response.into_body().collect())
            .expect("a body")
            .to_bytes();
        let bytes = region.change().bytes_allocated;
        (String::from_utf8(body.to_vec()).expect("UTF-8"), bytes)
    }

    /// Item 4: a 20 KB filter over 1 000 breakers allocates about what a short one does,
    /// plus the filter itself a few times (decoded, lowercased, echoed escaped in its field);
    /// before, it was lowercased once per row: 20 MB, seconds of CPU for one GET.
    pub(super) fn item_4_a_long_filter_costs_its_length_once_not_once_per_breaker() {
        let registry = Arc::new(Registry::new(|_: &String| lazybreaker::Breaker::builder()));
        for i in 0..1_000 {
            registry.breaker(&format!("host-{i:04}"));
        }
        let router = Dashboard::new().registry(registry).router();
        let (_, warm) = page(&router, "warm-up");
        let (short_page, short) = page(&router, "zz");
        let long_filter = "%C3%89".repeat(10_000); // "É" 10 000 times: 20 KB decoded
        let (long_page, long) = page(&router, &long_filter);
        assert!(!short_page.contains("host-0001") && !long_page.contains("host-0001"));
        let extra = long.saturating_sub(short);
        println!(
            "bytes allocated per page over 1 000 breakers: warm-up {warm}, short filter {short}, \
             20 KB filter {long} (+{extra})"
        );
        assert!(
            extra < 400_000,
            "a 20 KB filter cost {extra} bytes more than a short one"
        );
        let (one, _) = page(&router, "HOST-0001");
        assert!(one.contains("host-0001") && !one.contains("host-0002"));
    }
}

#[cfg(not(loom))]
fn main() {
    cost::item_4_a_long_filter_costs_its_length_once_not_once_per_breaker();
    println!("filter_cost: 1 check passed");
}

#[cfg(loom)]
fn main() {}
