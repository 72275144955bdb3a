//! The outage lab: what a breaker saves, measured with real processes and real faults.
//!
//! Upstream replicas run as processes of this binary on 127.0.0.1 ([`upstream`],
//! [`replicas`]); each scenario ([`scenario`]) breaks one replica, or all of them, for a
//! span of the run and then lets them recover; a client sends an open-loop load (a fixed
//! arrival rate, each call with a deadline) through one strategy at a time ([`strategy`]):
//! no breaker, lazybreaker per node, lazybreaker's pool with a health check (and with a
//! retry, a hedge, slow start, or a concurrency limit per replica), tower's power of two choices over tower-resilience's
//! breaker (and with tower's retry budget or its hedge), failsafe per node, a naive retry, and HAProxy in front (and with its
//! retries, or `maxconn`). [`report`] reduces each run to what a user of the client sees, what the sick
//! node received and how many attempts per call the replicas received; [`plot`] draws them
//! over time. Nothing leaves the loopback; every process is
//! stopped when its run ends.
//!
//! What the lab cannot show: one machine (2 cores here) runs the client, the replicas and
//! the balancer, so latencies are loopback latencies and the load is modest (300 calls per
//! second by default); a real network adds delays, losses and partitions it does not make.

#![allow(unreachable_pub)] // a binary's library: `pub` is its own

pub mod client;
pub mod plot;
pub mod replicas;
pub mod report;
pub mod run;
pub mod scenario;
pub mod strategy;
pub mod upstream;
