//! The integrations' paths as a user of the whole family names them: each crate's main
//! items, reached from one test of the docs crate (the core's own tests depend on none of them).

use std::sync::Arc;

use lazybreaker::{Breaker, Registry};

#[test]
fn every_integration_is_reached_by_its_crate_path() {
    let breaker = Arc::new(Breaker::builder().name("family").build());
    let _layer = lazybreaker_tower::BreakerLayer::new(Arc::clone(&breaker));
    let registry = Arc::new(Registry::new(|_: &String| Breaker::builder()));
    let _middleware = lazybreaker_reqwest::BreakerMiddleware::new(Arc::clone(&registry));
    let _rules = lazybreaker_grpc::status_classifier();
    let store = lazybreaker_fleet::MemoryStore::new();
    let _shared: lazybreaker_fleet::SharedBreaker<lazybreaker_fleet::MemoryStore> =
        lazybreaker_fleet::SharedBreaker::builder(store)
            .build(Breaker::builder().name("family"))
            .unwrap();
    let _redis: Option<lazybreaker_fleet::redis::RedisStore> = None;
    let _dashboard = lazybreaker_dashboard::Dashboard::new().breaker(breaker);
    let mut trace = lazybreaker_replay::Trace::new();
    trace.push(
        std::time::Duration::ZERO,
        std::time::Duration::from_millis(1),
        lazybreaker::policy::Outcome::Success,
    );
    let report = lazybreaker_replay::replay(&trace, &lazybreaker::config::Settings::default());
    assert_eq!(report.calls, 1);
    assert_eq!(report.admitted, 1);
}

#[test]
fn every_integration_retries_by_its_crate_path() {
    let retry = lazybreaker::retry::Retry::new(3).unwrap();
    let layer = lazybreaker_tower::RetryLayer::http(retry.clone());
    assert_eq!(layer.policy().retry().max_attempts(), 3);
    let middleware = lazybreaker_reqwest::RetryMiddleware::new(retry);
    assert_eq!(middleware.policy().max_attempts(), 3);
    let grpc = lazybreaker_grpc::RetryLayer::from_service_config(
        r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}"#,
    )
    .unwrap();
    let bucket = grpc.config().throttling().expect("the throttling's bucket");
    assert_eq!(bucket.max_tokens(), 10.0);
}

#[test]
fn every_integration_hedges_by_its_crate_path() {
    let hedge = lazybreaker::retry::Hedge::after(std::time::Duration::from_millis(20));
    let layer = lazybreaker_tower::HedgeLayer::http(hedge);
    assert_eq!(layer.hedge().attempts(), 2);
    let grpc = lazybreaker_grpc::HedgeLayer::from_service_config(
        r#"{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 3}}]}"#,
    )
    .unwrap();
    let hedging = grpc.config().hedging("/any.Service/Method").unwrap();
    assert_eq!(hedging.hedge().attempts(), 3);
}

#[test]
fn every_integration_limits_by_its_crate_path() {
    let layer = lazybreaker_tower::LimitLayer::try_new(lazybreaker::limit::Gradient2::new())
        .expect("Netflix's defaults");
    assert_eq!(layer.limiter().limit(), 20);
    let pool = lazybreaker::pool::Pool::new(|_: &String| Breaker::builder())
        .try_limit(lazybreaker::limit::Vegas::new())
        .expect("Netflix's defaults");
    assert_eq!(pool.limit_algorithm().map(|a| a.limit()), Some(20));
}
