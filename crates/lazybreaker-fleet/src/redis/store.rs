//! [`RedisStore`]: the [`FleetStore`] on Redis. The shared record of one breaker's decision
//! and the atomic operations on it, each one round trip (one Lua script, atomic on the
//! server), deadlines read from the server's clock (`TIME`), every call bounded by the store
//! timeout; the connection is made lazily and made again after a failure.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::Script;

use crate::store::{Decision, FleetStore, Lease, SharedRecord, StoreError, Vote};
use lazybreaker::ConfigError;
use parking_lot::Mutex;

/// The error code of a script's refusal of a record no breaker writes ([`CHECK`]).
const INVALID: &str = "LAZYBREAKER_INVALID";

/// A script's refusal of a record no breaker writes (a field of its hash that is not a whole
/// number from 0 to 2^53 in digits) is [`StoreError::Invalid`]; any other error is
/// [`StoreError::Backend`].
impl From<redis::RedisError> for StoreError {
    fn from(error: redis::RedisError) -> Self {
        if error.code() == Some(INVALID) {
            let what = error.detail().unwrap_or("a number no breaker writes");
            return StoreError::Invalid(what.to_owned());
        }
        StoreError::Backend(Box::new(error))
    }
}

/// What every script starts with: `invalid(key)` says what is wrong with the numeric fields
/// of the record at `key` (`generation`, `until`, `ok`), or `nil`. Each must be what a breaker
/// writes: a whole number from 0 to 2^53, in digits. Anything else is refused (the script
/// answers the error `LAZYBREAKER_INVALID`, a [`StoreError::Invalid`], and writes nothing)
/// rather than read: a fraction (`2.5`) would be compared whole by the script but truncated
/// in its reply (so every lease would answer "stale" for ever), and an exponent, a sign or a
/// number a double cannot hold would not come back as written either.
const CHECK: &str = r#"
local function invalid(key)
  local names = {'generation', 'until', 'ok'}
  local r = redis.call('HMGET', key, names[1], names[2], names[3])
  for i = 1, 3 do
    local v = r[i]
    if v and (not string.match(v, '^%d+$') or string.len(v) > 16
              or (string.len(v) == 16 and v > '9007199254740992')) then
      return 'field ' .. names[i] .. ' ' .. string.format('%q', string.sub(v, 1, 40))
        .. ' is not a whole number from 0 to 2^53'
    end
  end
  return nil
end
local bad = invalid(KEYS[1])
if bad then return redis.error_reply('LAZYBREAKER_INVALID ' .. bad) end
"#;

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
  if state == 'open' then deadline = math.min(now + open_us, 9007199254740992) end
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
redis.call('ZADD', KEYS[2], math.min(now + lease_us, 9007199254740992), ARGV[5])
redis.call('PEXPIRE', KEYS[2], ttl_ms)
return 1
";

/// One breaker's shared record in Redis: see the [module documentation](crate::redis).
///
/// # Examples
///
/// Its operations are [`FleetStore`]'s (the caller's clock reading they are given is
/// ignored: deadlines are in the server's time). Clones share one connection, made at the
/// first operation (or by [`connect`](Self::connect)) and made again at the next one after
/// a failure.
///
/// ```no_run
/// use lazybreaker_fleet::{Decision, FleetStore, Lease, Vote};
/// use lazybreaker_fleet::redis::RedisStore;
/// use std::time::Duration;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let store = RedisStore::connect(&client, Duration::from_millis(50), Duration::from_secs(600)).await?;
/// let now = Duration::ZERO; // ignored: the server's clock governs
/// // This process tripped at generation 4: publish it, or adopt what the fleet decided.
/// let open = Decision::Open(Duration::from_secs(30));
/// let record = store.publish("payments", 4, open, Vote::NONE, now).await?;
/// if record.generation != 4 {
///     // another instance got there first: follow `record`
/// }
/// // Later, half-open: take one of the fleet's two probe slots.
/// let holder = "host-a/1";
/// if store.lease_probe("payments", 4, 2, Duration::from_secs(5), holder, now).await? == Lease::Taken {
///     // send the probe, then
///     store.finish_probe("payments", 4, holder, true, 2, now).await?;
/// }
/// # Ok(())
/// # }
/// # let _ = example;
/// ```
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    /// The connection, shared by the clones: `None` until the first operation and after a
    /// failure (the next operation connects again).
    connection: Arc<Mutex<Option<MultiplexedConnection>>>,
    timeout: Duration,
    key_ttl: Duration,
    publish: Script,
    read: Script,
    lease: Script,
    finish: Script,
}

/// The default timeout of one operation and of connecting.
const TIMEOUT: Duration = Duration::from_millis(50);
/// The default time the keys live after their last update.
const KEY_TTL: Duration = Duration::from_secs(3600);

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

/// Microseconds, at most 2^53 ([`SharedRecord::span_us`]): Lua numbers are doubles, exact
/// up to 2^53, and the scripts saturate the deadlines they make of them there.
fn micros(d: Duration) -> u64 {
    SharedRecord::span_us(d)
}

/// Milliseconds, from 1 to 2^53 us in ms (about 285 years): a key's time to live, which
/// `PEXPIRE` takes only as a whole number that does not overflow the server's clock.
fn millis(d: Duration) -> u64 {
    (SharedRecord::span_us(d) / 1000).max(1)
}

/// `script`, after the check of the record every script starts with ([`CHECK`]).
fn checked(script: &str) -> Script {
    Script::new(&[CHECK, script].concat())
}

/// A store that connects at its first operation, with the defaults of
/// [`RedisStore::new`].
impl From<redis::Client> for RedisStore {
    fn from(client: redis::Client) -> Self {
        Self::new(client)
    }
}

impl RedisStore {
    /// A store on `client`'s server, not connected yet: the first operation connects. Each
    /// operation (connecting included) gives up after 50 ms; keys expire an hour after their
    /// last update (never during an open period).
    pub fn new(client: redis::Client) -> Self {
        Self {
            client,
            connection: Arc::new(Mutex::new(None)),
            timeout: TIMEOUT,
            key_ttl: KEY_TTL,
            publish: checked(PUBLISH),
            read: checked(READ),
            lease: checked(LEASE_PROBE),
            finish: checked(FINISH_PROBE),
        }
    }

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
        let mut store = Self::new(client.clone());
        store.set_timeout(timeout);
        store.set_key_ttl(key_ttl);
        store.connection().await?;
        Ok(store)
    }

    /// This store, whose every operation (connecting included) gives up after `timeout`
    /// (zero: the default, 50 ms).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.set_timeout(timeout);
        self
    }

    /// This store, whose keys live `key_ttl` after their last update, never less than an
    /// open period (zero: the default, one hour; at most 2^53 us, about 285 years, which
    /// [`Duration::MAX`] saturates to).
    pub fn with_key_ttl(mut self, key_ttl: Duration) -> Self {
        self.set_key_ttl(key_ttl);
        self
    }

    /// Each operation gives up after `timeout` (zero: the default, 50 ms).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = if timeout.is_zero() { TIMEOUT } else { timeout };
    }

    /// The keys live `key_ttl` after their last update (zero: the default, one hour).
    pub(crate) fn set_key_ttl(&mut self, key_ttl: Duration) {
        self.key_ttl = if key_ttl.is_zero() { KEY_TTL } else { key_ttl };
    }

    /// The connection, connecting if there is none (within the timeout).
    async fn connection(&self) -> Result<MultiplexedConnection, StoreError> {
        let connected = self.connection.lock().clone();
        if let Some(connection) = connected {
            return Ok(connection);
        }
        let connect = self.client.get_multiplexed_async_connection();
        let connection = tokio::time::timeout(self.timeout, connect)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))??;
        *self.connection.lock() = Some(connection.clone());
        Ok(connection)
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
        let mut connection = self.connection().await?;
        let answer = tokio::time::timeout(self.timeout, invocation.invoke_async(&mut connection))
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))
            .and_then(|answer| answer.map_err(StoreError::from));
        if matches!(answer, Err(StoreError::Backend(_) | StoreError::Timeout(_))) {
            // Connect again at the next operation: this connection may be dead (one that
            // carried a script's refusal of the record is not).
            *self.connection.lock() = None;
        }
        answer
    }
}

impl FleetStore for RedisStore {
    /// Refuses `{` and `}`: they would break the Redis Cluster hash tag.
    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        if name.contains(['{', '}']) {
            return Err(ConfigError::new(
                "name",
                format!("{name:?}"),
                "must not contain `{` or `}` (the Redis Cluster hash tag)",
            ));
        }
        Ok(())
    }

    /// One Lua script (`PUBLISH`), on the server's clock. One round trip.
    async fn publish(
        &self,
        breaker: &str,
        generation: u64,
        decision: Decision,
        vote: Vote<'_>,
        _now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let (state, open_for) = match decision {
            Decision::Open(d) => ("open", d),
            Decision::Closed => ("closed", Duration::ZERO),
        };
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
        record(reply)
    }

    /// One Lua script (`READ`): the record with the server time. One round trip.
    async fn read(&self, breaker: &str, _now: Duration) -> Result<SharedRecord, StoreError> {
        let reply: Reply = self.run(&self.read, breaker, &[], &[]).await?;
        record(reply)
    }

    /// One Lua script (`LEASE_PROBE`), on the server's clock. One round trip.
    async fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
        _now: Duration,
    ) -> Result<Lease, StoreError> {
        let args = [
            generation,
            max_requests,
            micros(lease_for),
            millis(self.key_ttl),
        ];
        let taken: i64 = self.run(&self.lease, breaker, &args, &[holder]).await?;
        Ok(Lease::from_answer(taken))
    }

    /// One Lua script (`FINISH_PROBE`). One round trip.
    async fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
        _now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let numbers = [
            generation,
            max_requests,
            millis(self.key_ttl),
            u64::from(succeeded),
        ];
        let reply: Reply = self.run(&self.finish, breaker, &numbers, &[holder]).await?;
        record(reply)
    }
}

/// What the scripts answer: generation, state, until, server time, written (0 or 1).
/// Read signed: a negative number (a field set by hand) is refused, never wrapped.
type Reply = (i64, Option<String>, i64, i64, i64);

/// The record a script answered; a negative number in it is a [`StoreError::Invalid`].
fn record((generation, state, until, now, written): Reply) -> Result<SharedRecord, StoreError> {
    let open = state.as_deref() == Some("open");
    SharedRecord::from_signed(generation, open, until, now, written == 1)
}
