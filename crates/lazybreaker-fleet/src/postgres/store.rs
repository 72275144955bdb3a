//! [`PostgresStore`]: the [`FleetStore`] on PostgreSQL. One row per breaker; each operation
//! one call of a function of the schema (`schema.sql`), atomic (the row locked for the step)
//! and one round trip; deadlines on the server's clock (`clock_timestamp()`); every operation
//! bounded by the store timeout; connections from a small pool, made lazily and made again
//! after a failure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Socket};

use crate::store::{Decision, FleetStore, Lease, SharedRecord, StoreError, Vote};
use lazybreaker::ConfigError;

/// The schema: the table and the four functions (see the [module documentation](super)).
const SCHEMA: &str = include_str!("schema.sql");

/// Taken while the schema is applied, so that instances starting together do not race on
/// `CREATE OR REPLACE FUNCTION` (an arbitrary constant: "lazybreak" in ASCII, truncated).
const SCHEMA_LOCK: i64 = 0x6c61_7a79_6272_6561;

/// The default timeout of one operation (connecting included).
const TIMEOUT: Duration = Duration::from_millis(50);
/// The longest timeout of one operation: PostgreSQL's longest `statement_timeout`,
/// 2^31 - 1 ms (about 24.8 days). A longer one (up to [`Duration::MAX`]) saturates to it.
const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);
/// The default number of connections.
const POOL_SIZE: usize = 4;

const READ: &str = "SELECT * FROM lazybreaker_fleet_read($1)";
const PUBLISH: &str = "SELECT * FROM lazybreaker_fleet_publish($1, $2, $3, $4, $5, $6, $7)";
const LEASE: &str = "SELECT lazybreaker_fleet_lease($1, $2, $3, $4, $5)";
const FINISH: &str = "SELECT * FROM lazybreaker_fleet_finish($1, $2, $3, $4, $5)";

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        StoreError::Backend(Box::new(error))
    }
}

/// One fleet's shared records in PostgreSQL: see the [module documentation](super).
///
/// # Examples
///
/// ```no_run
/// use lazybreaker_fleet::postgres::PostgresStore;
/// use lazybreaker_fleet::{Decision, FleetStore, Vote};
/// use std::time::Duration;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config: tokio_postgres::Config = "host=127.0.0.1 user=app dbname=app".parse()?;
/// let store = PostgresStore::new(config).with_timeout(Duration::from_millis(50));
/// let now = Duration::ZERO; // ignored: the server's clock governs
/// let record = store
///     .publish("payments", 4, Decision::Open(Duration::from_secs(30)), Vote::NONE, now)
///     .await?;
/// if !record.written {
///     // another instance got there first: follow `record`
/// }
/// # Ok(())
/// # }
/// # let _ = example;
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    pool_size: usize,
    /// Makes a pool of the given size on this store's server (its settings and TLS), whose
    /// sessions end a statement after the given time.
    make_pool: Arc<dyn Fn(usize, Duration) -> Pool + Send + Sync>,
    timeout: Duration,
    /// Whether the operations create the schema at first use.
    create_schema: bool,
    /// Whether the schema was applied (by this store or a clone).
    schema_ready: Arc<AtomicBool>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("timeout", &self.timeout)
            .field("pool_size", &self.pool.status().max_size)
            .field("create_schema", &self.create_schema)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// The schema the store creates at first use: one table, `lazybreaker_fleet`, and the
    /// functions `lazybreaker_fleet_{now,read,publish,lease,finish}`. Idempotent; apply it
    /// yourself (`psql -f`) where the application's role may not create objects, and build the
    /// store [`without_schema_creation`](Self::without_schema_creation).
    pub const SCHEMA: &'static str = SCHEMA;

    /// A store on the server `config` names, without TLS, not connected yet: the first
    /// operation connects. Up to 4 connections; each operation (waiting for a connection and
    /// connecting included) gives up after 50 ms.
    pub fn new(config: tokio_postgres::Config) -> Self {
        Self::with_tls(config, NoTls)
    }

    /// [`new`](Self::new), connecting through `tls` (for instance a
    /// `tokio-postgres-rustls` or `postgres-native-tls` connector).
    pub fn with_tls<T>(config: tokio_postgres::Config, tls: T) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let make_pool = move |size: usize, timeout: Duration| {
            // The server ends a statement that outlives the store timeout too (one held by a
            // lock, say), so that one the caller gave up on writes nothing later.
            let mut config = config.clone();
            let options = format!(
                "{} -c statement_timeout={}",
                config.get_options().unwrap_or_default(),
                bounded(timeout).as_millis().max(1)
            );
            config.options(options.trim_start());
            let manager = Manager::from_config(
                config,
                tls.clone(),
                ManagerConfig {
                    // A pooled connection is checked by its state only: a dead one fails its
                    // operation, which then drops it (no round trip per checkout).
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(Runtime::Tokio1)
                .build()
                .expect("a runtime is given, so the pool's timeouts can be set")
        };
        Self {
            pool: make_pool(POOL_SIZE, TIMEOUT),
            pool_size: POOL_SIZE,
            make_pool: Arc::new(make_pool),
            timeout: TIMEOUT,
            create_schema: true,
            schema_ready: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A store on the server `config` names: [`new`](Self::new) from a connection string
    /// (`"host=127.0.0.1 port=5432 user=app dbname=app"` or
    /// `"postgresql://app@127.0.0.1:5432/app"`).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `postgres` if the string does not parse (the parser's
    /// message is in the error, not the string: it may hold a password).
    pub fn from_url(config: &str) -> Result<Self, ConfigError> {
        config
            .parse::<tokio_postgres::Config>()
            .map(Self::new)
            .map_err(|e| {
                ConfigError::new(
                    "postgres",
                    format!("a connection string ({e})"),
                    "does not parse as a PostgreSQL connection string",
                )
            })
    }

    /// This store, whose every operation (waiting for a connection, connecting and the
    /// statement) gives up after `timeout` (zero: the default, 50 ms; at most about 24.8
    /// days, PostgreSQL's longest `statement_timeout`, which a longer one up to
    /// [`Duration::MAX`] saturates to), with a pool of its own whose sessions have the
    /// server end a statement after `timeout` too (`statement_timeout`); its clones made
    /// before keep theirs. A statement that runs out of time has its connection dropped, not
    /// reused.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = if timeout.is_zero() {
            TIMEOUT
        } else {
            bounded(timeout)
        };
        self.pool = (self.make_pool)(self.pool_size, self.timeout);
        self
    }

    /// This store, with a pool of its own of at most `size` connections (zero: the default,
    /// 4); its clones made before keep theirs. An operation that finds them all busy waits
    /// for one within the store timeout.
    #[must_use]
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = if size == 0 { POOL_SIZE } else { size };
        self.pool = (self.make_pool)(self.pool_size, self.timeout);
        self
    }

    /// This store, which expects the [schema](Self::SCHEMA) to be there already rather than
    /// creating it at its first operation.
    #[must_use]
    pub fn without_schema_creation(mut self) -> Self {
        self.create_schema = false;
        self
    }

    /// Opens every connection of the pool and applies the schema now (unless built
    /// [`without_schema_creation`](Self::without_schema_creation)), giving up after
    /// `within`: for start-up, where first operations bounded by a short store timeout might
    /// not have time for it (a new connection's authentication and the schema's statements
    /// take longer than a decision). The operations do the same lazily otherwise. `within`
    /// saturates as [`with_timeout`](Self::with_timeout)'s timeout does.
    ///
    /// # Errors
    ///
    /// [`StoreError`] if the server cannot be reached, refuses the login, or the schema
    /// cannot be applied within `within`.
    pub async fn prepare(&self, within: Duration) -> Result<(), StoreError> {
        let within = bounded(within);
        let patient = Self {
            timeout: within,
            ..self.clone()
        };
        let fill = async {
            // Every connection of the pool, held together so that each one is new.
            let mut held = Vec::with_capacity(self.pool_size);
            for _ in 0..self.pool_size {
                held.push(patient.connection().await?);
            }
            held.into_iter().for_each(Pooled::keep);
            Ok(())
        };
        tokio::time::timeout(within, fill)
            .await
            .map_err(|_| StoreError::Timeout(within))?
    }

    /// A connection from the pool (connecting if need be, waiting for one if all are busy),
    /// the schema applied on it if it was not yet: the caller bounds it by the store timeout.
    async fn connection(&self) -> Result<Pooled, StoreError> {
        let timeouts = Timeouts {
            wait: Some(self.timeout),
            create: Some(self.timeout),
            recycle: Some(self.timeout),
        };
        let client = self
            .pool
            .timeout_get(&timeouts)
            .await
            .map_err(|e| match e {
                deadpool_postgres::PoolError::Timeout(_) => StoreError::Timeout(self.timeout),
                deadpool_postgres::PoolError::Backend(e) => StoreError::from(e),
                other => StoreError::backend(other.to_string()),
            })?;
        let client = Pooled(Some(client));
        if self.create_schema && !self.schema_ready.load(Ordering::Acquire) {
            let apply =
                format!("BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA} COMMIT;");
            // On an error the guard drops the connection (it may be left in the transaction).
            client.get().batch_execute(&apply).await?;
            self.schema_ready.store(true, Ordering::Release);
        }
        Ok(client)
    }

    /// Runs `statement` with `params` (one round trip once the statement is prepared on the
    /// connection), answering its one row, within the store timeout. A connection found dead
    /// (the server restarted since it was pooled) or a schema found missing (a server
    /// restarted empty) is replaced or re-applied and the statement tried again, twice at
    /// most, within the same time: so a store that came back answers its first operation.
    async fn query(
        &self,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<tokio_postgres::Row, StoreError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let timed_out = |_| StoreError::Timeout(self.timeout);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let client = tokio::time::timeout_at(deadline, self.connection())
                .await
                .map_err(timed_out)??;
            let answer = tokio::time::timeout_at(deadline, async {
                let prepared = client.get().prepare_cached(statement).await?;
                client.get().query_one(&prepared, params).await
            })
            .await
            .map_err(timed_out)?;
            let e = match answer {
                Ok(row) => {
                    client.keep();
                    return Ok(row);
                }
                Err(e) => e,
            };
            // The guard drops the connection: it may be dead, or in a failed state.
            drop(client);
            // The server's own `statement_timeout` (the store timeout) ended it.
            if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
                return Err(StoreError::Timeout(self.timeout));
            }
            // Class 42: the table or a function is not there (or its prepared statements
            // went stale with it): apply the schema again.
            let schema_gone = e.code().is_some_and(|c| c.code().starts_with("42"));
            if schema_gone {
                self.schema_ready.store(false, Ordering::Release);
            }
            if attempts == 3 || !(e.is_closed() || schema_gone) {
                return Err(StoreError::from(e));
            }
        }
    }
}

/// A pooled connection that goes back to the pool only if [`keep`](Pooled::keep) says so:
/// dropped anywhere else (an error, a timeout, the caller giving up on the operation), it is
/// closed rather than handed to the next operation with a statement still in flight.
struct Pooled(Option<Object>);

impl Pooled {
    fn get(&self) -> &Object {
        self.0.as_ref().expect("held until dropped or kept")
    }

    /// Back to the pool: the operation finished cleanly.
    fn keep(mut self) {
        drop(self.0.take());
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(object) = self.0.take() {
            drop(Object::take(object));
        }
    }
}

/// A number for a `bigint` parameter (`u64` beyond `i64::MAX` saturates: no breaker writes
/// a generation or a duration that large).
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Microseconds, at most 2^53 ([`SharedRecord::span_us`]; the functions saturate the
/// deadlines they make of them at 2^53 too).
fn micros(d: Duration) -> i64 {
    big(SharedRecord::span_us(d))
}

/// A timeout, at most [`MAX_TIMEOUT`].
fn bounded(timeout: Duration) -> Duration {
    timeout.min(MAX_TIMEOUT)
}

impl FleetStore for PostgresStore {
    /// Refuses a name holding a NUL character (PostgreSQL's text cannot hold it).
    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        if name.contains('\0') {
            return Err(ConfigError::new(
                "name",
                format!("{name:?}"),
                "must not contain a NUL character (PostgreSQL text cannot hold it)",
            ));
        }
        Ok(())
    }

    /// `lazybreaker_fleet_read`: the record with the server time. One round trip.
    async fn read(&self, breaker: &str, _now: Duration) -> Result<SharedRecord, StoreError> {
        record(&self.query(READ, &[&breaker]).await?)
    }

    /// `lazybreaker_fleet_publish`, on the server's clock. One round trip.
    async fn publish(
        &self,
        breaker: &str,
        generation: u64,
        decision: Decision,
        vote: Vote<'_>,
        _now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let (open, open_for) = match decision {
            Decision::Open(d) => (true, d),
            Decision::Closed => (false, Duration::ZERO),
        };
        let row = self
            .query(
                PUBLISH,
                &[
                    &breaker,
                    &big(generation),
                    &open,
                    &micros(open_for),
                    &i64::from(vote.quorum.max(1)),
                    &micros(vote.window),
                    &vote.instance,
                ],
            )
            .await?;
        record(&row)
    }

    /// `lazybreaker_fleet_lease`, on the server's clock. One round trip.
    async fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
        _now: Duration,
    ) -> Result<Lease, StoreError> {
        let row = self
            .query(
                LEASE,
                &[
                    &breaker,
                    &big(generation),
                    &big(max_requests),
                    &micros(lease_for),
                    &holder,
                ],
            )
            .await?;
        Ok(Lease::from_answer(row.try_get(0)?))
    }

    /// `lazybreaker_fleet_finish`. One round trip.
    async fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
        _now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let row = self
            .query(
                FINISH,
                &[
                    &breaker,
                    &big(generation),
                    &big(max_requests),
                    &succeeded,
                    &holder,
                ],
            )
            .await?;
        record(&row)
    }
}

/// The record a function answered (generation, open, until, server time, written); a
/// negative number in it (a row edited by hand) is a [`StoreError::Invalid`].
fn record(row: &tokio_postgres::Row) -> Result<SharedRecord, StoreError> {
    SharedRecord::from_signed(
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
    )
}
