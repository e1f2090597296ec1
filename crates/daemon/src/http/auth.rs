//! Bearer-token check for mutating routes: 403 when no token is configured at all,
//! 401 when the request's token is missing or wrong. Compared in constant time.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

use super::error::ApiError;

pub fn require_admin(configured: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = configured else {
        return Err(ApiError::MutationsDisabled);
    };
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(ApiError::Unauthorized)?;
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_str(v).unwrap(),
        );
        h
    }

    #[test]
    fn no_configured_token_refuses_everything() {
        assert!(matches!(
            require_admin(None, &headers("Bearer x")),
            Err(ApiError::MutationsDisabled)
        ));
    }

    #[test]
    fn wrong_or_missing_token_is_unauthorized() {
        assert!(matches!(
            require_admin(Some("s3cret"), &HeaderMap::new()),
            Err(ApiError::Unauthorized)
        ));
        assert!(matches!(
            require_admin(Some("s3cret"), &headers("Bearer nope")),
            Err(ApiError::Unauthorized)
        ));
        assert!(matches!(
            require_admin(Some("s3cret"), &headers("Basic s3cret")),
            Err(ApiError::Unauthorized)
        ));
        assert!(require_admin(Some("s3cret"), &headers("Bearer s3cret")).is_ok());
    }
}
