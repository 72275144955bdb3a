//! [`ServiceConfig`]: the retry part of a gRPC service config (proposal A6), read from the
//! JSON gRPC users write, validated as gRPC validates it, every error naming its path.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::retry::{Hedge, Retry, RetryBudget, TokenBucket};
use lazybreaker::ConfigError;
use serde_json::{Map, Value};
use tonic::Code;

/// gRPC's ceiling on `maxAttempts`: larger values are treated as 5 (A6).
pub(crate) const MAX_ATTEMPTS: u32 = 5;

/// The retry part of a gRPC [service config](https://github.com/grpc/grpc/blob/master/doc/service_config.md):
/// a [`RetryPolicy`] per method (`methodConfig[].retryPolicy`, matched as gRPC matches
/// names), and the channel's retry throttling (`retryThrottling`), a [`TokenBucket`] every
/// method shares.
///
/// Read from the JSON a gRPC user writes ([`from_json`](Self::from_json), or `str::parse`),
/// and validated as gRPC's retry design (proposal A6) says:
///
/// | field | valid |
/// |---|---|
/// | `retryPolicy.maxAttempts` | an integer above 1; above 5 it is 5 |
/// | `retryPolicy.initialBackoff`, `maxBackoff` | a duration above zero, in proto-JSON's form (`"0.1s"`, `"1.5s"`, `"2s"`) |
/// | `retryPolicy.backoffMultiplier` | a number above zero |
/// | `retryPolicy.retryableStatusCodes` | a non-empty array of codes, by name (any case: `"UNAVAILABLE"`, `"unavailable"`) or number (`14`) |
/// | `hedgingPolicy.maxAttempts` | an integer above 1; above 5 it is 5 |
/// | `hedgingPolicy.hedgingDelay` | a duration, zero included (`"0s"`, the default: every attempt at once) |
/// | `hedgingPolicy.nonFatalStatusCodes` | an array of codes as `retryableStatusCodes`, empty by default |
/// | `retryThrottling.maxTokens` | a number in (0, 1000] |
/// | `retryThrottling.tokenRatio` | a number above zero (kept to three decimal places, at least 0.001) |
/// | `methodConfig[].timeout` | a duration above zero: the call's deadline, if the caller's is not shorter |
/// | `methodConfig[].name[]` | `{"service": .., "method": ..}`, `{"service": ..}` (all its methods) or `{}` (the default); no `method` without a `service`, no name twice |
/// | `methodConfig[]` | a `retryPolicy` or a `hedgingPolicy`, not both (A6) |
///
/// Every error is a [`ConfigError`] whose [`field`](ConfigError::field) is the full path of
/// the value at fault (`methodConfig[0].retryPolicy.maxAttempts`). Other fields
/// (`loadBalancingConfig`, `waitForReady`, ...) are ignored.
///
/// A method config's `hedgingPolicy` is a [`HedgingPolicy`] ([`hedging`](Self::hedging)):
/// a [`Hedge`] after `hedgingDelay`, of at most `maxAttempts` attempts, on the default
/// [`RetryBudget`] too; the [`HedgeLayer`](crate::HedgeLayer) sends its calls' hedges, and
/// asks the same `retryThrottling` before each (A6: retries and hedges share the tokens).
///
/// Each method config's policy is a [`Retry`] with the config's attempts and backoff (full
/// jitter, as A6 draws it) on the default [`RetryBudget`] (20 % of the calls, 10 a second):
/// the budget bounds retries as the token bucket does, whichever says no first.
/// [`budget`](Self::budget) gives every policy one budget of your own.
///
/// # Examples
///
/// ```
/// use lazybreaker_grpc::ServiceConfig;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let config: ServiceConfig = r#"{
///   "methodConfig": [{
///     "name": [{"service": "echo.Echo", "method": "Sub"}, {"service": "billing.Ledger"}],
///     "timeout": "2s",
///     "retryPolicy": {
///       "maxAttempts": 4,
///       "initialBackoff": "0.1s",
///       "maxBackoff": "1s",
///       "backoffMultiplier": 2,
///       "retryableStatusCodes": ["UNAVAILABLE", "resource_exhausted", 4]
///     }
///   }],
///   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
/// }"#.parse()?;
///
/// let sub = config.policy("/echo.Echo/Sub").expect("named");
/// assert_eq!(sub.retry().max_attempts(), 4);
/// assert!(sub.retries(Code::DeadlineExceeded)); // 4
/// assert!(!sub.retries(Code::Internal));
/// assert_eq!(sub.timeout(), Some(Duration::from_secs(2)));
/// assert!(config.policy("/billing.Ledger/Post").is_some(), "the whole service");
/// assert!(config.policy("/echo.Echo/Get").is_none(), "not named, and no default");
/// assert_eq!(config.throttling().unwrap().max_tokens(), 10.0);
///
/// let err = "{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{\"maxAttempts\":1}}]}"
///     .parse::<ServiceConfig>()
///     .unwrap_err();
/// assert_eq!(err.field(), "methodConfig[0].retryPolicy.maxAttempts");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// One entry a method config.
    methods: Vec<MethodConfig>,
    /// (service, method) to the method config that names it; `""` for "any".
    names: HashMap<(String, String), usize>,
    throttling: Option<Arc<TokenBucket>>,
}

/// A method config: its retry policy or its hedging policy, if it has one.
#[derive(Debug, Clone)]
struct MethodConfig {
    policy: Option<RetryPolicy>,
    hedging: Option<HedgingPolicy>,
}

/// One method config's retry policy: a [`Retry`] (attempts and backoff), the codes it
/// retries, and the method config's `timeout`.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    retry: Retry,
    /// Bit `n`: code `n` is retried.
    codes: u32,
    timeout: Option<Duration>,
}

impl RetryPolicy {
    /// The policy's [`Retry`]: its attempts, backoff and budget, and the retries it made and
    /// refused ([`Retry::stats`], shared by every call of the methods it applies to).
    pub fn retry(&self) -> &Retry {
        &self.retry
    }

    /// Whether a status of `code` is retried (`retryableStatusCodes`).
    pub fn retries(&self, code: Code) -> bool {
        let n = code as u32;
        n < 32 && self.codes & (1 << n) != 0
    }

    /// The method config's `timeout`: the longest a call may take, all its attempts
    /// included, unless its own deadline (`grpc-timeout`) is shorter.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// One method config's hedging policy (A6's `hedgingPolicy`): a [`Hedge`] (the delay, the
/// attempts, the budget), the codes that do not end the call (`nonFatalStatusCodes`), and
/// the method config's `timeout`.
///
/// # Examples
///
/// ```
/// use lazybreaker_grpc::ServiceConfig;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let config: ServiceConfig = r#"{"methodConfig": [{
///   "name": [{"service": "echo.Echo"}],
///   "hedgingPolicy": {"maxAttempts": 9, "hedgingDelay": "0.05s",
///                     "nonFatalStatusCodes": ["UNAVAILABLE", 8]}
/// }]}"#.parse()?;
/// let hedging = config.hedging("/echo.Echo/Get").expect("named");
/// assert_eq!(hedging.hedge().attempts(), 5, "9 is 5 (A6)");
/// assert_eq!(hedging.hedge().delay(), Some(Duration::from_millis(50)));
/// assert!(hedging.non_fatal(Code::ResourceExhausted)); // 8
/// assert!(!hedging.non_fatal(Code::Internal), "fatal: the call's answer");
/// assert!(config.policy("/echo.Echo/Get").is_none(), "no retry policy");
///
/// let both = r#"{"methodConfig": [{"name": [{}],
///   "retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s",
///                   "backoffMultiplier": 1, "retryableStatusCodes": [14]},
///   "hedgingPolicy": {"maxAttempts": 2}}]}"#;
/// let err = both.parse::<ServiceConfig>().unwrap_err();
/// assert_eq!(err.field(), "methodConfig[0].hedgingPolicy");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HedgingPolicy {
    hedge: Hedge,
    /// Bit `n`: code `n` is not fatal.
    codes: u32,
    timeout: Option<Duration>,
}

impl HedgingPolicy {
    /// The policy's [`Hedge`]: its delay, attempts and budget, and the hedges it made and
    /// refused ([`Hedge::stats`], shared by every call of the methods it applies to).
    pub fn hedge(&self) -> &Hedge {
        &self.hedge
    }

    /// Whether a status of `code` is not fatal (`nonFatalStatusCodes`): the attempt's
    /// failure sends the next hedge at once rather than ending the call.
    pub fn non_fatal(&self, code: Code) -> bool {
        let n = code as u32;
        n < 32 && self.codes & (1 << n) != 0
    }

    /// The method config's `timeout`: the longest a call may take, unless its own deadline
    /// (`grpc-timeout`) is shorter; no hedge starts past it.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl ServiceConfig {
    /// A service config from its JSON.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the path of the first value at fault (`serviceConfig` for
    /// JSON that does not parse, or is not an object), as the [table](Self) says.
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| ConfigError::new("serviceConfig", e, "must be JSON"))?;
        Self::from_value(&value)
    }

    /// A service config from its JSON, already parsed ([`from_json`](Self::from_json)).
    ///
    /// # Errors
    ///
    /// As [`from_json`](Self::from_json).
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let top = object(value, "serviceConfig")?;
        let mut config = ServiceConfig {
            methods: Vec::new(),
            names: HashMap::new(),
            throttling: None,
        };
        if let Some(methods) = field(top, "methodConfig") {
            let methods = array(methods, "methodConfig")?;
            for (i, method) in methods.iter().enumerate() {
                let path = format!("methodConfig[{i}]");
                config.method(method, &path, i)?;
            }
        }
        if let Some(throttling) = field(top, "retryThrottling") {
            config.throttling = Some(Arc::new(throttling_of(throttling)?));
        }
        Ok(config)
    }

    /// Reads one method config, at index `index`.
    fn method(&mut self, value: &Value, path: &str, index: usize) -> Result<(), ConfigError> {
        let method = object(value, path)?;
        if let Some(names) = field(method, "name") {
            let names_path = format!("{path}.name");
            for (j, name) in array(names, &names_path)?.iter().enumerate() {
                let name_path = format!("{names_path}[{j}]");
                let key = name_of(name, &name_path)?;
                if self.names.insert(key, index).is_some() {
                    return Err(ConfigError::new(
                        name_path,
                        name,
                        "must not name a method another name already names",
                    ));
                }
            }
        }
        let timeout = field(method, "timeout")
            .map(|t| duration(t, &format!("{path}.timeout")))
            .transpose()?;
        let policy = field(method, "retryPolicy")
            .map(|p| policy_of(p, &format!("{path}.retryPolicy"), timeout))
            .transpose()?;
        let hedging_path = format!("{path}.hedgingPolicy");
        let hedging = field(method, "hedgingPolicy")
            .map(|h| hedging_of(h, &hedging_path, timeout))
            .transpose()?;
        if policy.is_some() && hedging.is_some() {
            return Err(ConfigError::new(
                hedging_path,
                "a hedgingPolicy",
                "must not come with a retryPolicy (A6: a method retries or hedges)",
            ));
        }
        self.methods.push(MethodConfig { policy, hedging });
        Ok(())
    }

    /// The retry policy of the method a request's path (`/package.Service/Method`) calls,
    /// as gRPC matches names: the config that names the service and the method, else the
    /// one that names the service alone, else the default (`{}`); `None` if the method
    /// config found has no `retryPolicy`, or none applies.
    pub fn policy(&self, path: &str) -> Option<&RetryPolicy> {
        self.find(path)?.policy.as_ref()
    }

    /// The hedging policy of the method a request's path calls, matched as
    /// [`policy`](Self::policy) matches it; `None` if the method config found has no
    /// `hedgingPolicy`, or none applies.
    pub fn hedging(&self, path: &str) -> Option<&HedgingPolicy> {
        self.find(path)?.hedging.as_ref()
    }

    /// The method config that applies to `path`, as gRPC matches names.
    fn find(&self, path: &str) -> Option<&MethodConfig> {
        let (service, method) = path
            .strip_prefix('/')
            .unwrap_or(path)
            .rsplit_once('/')
            .unwrap_or((path, ""));
        let key = |s: &str, m: &str| (s.to_owned(), m.to_owned());
        let found = self
            .names
            .get(&key(service, method))
            .or_else(|| self.names.get(&key(service, "")))
            .or_else(|| self.names.get(&key("", "")))?;
        Some(&self.methods[*found])
    }

    /// The channel's retry throttling (`retryThrottling`), shared by every method.
    pub fn throttling(&self) -> Option<&Arc<TokenBucket>> {
        self.throttling.as_ref()
    }

    /// Every policy pays for its retries in `budget` (shared: one budget for the channel),
    /// instead of a default budget each, and every hedging policy for its hedges. Its clock
    /// is the one the retry policies read, deadlines included.
    #[must_use]
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        for method in &mut self.methods {
            if let Some(policy) = method.policy.as_mut() {
                policy.retry = policy.retry.clone().budget(budget.clone());
            }
            if let Some(hedging) = method.hedging.as_mut() {
                hedging.hedge = hedging.hedge.clone().budget(budget.clone());
            }
        }
        self
    }

    /// Every policy draws its backoff from `seed` ([`Retry::seed`]): the same calls in the
    /// same order wait the same.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        for policy in self.methods.iter_mut().filter_map(|m| m.policy.as_mut()) {
            policy.retry = policy.retry.clone().seed(seed);
        }
        self
    }
}

impl FromStr for ServiceConfig {
    type Err = ConfigError;

    fn from_str(json: &str) -> Result<Self, ConfigError> {
        Self::from_json(json)
    }
}

/// A name's key: `(service, method)`, `""` for "any".
fn name_of(value: &Value, path: &str) -> Result<(String, String), ConfigError> {
    let name = object(value, path)?;
    let text = |key: &str| -> Result<String, ConfigError> {
        match field(name, key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(ConfigError::new(
                format!("{path}.{key}"),
                other,
                "must be a string",
            )),
        }
    };
    let (service, method) = (text("service")?, text("method")?);
    if service.is_empty() && !method.is_empty() {
        return Err(ConfigError::new(
            format!("{path}.method"),
            Value::String(method),
            "must come with a service",
        ));
    }
    Ok((service, method))
}

/// A `retryPolicy`, with its method config's `timeout`.
fn policy_of(
    value: &Value,
    path: &str,
    timeout: Option<Duration>,
) -> Result<RetryPolicy, ConfigError> {
    let policy = object(value, path)?;
    let at = |key: &str| format!("{path}.{key}");
    let required = |key: &str| {
        field(policy, key).ok_or_else(|| ConfigError::new(at(key), "nothing", "must be given"))
    };

    let attempts_path = at("maxAttempts");
    let attempts = required("maxAttempts")?;
    let max_attempts = match attempts.as_u64() {
        Some(n) if n > 1 => u32::try_from(n).unwrap_or(u32::MAX).min(MAX_ATTEMPTS),
        _ => {
            return Err(ConfigError::new(
                attempts_path,
                attempts,
                "must be an integer above 1",
            ))
        }
    };
    let initial = duration(required("initialBackoff")?, &at("initialBackoff"))?;
    let max = duration(required("maxBackoff")?, &at("maxBackoff"))?;
    let multiplier_path = at("backoffMultiplier");
    let multiplier = required("backoffMultiplier")?;
    let factor = match multiplier.as_f64() {
        Some(m) if m > 0.0 && m.is_finite() => m,
        _ => {
            return Err(ConfigError::new(
                multiplier_path,
                multiplier,
                "must be a number above 0",
            ))
        }
    };
    let codes = codes_of(
        required("retryableStatusCodes")?,
        &at("retryableStatusCodes"),
    )?;

    let retry = Retry::new(max_attempts)
        .map_err(|e| ConfigError::new(at("maxAttempts"), e.value(), e.reason()))?
        .backoff(initial, max)
        .backoff_multiplier(factor)
        .map_err(|e| ConfigError::new(multiplier_path, multiplier, e.reason()))?;
    Ok(RetryPolicy {
        retry,
        codes,
        timeout,
    })
}

/// A `hedgingPolicy`, with its method config's `timeout`.
fn hedging_of(
    value: &Value,
    path: &str,
    timeout: Option<Duration>,
) -> Result<HedgingPolicy, ConfigError> {
    let policy = object(value, path)?;
    let at = |key: &str| format!("{path}.{key}");
    let attempts = field(policy, "maxAttempts")
        .ok_or_else(|| ConfigError::new(at("maxAttempts"), "nothing", "must be given"))?;
    let max_attempts = match attempts.as_u64() {
        Some(n) if n > 1 => u32::try_from(n).unwrap_or(u32::MAX).min(MAX_ATTEMPTS),
        _ => {
            return Err(ConfigError::new(
                at("maxAttempts"),
                attempts,
                "must be an integer above 1",
            ))
        }
    };
    let delay = field(policy, "hedgingDelay")
        .map(|d| duration_from_zero(d, &at("hedgingDelay")))
        .transpose()?
        .unwrap_or(Duration::ZERO);
    let codes = field(policy, "nonFatalStatusCodes")
        .map(|c| code_set(c, &at("nonFatalStatusCodes")))
        .transpose()?
        .unwrap_or(0);
    let hedge = Hedge::after(delay).max_attempts(max_attempts);
    hedge
        .validate()
        .map_err(|e| ConfigError::new(at("maxAttempts"), e.value(), e.reason()))?;
    Ok(HedgingPolicy {
        hedge,
        codes,
        timeout,
    })
}

/// `retryableStatusCodes`: a non-empty array of names (any case) or numbers.
fn codes_of(value: &Value, path: &str) -> Result<u32, ConfigError> {
    let list = array(value, path)?;
    if list.is_empty() {
        return Err(ConfigError::new(
            path.to_owned(),
            value,
            "must not be empty",
        ));
    }
    code_set(value, path)
}

/// An array of status codes, names (any case) or numbers, empty or not.
fn code_set(value: &Value, path: &str) -> Result<u32, ConfigError> {
    let list = array(value, path)?;
    let mut codes = 0u32;
    for (i, code) in list.iter().enumerate() {
        let n = match code {
            Value::String(name) => code_named(name),
            Value::Number(n) => n.as_u64().filter(|n| *n <= 16).map(|n| n as u32),
            _ => None,
        };
        let Some(n) = n else {
            return Err(ConfigError::new(
                format!("{path}[{i}]"),
                code,
                "must be a status code: a name (UNAVAILABLE) or a number in [0, 16]",
            ));
        };
        codes |= 1 << n;
    }
    Ok(codes)
}

/// The code called `name`, in any case.
fn code_named(name: &str) -> Option<u32> {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(name))
        .map(|n| n as u32)
}

/// `retryThrottling`: a bucket of `maxTokens`, refilled by `tokenRatio`.
fn throttling_of(value: &Value) -> Result<TokenBucket, ConfigError> {
    const PATH: &str = "retryThrottling";
    let throttling = object(value, PATH)?;
    let number = |key: &'static str| -> Result<(f64, &Value), ConfigError> {
        let path = format!("{PATH}.{key}");
        let value = field(throttling, key)
            .ok_or_else(|| ConfigError::new(path.clone(), "nothing", "must be given"))?;
        let n = value
            .as_f64()
            .ok_or_else(|| ConfigError::new(path, value, "must be a number"))?;
        Ok((n, value))
    };
    let (max_tokens, max_value) = number("maxTokens")?;
    let (ratio, ratio_value) = number("tokenRatio")?;
    if !(max_tokens > 0.0 && max_tokens <= 1000.0) {
        return Err(ConfigError::new(
            format!("{PATH}.maxTokens"),
            max_value,
            "must be a number above 0, at most 1000",
        ));
    }
    TokenBucket::new(max_tokens, ratio).map_err(|e| {
        let (key, value) = match e.field() {
            "max_tokens" => ("maxTokens", max_value),
            _ => ("tokenRatio", ratio_value),
        };
        ConfigError::new(format!("{PATH}.{key}"), value, e.reason())
    })
}

/// A proto-JSON duration above zero: seconds with up to nine decimal places, then `s`
/// (`"1.5s"`, `"0.100s"`, `"2s"`).
fn duration(value: &Value, path: &str) -> Result<Duration, ConfigError> {
    read_duration(value, path, false)
}

/// A proto-JSON duration, zero included (`"0s"`).
fn duration_from_zero(value: &Value, path: &str) -> Result<Duration, ConfigError> {
    read_duration(value, path, true)
}

fn read_duration(value: &Value, path: &str, zero: bool) -> Result<Duration, ConfigError> {
    let wrong = || {
        let reason = if zero {
            "must be a duration, in seconds: \"0s\", \"0.1s\", \"1.5s\""
        } else {
            "must be a duration above zero, in seconds: \"0.1s\", \"1.5s\""
        };
        ConfigError::new(path.to_owned(), value, reason)
    };
    let text = value.as_str().ok_or_else(wrong)?;
    let seconds = text.strip_suffix('s').ok_or_else(wrong)?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return Err(wrong());
    }
    if seconds.ends_with('.') {
        return Err(wrong());
    }
    let whole: u64 = whole.parse().map_err(|_| wrong())?;
    let nanos: u32 = format!("{fraction:0<9}").parse().map_err(|_| wrong())?;
    let duration = Duration::new(whole, nanos);
    if duration.is_zero() && !zero {
        return Err(wrong());
    }
    Ok(duration)
}

fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|v| !v.is_null())
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ConfigError> {
    value
        .as_object()
        .ok_or_else(|| ConfigError::new(path.to_owned(), Shown(value), "must be an object"))
}

fn array<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, ConfigError> {
    value
        .as_array()
        .ok_or_else(|| ConfigError::new(path.to_owned(), Shown(value), "must be an array"))
}

/// A JSON value in an error message, cut short when long.
struct Shown<'a>(&'a Value);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        match text.char_indices().nth(60) {
            Some((at, _)) => write!(f, "{}…", &text[..at]),
            None => f.write_str(&text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config with one method config whose retry policy is `policy` (JSON members).
    fn with_policy(policy: &str) -> Result<ServiceConfig, ConfigError> {
        ServiceConfig::from_json(&format!(
            r#"{{"methodConfig":[{{"name":[{{"service":"pkg.Svc","method":"M"}}],"retryPolicy":{{{policy}}}}}]}}"#
        ))
    }

    const VALID: &str = r#""maxAttempts":4,"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]"#;

    /// `VALID` with `key`'s value replaced by `value` (or removed, for `None`).
    fn policy_with(key: &str, value: Option<&str>) -> String {
        let mut members: Vec<String> = VALID
            .split(",\"")
            .map(|m| m.trim_start_matches('"').to_owned())
            .filter(|m| !m.starts_with(&format!("{key}\"")))
            .map(|m| format!("\"{m}"))
            .collect();
        if let Some(value) = value {
            members.push(format!("\"{key}\":{value}"));
        }
        members.join(",")
    }

    #[test]
    fn a_valid_config_reads_as_grpc_writes_it() {
        let config = ServiceConfig::from_json(
            r#"{
              "loadBalancingConfig": [{"round_robin": {}}],
              "methodConfig": [
                {"name": [{"service": "pkg.Svc", "method": "M"}],
                 "timeout": "1.5s",
                 "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                                 "backoffMultiplier": 2,
                                 "retryableStatusCodes": ["UNAVAILABLE", 14, "Deadline_Exceeded", 8]}},
                {"name": [{"service": "pkg.Svc"}],
                 "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.010s", "maxBackoff": "0.5s",
                                 "backoffMultiplier": 1.5, "retryableStatusCodes": ["internal"]}},
                {"name": [{"service": "other.Plain"}], "waitForReady": true},
                {"name": [{}],
                 "retryPolicy": {"maxAttempts": 3, "initialBackoff": "1s", "maxBackoff": "2s",
                                 "backoffMultiplier": 3, "retryableStatusCodes": [0]}}
              ],
              "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
            }"#,
        )
        .unwrap();
        let m = config.policy("/pkg.Svc/M").unwrap();
        assert_eq!(m.retry().max_attempts(), 4);
        assert_eq!(m.timeout(), Some(Duration::from_millis(1500)));
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::ResourceExhausted,
        ] {
            assert!(m.retries(code), "{code:?}");
        }
        assert!(!m.retries(Code::Internal));
        assert!(!m.retries(Code::Ok));

        let other = config.policy("/pkg.Svc/Other").unwrap();
        assert_eq!(other.retry().max_attempts(), 2, "the service's config");
        assert!(other.retries(Code::Internal), "names in any case");
        assert_eq!(other.timeout(), None);

        assert!(
            config.policy("/other.Plain/X").is_none(),
            "a method config without a retry policy"
        );
        let default = config.policy("/else.Where/Y").unwrap();
        assert_eq!(default.retry().max_attempts(), 3, "the default");
        assert!(default.retries(Code::Ok), "as written: a number");

        let bucket = config.throttling().unwrap();
        assert_eq!((bucket.max_tokens(), bucket.token_ratio()), (10.0, 0.1));
        assert!(ServiceConfig::from_json("{}")
            .unwrap()
            .policy("/a.B/C")
            .is_none());
    }

    #[test]
    fn attempts_above_five_are_five() {
        for (attempts, want) in [(2, 2), (5, 5), (7, 5), (1_000_000_000_000u64, 5)] {
            let policy = policy_with("maxAttempts", Some(&attempts.to_string()));
            let config = with_policy(&policy).unwrap();
            let retry = config.policy("/pkg.Svc/M").unwrap().retry();
            assert_eq!(retry.max_attempts(), want, "{attempts}");
        }
    }

    #[test]
    fn every_invalid_policy_field_names_its_path() {
        let at = |key: &str| format!("methodConfig[0].retryPolicy.{key}");
        let cases: &[(&str, Option<&str>, String)] = &[
            ("maxAttempts", Some("1"), at("maxAttempts")),
            ("maxAttempts", Some("0"), at("maxAttempts")),
            ("maxAttempts", Some("-3"), at("maxAttempts")),
            ("maxAttempts", Some("2.5"), at("maxAttempts")),
            ("maxAttempts", Some("\"4\""), at("maxAttempts")),
            ("maxAttempts", None, at("maxAttempts")),
            ("initialBackoff", Some("\"0s\""), at("initialBackoff")),
            ("initialBackoff", Some("\"0.000s\""), at("initialBackoff")),
            ("initialBackoff", Some("\"-1s\""), at("initialBackoff")),
            ("initialBackoff", Some("\"100ms\""), at("initialBackoff")),
            ("initialBackoff", Some("\"1.s\""), at("initialBackoff")),
            (
                "initialBackoff",
                Some("\"0.1234567891s\""),
                at("initialBackoff"),
            ),
            ("initialBackoff", Some("0.1"), at("initialBackoff")),
            ("initialBackoff", None, at("initialBackoff")),
            ("maxBackoff", Some("\"0s\""), at("maxBackoff")),
            ("maxBackoff", Some("\"s\""), at("maxBackoff")),
            ("backoffMultiplier", Some("0"), at("backoffMultiplier")),
            ("backoffMultiplier", Some("-2"), at("backoffMultiplier")),
            ("backoffMultiplier", Some("\"2\""), at("backoffMultiplier")),
            (
                "retryableStatusCodes",
                Some("[]"),
                at("retryableStatusCodes"),
            ),
            (
                "retryableStatusCodes",
                Some("\"UNAVAILABLE\""),
                at("retryableStatusCodes"),
            ),
            ("retryableStatusCodes", None, at("retryableStatusCodes")),
            (
                "retryableStatusCodes",
                Some("[\"UNAVAILABLE\", \"GONE\"]"),
                at("retryableStatusCodes[1]"),
            ),
            (
                "retryableStatusCodes",
                Some("[17]"),
                at("retryableStatusCodes[0]"),
            ),
            (
                "retryableStatusCodes",
                Some("[-1]"),
                at("retryableStatusCodes[0]"),
            ),
        ];
        for (key, value, path) in cases {
            let err = with_policy(&policy_with(key, *value)).unwrap_err();
            assert_eq!(err.field(), path, "{key} = {value:?}: {err}");
        }
        let valid = with_policy(VALID).unwrap();
        assert!(valid.policy("/pkg.Svc/M").is_some());
    }

    #[test]
    fn every_invalid_throttling_and_name_names_its_path() {
        let throttling = |body: &str| {
            ServiceConfig::from_json(&format!(r#"{{"retryThrottling":{body}}}"#)).unwrap_err()
        };
        for (body, path) in [
            (
                r#"{"maxTokens":0,"tokenRatio":0.1}"#,
                "retryThrottling.maxTokens",
            ),
            (
                r#"{"maxTokens":1001,"tokenRatio":0.1}"#,
                "retryThrottling.maxTokens",
            ),
            (
                r#"{"maxTokens":-1,"tokenRatio":0.1}"#,
                "retryThrottling.maxTokens",
            ),
            (r#"{"tokenRatio":0.1}"#, "retryThrottling.maxTokens"),
            (
                r#"{"maxTokens":10,"tokenRatio":0}"#,
                "retryThrottling.tokenRatio",
            ),
            (
                r#"{"maxTokens":10,"tokenRatio":-0.5}"#,
                "retryThrottling.tokenRatio",
            ),
            (
                r#"{"maxTokens":10,"tokenRatio":0.0001}"#,
                "retryThrottling.tokenRatio",
            ),
            (
                r#"{"maxTokens":10,"tokenRatio":"0.1"}"#,
                "retryThrottling.tokenRatio",
            ),
            (r#"{"maxTokens":10}"#, "retryThrottling.tokenRatio"),
            ("[]", "retryThrottling"),
        ] {
            assert_eq!(throttling(body).field(), path, "{body}");
        }
        let bounds = ServiceConfig::from_json(
            r#"{"retryThrottling":{"maxTokens":1000,"tokenRatio":0.001}}"#,
        );
        assert!(bounds.is_ok(), "the bounds themselves");

        let names = |json: &str| ServiceConfig::from_json(json).unwrap_err();
        for (json, path) in [
            (
                r#"{"methodConfig":[{"name":[{"method":"M"}]}]}"#,
                "methodConfig[0].name[0].method",
            ),
            (
                r#"{"methodConfig":[{"name":[{"service":"a.B"}]},{"name":[{},{"service":"a.B"}]}]}"#,
                "methodConfig[1].name[1]",
            ),
            (
                r#"{"methodConfig":[{"name":[{"service":7}]}]}"#,
                "methodConfig[0].name[0].service",
            ),
            (r#"{"methodConfig":[{"name":{}}]}"#, "methodConfig[0].name"),
            (
                r#"{"methodConfig":[{"name":[{}],"timeout":"0s"}]}"#,
                "methodConfig[0].timeout",
            ),
            (
                r#"{"methodConfig":[{"name":[{}],"retryPolicy":[]}]}"#,
                "methodConfig[0].retryPolicy",
            ),
            (r#"{"methodConfig":{}}"#, "methodConfig"),
            (r#"{"methodConfig":[7]}"#, "methodConfig[0]"),
            ("[]", "serviceConfig"),
            ("{", "serviceConfig"),
        ] {
            assert_eq!(names(json).field(), path, "{json}");
        }
    }

    /// A config with one method config whose hedging policy is `policy` (JSON members).
    fn with_hedging(policy: &str) -> Result<ServiceConfig, ConfigError> {
        ServiceConfig::from_json(&format!(
            r#"{{"methodConfig":[{{"name":[{{"service":"pkg.Svc"}}],"timeout":"2s","hedgingPolicy":{{{policy}}}}}]}}"#
        ))
    }

    #[test]
    fn a_hedging_policy_reads_as_a6_writes_it() {
        let config = with_hedging(
            r#""maxAttempts":3,"hedgingDelay":"0.25s","nonFatalStatusCodes":["unavailable",4]"#,
        )
        .unwrap();
        let hedging = config.hedging("/pkg.Svc/M").unwrap();
        assert_eq!(hedging.hedge().attempts(), 3);
        assert_eq!(hedging.hedge().delay(), Some(Duration::from_millis(250)));
        assert!(hedging.non_fatal(Code::Unavailable));
        assert!(hedging.non_fatal(Code::DeadlineExceeded));
        assert!(!hedging.non_fatal(Code::Internal));
        assert!(!hedging.non_fatal(Code::Ok));
        assert_eq!(hedging.timeout(), Some(Duration::from_secs(2)));
        assert!(config.policy("/pkg.Svc/M").is_none(), "no retry policy");
        assert!(config.hedging("/other.Svc/M").is_none());

        // The defaults: no delay (every attempt at once), every status fatal.
        let config = with_hedging(r#""maxAttempts":2"#).unwrap();
        let hedging = config.hedging("/pkg.Svc/M").unwrap();
        assert_eq!(hedging.hedge().delay(), Some(Duration::ZERO));
        assert!((0..17).all(|n| !hedging.non_fatal(Code::from_i32(n))));
        let config =
            with_hedging(r#""maxAttempts":2,"hedgingDelay":"0s","nonFatalStatusCodes":[]"#)
                .unwrap();
        assert_eq!(
            config.hedging("/pkg.Svc/M").unwrap().hedge().delay(),
            Some(Duration::ZERO)
        );

        // Above 5 attempts is 5.
        for (attempts, want) in [(2u64, 2), (5, 5), (6, 5), (1_000_000_000_000, 5)] {
            let config = with_hedging(&format!(r#""maxAttempts":{attempts}"#)).unwrap();
            let hedge = config.hedging("/pkg.Svc/M").unwrap().hedge();
            assert_eq!(hedge.attempts(), want, "{attempts}");
        }

        // One budget for the channel: the hedges' too.
        let budget = RetryBudget::new(0.5).unwrap();
        let config = with_hedging(r#""maxAttempts":2"#)
            .unwrap()
            .budget(budget.clone());
        let hedge = config.hedging("/pkg.Svc/M").unwrap().hedge();
        assert!(hedge.budget_given());
        assert_eq!(hedge.hedge_budget().percent(), 0.5);
    }

    #[test]
    fn every_invalid_hedging_field_names_its_path() {
        let at = |key: &str| format!("methodConfig[0].hedgingPolicy.{key}");
        for (policy, path) in [
            (r#""maxAttempts":1"#, at("maxAttempts")),
            (r#""maxAttempts":0"#, at("maxAttempts")),
            (r#""maxAttempts":-2"#, at("maxAttempts")),
            (r#""maxAttempts":2.5"#, at("maxAttempts")),
            (r#""maxAttempts":"3""#, at("maxAttempts")),
            (r#""hedgingDelay":"0.1s""#, at("maxAttempts")),
            (
                r#""maxAttempts":2,"hedgingDelay":"-1s""#,
                at("hedgingDelay"),
            ),
            (
                r#""maxAttempts":2,"hedgingDelay":"100ms""#,
                at("hedgingDelay"),
            ),
            (r#""maxAttempts":2,"hedgingDelay":0.1"#, at("hedgingDelay")),
            (
                r#""maxAttempts":2,"nonFatalStatusCodes":"UNAVAILABLE""#,
                at("nonFatalStatusCodes"),
            ),
            (
                r#""maxAttempts":2,"nonFatalStatusCodes":["UNAVAILABLE","GONE"]"#,
                at("nonFatalStatusCodes[1]"),
            ),
            (
                r#""maxAttempts":2,"nonFatalStatusCodes":[17]"#,
                at("nonFatalStatusCodes[0]"),
            ),
        ] {
            let err = with_hedging(policy).unwrap_err();
            assert_eq!(err.field(), path, "{policy}: {err}");
        }
        let err =
            ServiceConfig::from_json(r#"{"methodConfig":[{"name":[{}],"hedgingPolicy":[]}]}"#)
                .unwrap_err();
        assert_eq!(err.field(), "methodConfig[0].hedgingPolicy");

        // A6: a method config retries or hedges, not both.
        let both = format!(
            r#"{{"methodConfig":[{{"name":[{{}}]}},{{"name":[{{"service":"a.B"}}],"retryPolicy":{{{VALID}}},"hedgingPolicy":{{"maxAttempts":2}}}}]}}"#
        );
        let err = ServiceConfig::from_json(&both).unwrap_err();
        assert_eq!(err.field(), "methodConfig[1].hedgingPolicy");
        assert!(err.to_string().contains("retryPolicy"), "{err}");
    }

    #[test]
    fn durations_read_as_proto_json_writes_them() {
        let read = |s: &str| duration(&Value::String(s.into()), "d");
        assert_eq!(read("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(read("0.000000001s").unwrap(), Duration::from_nanos(1));
        assert_eq!(read("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(read("0.100s").unwrap(), Duration::from_millis(100));
        for bad in ["", "s", "1", "1.5", "+1s", "1e3s", " 1s", "1.5 s"] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
        let err = read("0s").unwrap_err();
        assert_eq!(err.field(), "d");
        assert_eq!(err.value(), "\"0s\"");
    }
}
