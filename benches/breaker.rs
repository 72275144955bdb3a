//! Per-call cost of lazybreaker and its peers on the hot paths, in one criterion run:
//! `cargo bench --bench breaker`, see `benches/README.md`.
//!
//! Every implementation wraps the same `#[inline(never)]` operation
//! (`support::operation`), so the figures compare the breakers' overhead, not the work
//! around them. Groups are named `<scenario>_<threads>t`; inside a group each bench is one
//! implementation (or, for lazybreaker-only groups, one variant).

mod groups;
mod support;

use criterion::{criterion_group, criterion_main};

criterion_group! {
    name = benches;
    config = support::criterion();
    targets =
        groups::closed::success_1t,
        groups::closed::success_2t,
        groups::open::rejected_1t,
        groups::open::rejected_2t,
        groups::half_open::rejected_1t,
        groups::closed::windows_1t,
        groups::closed::windows_2t,
        groups::windows::success_1t,
        groups::windows::success_2t,
        groups::windows::one_pct_1t,
        groups::policies::success_1t,
        groups::closed::two_step_1t,
        groups::floor::floor_1t,
        groups::floor::floor_2t,
        groups::registry::lookup_1t,
        groups::registry::lookup_2t,
        groups::scale::registry_scale_1t,
        groups::throttle::healthy_1t,
        groups::throttle::healthy_2t,
        groups::throttle::shedding_1t,
        groups::throttle::shedding_2t,
        groups::retry::closed_1t,
        groups::retry::closed_2t,
}
criterion_main!(benches);
