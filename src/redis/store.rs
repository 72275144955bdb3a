//! [`RedisStore`]: the shared record of one breaker's decision in Redis and the atomic
//! operations on it, each one round trip (one Lua script, atomic on the server), deadlines
//! read from the server's clock (`TIME`), every call bounded by the store timeout.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::Script;

/// What went wrong talking to the store. Every store error means the same thing to a
/// breaker: decide locally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer within the store timeout.
    #[error("the breaker store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store answered with an error, or the connection failed.
    #[error("the breaker store failed: {0}")]
    Redis(#[from] redis::RedisError),
}

/// The shared state of one breaker, as the store holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedRecord {
    /// Fences every update: a record only ever moves to a higher generation.
    pub generation: u64,
    /// Open until this server time (microseconds since the Unix epoch); `None`: closed.
    pub open_until_us: Option<u64>,
    /// The server's time when the record was read or written (microseconds since the epoch).
    pub server_now_us: u64,
    /// Whether the operation that returned the record wrote it: a publication that won, or
    /// the probe that completed a recovery. `false` for a read, and for a publication that
    /// found the record moved on (adopt it) or a vote short of its quorum.
    pub written: bool,
}

impl SharedRecord {
    /// How long the breaker stays open after the moment this record was read, in the
    /// server's time; `None` when closed or already past.
    pub fn open_for(&self) -> Option<Duration> {
        self.open_until_us
            .filter(|until| *until > self.server_now_us)
            .map(|until| Duration::from_micros(until - self.server_now_us))
    }
}

/// Publishes a decision at generation G, unless the record has moved on: "open for open_us
/// from now" (a trip) or "closed" (a recovery, open_us 0). The one atomic
/// compare-and-set of a decision. With a quorum above 1 a trip is a vote of instance
/// ARGV[7], and opens the record only once enough instances voted. Returns the record as it
/// stands afterwards (the new one, the newer one the caller must adopt, or the older one a
/// vote left unchanged) with the server time.
const PUBLISH: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local gen = tonumber(ARGV[1])
local open_us = tonumber(ARGV[2])
local ttl_ms = tonumber(ARGV[3])
local quorum = tonumber(ARGV[4])
local window_us = tonumber(ARGV[5])
local state = ARGV[6]
local stored = tonumber(redis.call('HGET', key, 'generation') or '0')
local write = stored < gen
-- A trip with a quorum: a vote of this instance, and the record opens once `quorum`
-- distinct instances voted within the window.
if write and state == 'open' and quorum > 1 then
  redis.call('ZADD', KEYS[3], now, ARGV[7])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window_us)
  redis.call('PEXPIRE', KEYS[3], math.ceil(window_us / 1000) + 1)
  write = redis.call('ZCARD', KEYS[3]) >= quorum
end
if write then
  local deadline = 0
  if state == 'open' then deadline = now + open_us end
  redis.call('HSET', key, 'generation', gen, 'state', state, 'until', deadline, 'ok', 0)
  redis.call('DEL', KEYS[2], KEYS[3])
end
-- Kept past the open period: an expired record would read as closed, generation 0.
local deadline = tonumber(redis.call('HGET', key, 'until') or '0')
local keep_ms = ttl_ms
if deadline > now then keep_ms = keep_ms + math.ceil((deadline - now) / 1000) end
if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, keep_ms) end
local r = redis.call('HMGET', key, 'generation', 'state', 'until')
local written = 0
if write then written = 1 end
return {tonumber(r[1] or '0'), r[2] or 'closed', tonumber(r[3] or '0'), now, written}
";

/// Reads the record with the server time; an absent record reads as closed, generation 0.
const READ: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local r = redis.call('HMGET', KEYS[1], 'generation', 'state', 'until')
return {tonumber(r[1] or '0'), r[2] or 'closed', tonumber(r[3] or '0'), now, 0}
";

/// Ends half-open probe ARGV[3] of generation G: gives its lease back and, if it succeeded,
/// counts the success; the `max` successes of one half-open period close the record at
/// G+1 (the fleet's recovery, written by the probe that completed it). Returns the record
/// as it stands, and whether this call closed it.
const FINISH_PROBE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local gen = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local ttl_ms = tonumber(ARGV[3])
local succeeded = ARGV[4] == '1'
local key = KEYS[1]
local removed = redis.call('ZREM', KEYS[2], ARGV[5])
local r = redis.call('HMGET', key, 'generation', 'state', 'until')
local stored = tonumber(r[1] or '0')
local written = 0
if removed == 1 and succeeded and stored == gen and r[2] == 'open' then
  if redis.call('HINCRBY', key, 'ok', 1) >= max then
    redis.call('HSET', key, 'generation', gen + 1, 'state', 'closed', 'until', 0, 'ok', 0)
    redis.call('DEL', KEYS[2], KEYS[3])
    redis.call('PEXPIRE', key, ttl_ms)
    written = 1
    r = redis.call('HMGET', key, 'generation', 'state', 'until')
  end
end
return {tonumber(r[1] or '0'), r[2] or 'closed', tonumber(r[3] or '0'), now, written}
";

/// Takes one of `max` half-open probe leases for generation G, each expiring after
/// `lease_us` unless released: 1 if taken, 0 if all are held, -1 if the record is not
/// half-open at G (another generation, or still within its open period). A lease whose
/// holder died expires by itself.
const LEASE_PROBE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local gen = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local lease_us = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local r = redis.call('HMGET', KEYS[1], 'generation', 'state', 'until')
local stored = tonumber(r[1] or '0')
-- Half-open only: open at this generation, and past its open period (server time).
if stored ~= gen or r[2] ~= 'open' or now < tonumber(r[3] or '0') then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= max then return 0 end
redis.call('ZADD', KEYS[2], now + lease_us, ARGV[5])
redis.call('PEXPIRE', KEYS[2], ttl_ms)
return 1
";

/// A trip's vote, for [`RedisStore::publish_open_voted`]: the record opens once `quorum`
/// distinct instances voted within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote<'a> {
    /// How many distinct instances must have voted (1: the trip opens the record at once).
    pub quorum: u32,
    /// How long a vote counts.
    pub window: Duration,
    /// The voting instance, unique in the fleet.
    pub instance: &'a str,
}

impl Vote<'_> {
    /// No vote: a trip opens the record at once.
    pub(super) const NONE: Vote<'static> = Vote {
        quorum: 1,
        window: Duration::ZERO,
        instance: "",
    };
}

/// The outcome of [`RedisStore::lease_probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// A probe slot was taken; release it with [`RedisStore::release_probe`].
    Taken,
    /// Every probe slot of this half-open period is held.
    Full,
    /// The record is not half-open at this generation (another generation, or still open
    /// in the server's time): the caller's view is stale.
    Stale,
}

/// One breaker's shared record in Redis: see the [module documentation](crate::redis).
///
/// # Examples
///
/// ```no_run
/// use lazybreaker::redis::{Lease, RedisStore};
/// use std::time::Duration;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let store = RedisStore::connect(&client, Duration::from_millis(50), Duration::from_secs(600)).await?;
/// // This process tripped at generation 4: publish it, or adopt what the fleet decided.
/// let record = store.publish_open("payments", 4, Duration::from_secs(30)).await?;
/// if record.generation != 4 {
///     // another instance got there first: follow `record`
/// }
/// // Later, half-open: take one of the fleet's two probe slots.
/// if store.lease_probe("payments", 4, 2, Duration::from_secs(5), "host-a/1").await? == Lease::Taken {
///     // send the probe, then
///     store.release_probe("payments", "host-a/1").await?;
/// }
/// # Ok(())
/// # }
/// # let _ = example;
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: MultiplexedConnection,
    timeout: Duration,
    key_ttl: Duration,
    publish: Script,
    read: Script,
    lease: Script,
    finish: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("timeout", &self.timeout)
            .field("key_ttl", &self.key_ttl)
            .finish_non_exhaustive()
    }
}

/// The keys of `breaker`: its record, its probe leases and its trip votes, in one hash slot.
fn keys(breaker: &str) -> [String; 3] {
    [
        format!("lazybreaker:{{{breaker}}}:state"),
        format!("lazybreaker:{{{breaker}}}:probes"),
        format!("lazybreaker:{{{breaker}}}:votes"),
    ]
}

/// Microseconds, at most 2^52 (about 142 years): Lua numbers are doubles, and Redis turns
/// them into 64-bit integers; larger values would not come back whole.
fn micros(d: Duration) -> u64 {
    const MAX: u64 = 1 << 52;
    u64::try_from(d.as_micros()).unwrap_or(MAX).min(MAX)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisStore {
    /// A store on `client`'s server, connecting now (within `timeout`), whose every
    /// operation gives up after `timeout`; keys expire `key_ttl` after their last update.
    ///
    /// # Errors
    ///
    /// [`StoreError`] if the server cannot be reached within `timeout`.
    pub async fn connect(
        client: &redis::Client,
        timeout: Duration,
        key_ttl: Duration,
    ) -> Result<Self, StoreError> {
        let connection = tokio::time::timeout(timeout, client.get_multiplexed_async_connection())
            .await
            .map_err(|_| StoreError::Timeout(timeout))??;
        Ok(Self {
            connection,
            timeout,
            key_ttl,
            publish: Script::new(PUBLISH),
            read: Script::new(READ),
            lease: Script::new(LEASE_PROBE),
            finish: Script::new(FINISH_PROBE),
        })
    }

    /// Runs `script` on `breaker`'s keys within the store timeout, with `numbers` then
    /// `strings` as its arguments.
    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        breaker: &str,
        numbers: &[u64],
        strings: &[&str],
    ) -> Result<T, StoreError> {
        let [state, probes, votes] = keys(breaker);
        let mut invocation = script.key(state);
        invocation.key(probes).key(votes);
        for arg in numbers {
            invocation.arg(*arg);
        }
        for arg in strings {
            invocation.arg(*arg);
        }
        let mut connection = self.connection.clone();
        tokio::time::timeout(self.timeout, invocation.invoke_async(&mut connection))
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))?
            .map_err(StoreError::from)
    }

    /// Publishes a trip: open for `open_for` from now (server time) at `generation`, unless
    /// the record is at `generation` or later already; either way, the record as it stands
    /// (adopt it if its generation is not yours). One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: decide locally.
    pub async fn publish_open(
        &self,
        breaker: &str,
        generation: u64,
        open_for: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let vote = Vote::NONE;
        self.publish(breaker, generation, "open", open_for, vote)
            .await
    }

    /// Publishes a trip that needs `vote.quorum` distinct instances: this one's vote is
    /// counted, and the record opens (as [`publish_open`](Self::publish_open) opens it) once
    /// `quorum` instances voted within `vote.window` at this generation. The record comes
    /// back unchanged (at an older generation than `generation`) while the vote is short.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: decide locally.
    pub async fn publish_open_voted(
        &self,
        breaker: &str,
        generation: u64,
        open_for: Duration,
        vote: Vote<'_>,
    ) -> Result<SharedRecord, StoreError> {
        self.publish(breaker, generation, "open", open_for, vote)
            .await
    }

    /// Publishes a recovery: closed at `generation`, unless the record moved on. One round
    /// trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: decide locally.
    pub async fn publish_closed(
        &self,
        breaker: &str,
        generation: u64,
    ) -> Result<SharedRecord, StoreError> {
        let vote = Vote::NONE;
        self.publish(breaker, generation, "closed", Duration::ZERO, vote)
            .await
    }

    /// The [`PUBLISH`] script: `state` at `generation`, open for `open_for` if `"open"`.
    pub(super) async fn publish(
        &self,
        breaker: &str,
        generation: u64,
        state: &str,
        open_for: Duration,
        vote: Vote<'_>,
    ) -> Result<SharedRecord, StoreError> {
        let numbers = [
            generation,
            micros(open_for),
            millis(self.key_ttl),
            u64::from(vote.quorum.max(1)),
            micros(vote.window),
        ];
        let reply: Reply = self
            .run(&self.publish, breaker, &numbers, &[state, vote.instance])
            .await?;
        Ok(record(reply))
    }

    /// The record as it stands, with the server time (closed at generation 0 if there is
    /// none: a record that vanished reads as a fresh breaker). One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: decide locally.
    pub async fn read(&self, breaker: &str) -> Result<SharedRecord, StoreError> {
        let reply: Reply = self.run(&self.read, breaker, &[], &[]).await?;
        Ok(record(reply))
    }

    /// Takes one of `max_requests` fleet-wide probe leases of the half-open period at
    /// `generation`, held by `holder` (unique per call) for at most `lease_for`. One round
    /// trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: decide locally.
    pub async fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
    ) -> Result<Lease, StoreError> {
        let args = [
            generation,
            max_requests,
            micros(lease_for),
            millis(self.key_ttl),
        ];
        let taken: i64 = self.run(&self.lease, breaker, &args, &[holder]).await?;
        Ok(match taken {
            1 => Lease::Taken,
            0 => Lease::Full,
            _ => Lease::Stale,
        })
    }

    /// Ends the half-open probe `holder` of the period at `generation`: gives its lease back
    /// and, if it `succeeded`, counts the success; the probe whose success is the
    /// `max_requests`-th of the period closes the record at `generation + 1` (then the
    /// record comes back with [`written`](SharedRecord::written) set). One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: the lease then expires by itself, and the success is not counted.
    pub async fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
    ) -> Result<SharedRecord, StoreError> {
        let numbers = [
            generation,
            max_requests,
            millis(self.key_ttl),
            u64::from(succeeded),
        ];
        let reply: Reply = self.run(&self.finish, breaker, &numbers, &[holder]).await?;
        Ok(record(reply))
    }

    /// Gives a probe lease back (the probe ended). One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError`]: the lease then expires by itself.
    pub async fn release_probe(&self, breaker: &str, holder: &str) -> Result<(), StoreError> {
        let [_, probes, _] = keys(breaker);
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("ZREM");
        command.arg(probes).arg(holder);
        let release = command.query_async::<i64>(&mut connection);
        tokio::time::timeout(self.timeout, release)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))??;
        Ok(())
    }
}

/// What the scripts answer: generation, state, until, server time, written (0 or 1).
type Reply = (u64, Option<String>, u64, u64, u8);

fn record((generation, state, until, now, written): Reply) -> SharedRecord {
    SharedRecord {
        generation,
        open_until_us: (state.as_deref() == Some("open")).then_some(until),
        server_now_us: now,
        written: written == 1,
    }
}
