//! [`per_method`]: the key of a breaker per gRPC method.

/// The gRPC method a request calls, `/package.Service/Method` (its path): the key function
/// of a [`KeyedBreakerLayer`](lazybreaker_tower::KeyedBreakerLayer) that keeps a breaker per
/// method, as Kitex does, so that one failing method opens only its own breaker.
///
/// It takes the request as tonic sends and serves it (`http::Request<tonic::body::Body>`,
/// on a `Channel` and on a server's routes alike), so the layer's types are inferred
/// without annotations; for another body type, key by `request.uri().path()` yourself.
///
/// The keys are the paths as they are on the wire, so a
/// [`RegistrySettings`](lazybreaker::config::RegistrySettings) file names methods the same way:
/// `[breakers."/echo.Echo/Sub"]` for one method's settings, and
/// `exempt = ["/grpc.health.v1.Health/Check"]` for a method that is counted but never
/// broken.
///
/// **On a server, bound the registry.** There the paths are the clients' to choose: every
/// distinct path a client sends (a method the server does not have included) gets a breaker
/// of its own, kept in the registry and shown in its metrics (20 000 distinct paths made
/// 20 000 breakers, about 21 MB). Give a server's registry
/// [`max_keys`](lazybreaker::Registry::max_keys) (a full registry keeps no breaker for a
/// new key: the call is judged by a fresh breaker it does not keep, and counted in
/// [`overflowed`](lazybreaker::Registry::overflowed)), or key only the methods the server
/// has, with a key function of your own that maps the rest to one key.
///
/// # Examples
///
/// ```
/// use lazybreaker_grpc as grpc;
/// use lazybreaker_tower::KeyedBreakerLayer;
/// use lazybreaker::{Breaker, Registry};
/// use std::sync::Arc;
///
/// // Bounded: on a server, the paths are the clients'.
/// let registry = Arc::new(Registry::new(|_: &String| Breaker::builder()).max_keys(1_000));
/// let layer = KeyedBreakerLayer::new(registry, grpc::per_method)
///     .classify(grpc::status_classifier())
///     .on_rejected(grpc::AsStatus);
/// # let _ = layer;
///
/// let request = http::Request::builder()
///     .uri("http://[::1]:50051/echo.Echo/Sub")
///     .body(tonic::body::Body::empty())
///     .unwrap();
/// assert_eq!(grpc::per_method(&request), "/echo.Echo/Sub");
/// ```
pub fn per_method(request: &http::Request<tonic::body::Body>) -> String {
    request.uri().path().to_owned()
}
