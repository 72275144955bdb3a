//! The fleet's store on PostgreSQL (feature `postgres`): [`PostgresStore`], a
//! [`FleetStore`](crate::FleetStore) whose every operation is one call of a function of its
//! schema, for a fleet whose operators run PostgreSQL rather than Redis.
//!
//! The protocol (what is shared, when, what a store outage does, the quorum against one bad
//! instance) is the [fleet's](crate), and holds for every store; what PostgreSQL adds:
//!
//! - **One row per breaker** in the table `lazybreaker_fleet`, and four functions, one per
//!   operation ([`PostgresStore::SCHEMA`], created at the first operation, idempotent):
//!
//! ```text
//! name text PRIMARY KEY     the breaker's name
//! generation bigint         fences every update: only ever moves up
//! open boolean              open (until until_us, then half-open) or closed
//! until_us bigint           the open period's end, server time (us since the Unix epoch)
//! ok bigint                 probe successes of the half-open period
//! probes jsonb              half-open probe leases: holder -> expiry (us)
//! votes jsonb               trip votes toward a quorum: instance -> time of the vote (us)
//! ```
//!
//! - **One round trip per operation**: a read, a publication (the compare-and-set fenced by
//!   the generation, with the quorum's vote counted in the same call), a lease and the end of
//!   a probe are each one statement calling a function that locks the breaker's row
//!   (`SELECT .. FOR UPDATE`, which under Read Committed waits for a concurrent writer and
//!   then reads its committed row) and writes it back: atomic on the server. Functions rather
//!   than one `UPDATE .. WHERE generation < $2 RETURNING ..`: a record that does not exist
//!   yet, the vote set and the answer when nothing is written (the record to adopt) need more
//!   than one plain statement, and a second round trip would let another instance in between.
//! - **One timeline**: every deadline is the server's `clock_timestamp()`, never an
//!   instance's clock, so clock skew between hosts does not matter.
//! - **Connections** from a small pool (`deadpool-postgres`, 4 by default), made at the first
//!   operation and again after a failure (a connection that failed or ran out of time is
//!   dropped, never reused); every operation, waiting for a connection included, is bounded
//!   by the store timeout. A wrong address, password or database only degrades the breaker to
//!   local decisions: [`check_store`](crate::SharedBreaker::check_store) at start-up returns
//!   the error instead.
//! - **A row edited by hand** into something no breaker writes (a negative or huge
//!   generation, an absurd deadline) is a [`StoreError::Invalid`](crate::StoreError): the
//!   breakers decide locally, as for any store error, until it is repaired.
//!
//! Rows are not deleted: a breaker nobody uses any more leaves its row (a hundred bytes)
//! behind, where Redis lets its keys expire.
//!
//! # Examples
//!
//! ```no_run
//! use lazybreaker::Breaker;
//! use lazybreaker_fleet::postgres::PostgresStore;
//! use lazybreaker_fleet::SharedBreaker;
//! use std::time::Duration;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresStore::from_url("host=127.0.0.1 user=app dbname=app")?
//!     .with_timeout(Duration::from_millis(50));
//! // Connect and create the table at start-up, with time for both (the first decision,
//! // bounded by the store timeout, might not have it).
//! store.prepare(Duration::from_secs(5)).await?;
//! let shared = SharedBreaker::builder(store)
//!     .store_timeout(Duration::from_millis(50))
//!     .build(Breaker::builder().name("payments"))?;
//! // Nothing is connected yet: at start-up, check the address and the password (one read).
//! shared.check_store().await?;
//! let reply = shared.execute(|| async { Ok::<_, std::io::Error>("paid") }).await;
//! assert_eq!(reply.unwrap(), "paid");
//! # Ok(())
//! # }
//! # let _ = example;
//! ```

mod store;

pub use store::PostgresStore;
