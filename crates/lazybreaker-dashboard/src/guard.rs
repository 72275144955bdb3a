//! The controls' guard: `Authorization: Bearer <token>`, compared in constant time.

use http::header::AUTHORIZATION;
use http::{HeaderMap, StatusCode};
use subtle::ConstantTimeEq;

/// Whether `headers` carry the bearer `token`: `Err(401)` without bearer credentials,
/// `Err(403)` with the wrong ones. An empty `token` matches nothing. The comparison takes
/// the same time wherever the presented token first differs (only its length may show).
pub(super) fn check(headers: &HeaderMap, token: &str) -> Result<(), StatusCode> {
    let presented = headers
        .get(AUTHORIZATION)
        .map(|v| v.as_bytes())
        .and_then(|v| {
            let (scheme, rest) = v.split_at_checked(7)?;
            scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
        })
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let presented = presented.trim_ascii();
    if token.is_empty() || !bool::from(presented.ct_eq(token.as_bytes())) {
        return Err(StatusCode::FORBIDDEN);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn the_right_token_passes_the_scheme_in_any_case() {
        assert_eq!(check(&with("Bearer s3cret"), "s3cret"), Ok(()));
        assert_eq!(check(&with("bearer s3cret"), "s3cret"), Ok(()));
    }

    #[test]
    fn no_bearer_credentials_is_401_and_wrong_ones_403() {
        assert_eq!(
            check(&HeaderMap::new(), "s3cret"),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&with("Basic czNjcmV0"), "s3cret"),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&with("Bearer"), "s3cret"),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&with("Bearer s3cre"), "s3cret"),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            check(&with("Bearer s3cretX"), "s3cret"),
            Err(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn an_empty_token_matches_nothing() {
        assert_eq!(check(&with("Bearer "), ""), Err(StatusCode::FORBIDDEN));
    }
}
