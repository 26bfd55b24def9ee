//! Self-identified AI crawlers refused before the cache (`[agents] refuse`).
//!
//! A site may tell AI crawlers in `robots.txt` not to take its pages; a crawler that
//! names itself in `User-Agent` and comes anyway is answered here, before the
//! lookup, so it gets no stored page either: `403 Forbidden`, or `402 Payment
//! Required` with `crawler-price` (the header Cloudflare's pay per crawl uses) when
//! `status = 402`. The answer is `no-store` and counted in
//! `quire_agents_refused_total`.
//!
//! Key decisions:
//! - **A claim, not a proof.** This stops crawlers that say who they are (the big
//!   AI crawlers do, and document their tokens); one that lies about its
//!   `User-Agent` is an ordinary client, bounded like any other by the rate limits
//!   and the budget of uncached work. Verifying a claimed good crawler is the
//!   budget's crawler classes' job (`crate::edge::crawlers`).
//! - **Nothing on the hit path when unset.** With an empty list, the check is one
//!   length test; with names, a case-insensitive search of `User-Agent` for each
//!   (at most 64 names of 64 bytes, over a field the head limit bounds). The fast
//!   path hands a matching request to the service (`crate::http1::fresh`), so no
//!   recipe is ever made for it.

use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use quire_http::status::CacheStatus;

use crate::config::AgentsSection;
use crate::request::body::Body;

/// Whether `headers`' `User-Agent` names an agent `cfg` refuses.
pub(crate) fn refused(cfg: &AgentsSection, headers: &HeaderMap) -> bool {
    if cfg.refuse.is_empty() {
        return false;
    }
    headers.get_all(header::USER_AGENT).iter().any(|ua| {
        let ua = ua.as_bytes();
        cfg.refuse
            .iter()
            .any(|name| contains_ignoring_case(ua, name.as_bytes()))
    })
}

fn contains_ignoring_case(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The answer to a refused agent.
pub(crate) fn answer(cfg: &AgentsSection) -> Response<Body> {
    let (status, text) = match cfg.status {
        402 => (
            StatusCode::PAYMENT_REQUIRED,
            "this site's pages are not free for AI crawlers\n",
        ),
        _ => (
            StatusCode::FORBIDDEN,
            "this site's pages are not for AI crawlers\n",
        ),
    };
    let mut r = crate::request::reply::plain(
        status,
        text,
        CacheStatus::default().with_detail("agent-refused"),
    );
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(p) = cfg
        .price
        .as_deref()
        .and_then(|p| HeaderValue::from_str(p).ok())
    {
        h.insert("crawler-price", p);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(names: &[&str]) -> AgentsSection {
        AgentsSection {
            refuse: names.iter().map(|s| (*s).to_owned()).collect(),
            ..AgentsSection::default()
        }
    }

    fn ua(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, v.parse().unwrap());
        h
    }

    #[test]
    fn a_named_agent_is_found_in_user_agent_in_any_case() {
        let c = cfg(&["GPTBot", "CCBot"]);
        let gpt = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot";
        assert!(refused(&c, &ua(gpt)));
        assert!(refused(&c, &ua("ccbot/2.0 (https://commoncrawl.org/faq/)")));
        assert!(!refused(
            &c,
            &ua("Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0")
        ));
        assert!(!refused(&c, &HeaderMap::new()));
        assert!(!refused(&cfg(&[]), &ua(gpt)));
    }

    #[test]
    fn the_answer_is_403_or_402_with_a_price_never_stored() {
        let r = answer(&cfg(&["GPTBot"]));
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        let paid = AgentsSection {
            status: 402,
            price: Some("USD 0.01".into()),
            ..cfg(&["GPTBot"])
        };
        let r = answer(&paid);
        assert_eq!(r.status(), StatusCode::PAYMENT_REQUIRED);
        assert_eq!(r.headers()["crawler-price"], "USD 0.01");
    }
}
