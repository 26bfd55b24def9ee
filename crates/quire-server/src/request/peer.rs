//! A cluster peer's requests (`crate::upstream::PEER_HEADER`): honoured only from a
//! configured peer's address, and answered with this node's log position taken
//! before the lookup (`crate::ops::bus::PEER_POSITION_HEADER`), unless the answer
//! came from a fill another request had started. Why: the `crate::ops::bus` module
//! doc.

use crate::request::body::Body;
use crate::state::Ctx;

/// On a request that carries [`crate::upstream::PEER_HEADER`]: drops the field
/// unless `from` is a configured peer, else this node's position, taken now
/// (before the lookup), for the answer's [`crate::ops::bus::PEER_POSITION_HEADER`].
pub(crate) fn peer_request(
    ctx: &Ctx,
    headers: &mut http::HeaderMap,
    from: std::net::IpAddr,
) -> Option<http::HeaderValue> {
    if !headers.contains_key(crate::upstream::PEER_HEADER) {
        return None;
    }
    let Some(bus) = ctx.bus().filter(|b| b.is_peer(from)) else {
        headers.remove(crate::upstream::PEER_HEADER);
        return None;
    };
    let pos = bus.position().unwrap_or_default();
    http::HeaderValue::from_str(&pos).ok()
}

/// Whether `resp` answered from a fill another request had started (RFC 9211
/// `collapsed`): that fill may have begun before invalidations this node applied
/// before its position was taken, so the position does not vouch for its bytes and
/// the answer goes out unstamped (the asking node then refuses it and asks the
/// origin). A fill this request led began after the position was taken.
pub(crate) fn joined_an_earlier_fill(resp: &http::Response<Body>) -> bool {
    resp.headers()
        .get("cache-status")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("; collapsed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_from_a_joined_fill_is_never_stamped_with_a_position() {
        let with = |status: Option<&str>| {
            let mut r = http::Response::new(Body::Empty);
            if let Some(v) = status {
                r.headers_mut()
                    .insert("cache-status", http::HeaderValue::from_str(v).unwrap());
            }
            joined_an_earlier_fill(&r)
        };
        assert!(with(Some("quire; fwd=miss; collapsed")));
        assert!(with(Some("quire; fwd=miss; stored; collapsed")));
        assert!(!with(Some("quire; fwd=miss; stored")));
        assert!(!with(Some("quire; hit")));
        assert!(!with(None));
    }
}
