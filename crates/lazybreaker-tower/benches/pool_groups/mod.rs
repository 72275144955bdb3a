//! The groups of `benches/pool.rs`: the pool's pick (`pick`), the tower service over it
//! against tower's balancer (`service`), both at 3 to 1 000 endpoints (`scale`), the
//! endpoints and services they call (`services`), and how futures are driven without a
//! runtime (`exec`, the file `benches/tower.rs` uses).

// Shared with `benches/tower.rs`, whose two-thread and tokio drivers this binary does not use.
#[allow(dead_code)]
#[path = "../tower_groups/exec.rs"]
pub(crate) mod exec;
pub(crate) mod pick;
pub(crate) mod scale;
pub(crate) mod service;
pub(crate) mod services;
