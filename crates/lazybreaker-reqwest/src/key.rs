//! [`host_port`]: the default key, one breaker per host and port.

use reqwest::Request;

/// The key of a request's breaker by default: `host:port` from its URL, the port as written
/// or else the scheme's default (`http` 80, `https` 443, through
/// [`Url::port_or_known_default`](reqwest::Url::port_or_known_default)), and an IPv6 host
/// in brackets as the URL spells it (`[::1]:8080`). So `http://example.com/a` and
/// `http://example.com:80/b` share a breaker, and `https://example.com/` has its own.
///
/// The host is the URL's, as `url` normalised it (lowercase ASCII, punycode for an
/// international name). A URL without a host, or without a port for a scheme with no known
/// default, is keyed by what it has (the host alone, or the empty string): `reqwest` fails
/// such a request before it connects anyway.
///
/// # Examples
///
/// ```
/// use lazybreaker_reqwest::host_port;
/// use reqwest::{Method, Request};
///
/// let request = |url: &str| Request::new(Method::GET, url.parse().unwrap());
/// assert_eq!(host_port(&request("https://API.example.com/v1/items")), "api.example.com:443");
/// assert_eq!(host_port(&request("http://127.0.0.1:8080/")), "127.0.0.1:8080");
/// assert_eq!(host_port(&request("http://[::1]/")), "[::1]:80");
/// ```
pub fn host_port(request: &Request) -> String {
    let url = request.url();
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_port;
    use reqwest::{Method, Request};

    fn key(url: &str) -> String {
        host_port(&Request::new(Method::GET, url.parse().unwrap()))
    }

    #[test]
    fn the_port_is_explicit_or_the_schemes_default() {
        assert_eq!(key("http://example.com/a?b=c"), "example.com:80");
        assert_eq!(key("http://example.com:80/other"), "example.com:80");
        assert_eq!(key("https://example.com/"), "example.com:443");
        assert_eq!(key("https://example.com:8443/"), "example.com:8443");
        assert_eq!(key("http://127.0.0.1:8080/x"), "127.0.0.1:8080");
        assert_eq!(key("http://user:secret@example.com/"), "example.com:80");
    }

    #[test]
    fn an_ipv6_host_keeps_its_brackets() {
        assert_eq!(key("http://[::1]:8080/"), "[::1]:8080");
        assert_eq!(key("https://[::1]/"), "[::1]:443");
        assert_eq!(key("http://[2001:DB8::1]/"), "[2001:db8::1]:80");
    }

    #[test]
    fn the_host_is_normalised() {
        assert_eq!(key("HTTP://Example.COM/"), "example.com:80");
        assert_eq!(key("http://bücher.example/"), "xn--bcher-kva.example:80");
    }

    #[test]
    fn a_url_without_a_known_port_or_host_keys_by_what_it_has() {
        assert_eq!(key("gopher://example.com/"), "example.com");
        assert_eq!(key("data:text/plain,hi"), "");
    }
}
