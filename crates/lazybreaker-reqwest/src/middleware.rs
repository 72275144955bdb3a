//! [`BreakerMiddleware`]: the `reqwest_middleware::Middleware`.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Error, Middleware, Next, Result};

use super::call::Admitted;
use super::classify::ResponseRules;
use super::key::host_port;
use super::verdict::Verdict;
use lazybreaker::classify::Classify;
use lazybreaker::door::gate::{self, Admit, At};
use lazybreaker::door::BreakerSeam;
use lazybreaker::http::StatusRules;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::{Registry, RegistryHasher};

/// A [`reqwest_middleware::Middleware`] that sends each request through a breaker of its
/// host: one per `host:port` ([`host_port`]), or per the key that [`key`](Self::key)
/// extracts, kept in a [`Registry`].
///
/// - **Admission first.** The key's breaker admits the request before the rest of the chain
///   runs: while it rejects, no connection is attempted, and the request fails with a
///   [`reqwest_middleware::Error::Middleware`] around the [`RejectedBy`](lazybreaker::RejectedBy)
///   (see [`rejection`](super::rejection)).
/// - **Results untouched.** An admitted request's response, or its error, comes back
///   exactly as without the middleware; the breaker only counts it (see the
///   [module documentation](super) for how).
/// - **Cancellation and panics.** Dropped before the response arrives (a cancelled task, a
///   timeout *around* `send()`), the call is abandoned, as any dropped
///   [`OwnedPermit`](lazybreaker::OwnedPermit) is; a panic in an inner middleware counts as a
///   failure and keeps unwinding.
/// - **Verdicts for the retries.** Inside a [`RetryMiddleware`](super::RetryMiddleware)
///   (added before this one), it hands each attempt's verdict and the breaker that counted
///   it back to the retries, through the request's extensions; without one, nothing more
///   is done.
///
/// # Examples
///
/// ```
/// use lazybreaker::http::StatusRules;
/// use lazybreaker_reqwest::BreakerMiddleware;
/// use lazybreaker::{Breaker, Registry};
/// use reqwest_middleware::ClientBuilder;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let registry = Arc::new(Registry::new(|_host: &String| {
///     Breaker::builder().timeout(Duration::from_secs(30))
/// }));
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(
///         BreakerMiddleware::new(Arc::clone(&registry))
///             // A breaker per host and first path segment rather than per host:
///             .key(|request: &reqwest::Request| {
///                 let url = request.url();
///                 let segment = url.path_segments().and_then(|mut s| s.next()).unwrap_or("");
///                 format!("{}/{segment}", url.host_str().unwrap_or(""))
///             })
///             .rules(StatusRules::new().honor_retry_after()),
///     )
///     .build();
/// # drop(client);
/// ```
pub struct BreakerMiddleware<
    P = ConsecutiveFailures,
    O = (),
    H = RegistryHasher,
    K = fn(&Request) -> String,
> {
    registry: Arc<Registry<String, P, O, H>>,
    key: K,
    rules: StatusRules,
}

impl<P: TripPolicy, O: Observer, H> BreakerMiddleware<P, O, H> {
    /// A middleware whose requests go through `registry`'s breaker for their `host:port`
    /// ([`host_port`]), responses counting by [`StatusRules::new`].
    pub fn new(registry: Arc<Registry<String, P, O, H>>) -> Self {
        Self {
            registry,
            key: host_port,
            rules: StatusRules::new(),
        }
    }
}

impl<P: TripPolicy, O: Observer, H, K> BreakerMiddleware<P, O, H, K> {
    /// The same middleware, with `key(&request)` naming each request's breaker instead of
    /// its `host:port`: per path, per method, per tenant. The key is the breaker's name, so
    /// a rejection's message names it.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_reqwest::BreakerMiddleware;
    /// use lazybreaker::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let registry = Arc::new(Registry::new(|_: &String| Breaker::builder()));
    /// // A breaker per method and host.
    /// let middleware = BreakerMiddleware::new(registry).key(|request: &reqwest::Request| {
    ///     format!("{} {}", request.method(), request.url().host_str().unwrap_or(""))
    /// });
    /// # drop(middleware);
    /// ```
    pub fn key<G>(self, key: G) -> BreakerMiddleware<P, O, H, G>
    where
        G: Fn(&Request) -> String + Send + Sync + 'static,
    {
        BreakerMiddleware {
            registry: self.registry,
            key,
            rules: self.rules,
        }
    }

    /// The same middleware, counting responses by `rules` ([`StatusRules::new`] by
    /// default). With [`StatusRules::honor_retry_after`], a 503 or a 429 with `Retry-After`
    /// opens the host's breaker for as long as the header says (bounded by the breaker's
    /// [`max_open_duration`](lazybreaker::Builder::max_open_duration)).
    #[must_use]
    pub fn rules(mut self, rules: StatusRules) -> Self {
        self.rules = rules;
        self
    }

    /// The registry that keeps the breakers.
    pub fn registry(&self) -> &Arc<Registry<String, P, O, H>> {
        &self.registry
    }
}

#[async_trait::async_trait]
impl<P, O, H, K> Middleware for BreakerMiddleware<P, O, H, K>
where
    P: TripPolicy + 'static,
    O: Observer + 'static,
    H: BuildHasher + Clone + Send + Sync + 'static,
    K: Fn(&Request) -> String + Send + Sync + 'static,
{
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let key = (self.key)(&req);
        let breaker = self.registry.breaker(key.as_str());
        // A retry middleware around this one asked for the attempt's verdict.
        let asked = Verdict::asked(extensions).then(|| Arc::clone(&breaker));
        // Before `next.run`: a rejected request never reaches the connection pool.
        let permit = match gate::admit(breaker, At::Now) {
            Admit::Call(permit, _) => permit,
            Admit::Rejected(breaker, rejected) => {
                return Err(Error::middleware(breaker.rejected_by(rejected)))
            }
            // The first request after an open period runs the host's health check first,
            // and is sent only if it passes.
            Admit::Check(gate) => {
                let breaker = std::sync::Arc::clone(gate.holder());
                gate.await
                    .map_err(|rejected| Error::middleware(breaker.rejected_by(rejected)))?
            }
        };
        let rules = ResponseRules::from_rules(self.rules);
        let result = Admitted::new(next.run(req, extensions), permit, rules).await;
        if let Some(breaker) = asked {
            Verdict::tell(extensions, rules.classify(&result), breaker);
        }
        result
    }
}

impl<P: TripPolicy, O: Observer, H, K: Clone> Clone for BreakerMiddleware<P, O, H, K> {
    fn clone(&self) -> Self {
        Self {
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            rules: self.rules,
        }
    }
}

impl<P: TripPolicy, O: Observer, H, K> fmt::Debug for BreakerMiddleware<P, O, H, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerMiddleware")
            .field("registry", &self.registry)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}
