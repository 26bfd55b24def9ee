//! What every admin endpoint shares: the bearer-token check (constant time; no
//! token configured means no admin API) and the JSON answers, never stored. The
//! endpoints themselves are `crate::ops::admin` and `crate::ops::purge_api`.

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use quire_http::status::CacheStatus;

use crate::request::body::Body;
use crate::state::Ctx;
use crate::upstream::origin::OutBody;

/// The `Cache-Status` of every admin answer.
pub(crate) fn admin_status() -> CacheStatus {
    CacheStatus::default().with_detail("admin")
}

/// A JSON answer, never stored.
pub(crate) fn json(code: StatusCode, v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::full(format!("{v:#}\n")));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut()
        .insert("cache-status", admin_status().to_header_value());
    r
}

/// `{"error": msg}` with `code`.
pub(crate) fn error(code: StatusCode, msg: &str) -> Response<Body> {
    json(code, &serde_json::json!({ "error": msg }))
}

/// Constant-time equality of the presented token and the configured one.
fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = presented.len() ^ expected.len();
    for (i, &b) in expected.iter().enumerate() {
        diff |= usize::from(b ^ presented.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// `None` when authorised, else the response to send.
pub(crate) fn authorise(ctx: &Ctx, req: &Request<OutBody>) -> Option<Response<Body>> {
    let policy = ctx.peek();
    let Some(expected) = policy.admin_token.as_deref() else {
        return Some(error(
            StatusCode::FORBIDDEN,
            "the admin API is disabled: set admin_token in the config or QUIRE_ADMIN_TOKEN",
        ));
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, tok) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| tok.trim())
        });
    match presented {
        Some(t) if token_matches(t.as_bytes(), expected.as_bytes()) => None,
        _ => {
            let mut r = error(StatusCode::UNAUTHORIZED, "admin token required");
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Some(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches(b"secret-token-123", b"secret-token-123"));
        assert!(!token_matches(b"secret-token-12", b"secret-token-123"));
        assert!(!token_matches(b"secret-token-1234", b"secret-token-123"));
        assert!(!token_matches(b"", b"secret-token-123"));
        assert!(!token_matches(b"Secret-token-123", b"secret-token-123"));
    }
}
