//! An origin's own compression dictionaries (RFC 9842), learned from the responses
//! quire stores, and the one a later response is also stored `dcz` against.
//!
//! An origin marks a response as a dictionary with `Use-As-Dictionary: match="…"`
//! (say, `/app.v1.css` for `/app.*.css`). Browsers keep it and send its hash in
//! `Available-Dictionary` with later requests whose URL matches. So when a
//! response stored with that field ends, its body is kept here (the bytes a browser
//! keeps: the decoded body), and a later response whose URL the pattern matches
//! gets a `dcz` coding made against it in the background, like quire's own
//! codings ([`crate::fill::recompress`]). The origin needs to do nothing else: this
//! is how an updated stylesheet or script travels as a delta of the one the reader
//! holds.
//!
//! Key decisions:
//! - **Correct whatever is learned**: a `dcz` body names its dictionary's hash in its
//!   first bytes, and the hit path sends it only to a request whose
//!   `Available-Dictionary` names the same hash (`crate::request::hit`). A
//!   dictionary learned wrongly, evicted, replaced or purged at the origin costs
//!   bytes, never a body a client cannot decode.
//! - **The browser's choice**: of the dictionaries whose pattern matches a URL (and
//!   whose `match-dest` fits the response's type), the one with the longest pattern,
//!   then the newest (RFC 9842 §2.2.3), so that the body is made against the one
//!   the browser will name. Never a response against itself.
//! - **Bounded**: at most [`COUNT_MAX`] dictionaries and
//!   `encodings.origin_dictionaries_memory` bytes (the oldest go first), none over
//!   `encodings.origin_dictionary_max`; a field or pattern outside what
//!   `quire_http::dictionary_use` reads is not learned. Counted in
//!   `quire_origin_dictionaries_total{result}`, held in
//!   `quire_origin_dictionaries_bytes`.
//! - A dictionary is learned from a `200` only, when its entry was stored (a
//!   response a purge overtook teaches nothing), and kept until pushed out: a later
//!   version at the same URL replaces it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::header::{self, HeaderMap};
use quire_http::dictionary::{Dictionary, USE_AS_DICTIONARY};
use quire_http::dictionary_use::{Pattern, UseAsDictionary};

use crate::config::EncodingsConfig;

/// Most dictionaries kept at once.
pub(crate) const COUNT_MAX: usize = 64;

/// What became of a response offered as a dictionary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Learned {
    /// Kept.
    Kept,
    /// Its field or pattern is outside what is read.
    Unsupported,
    /// Larger than `encodings.origin_dictionary_max`, or empty.
    Size,
}

impl Learned {
    const ALL: [Learned; 3] = [Learned::Kept, Learned::Unsupported, Learned::Size];

    fn label(self) -> &'static str {
        match self {
            Learned::Kept => "kept",
            Learned::Unsupported => "unsupported",
            Learned::Size => "size",
        }
    }
}

/// One dictionary the origin named.
struct Known {
    /// The URL it was stored under.
    url: String,
    pattern: Pattern,
    field: UseAsDictionary,
    dictionary: Arc<Dictionary>,
    /// When it was learned (higher: newer).
    seq: u64,
}

#[derive(Default)]
struct Inner {
    known: Vec<Known>,
    seq: u64,
}

/// The dictionaries learned, shared by the server's fills.
#[derive(Default)]
pub(crate) struct OriginDictionaries {
    inner: Mutex<Inner>,
    learned: [AtomicU64; 3],
    bytes: AtomicU64,
}

impl std::fmt::Debug for OriginDictionaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginDictionaries")
            .field("bytes", &self.bytes.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl OriginDictionaries {
    /// Learns the stored response at `url` (its `headers` and decoded `body`) if it
    /// names itself a dictionary, or if quire gave it the `Use-As-Dictionary` value
    /// `given` (`[dictionaries] assets`); `None` when neither, or learning is off.
    pub(crate) fn learn(
        &self,
        cfg: &EncodingsConfig,
        (url, headers): (&str, &HeaderMap),
        given: Option<&str>,
        body: &[u8],
    ) -> Option<Learned> {
        if !cfg.origin_dictionaries {
            return None;
        }
        let mut lines = headers.get_all(USE_AS_DICTIONARY).iter();
        let line = match given {
            Some(g) => Some(g.as_bytes()).filter(|_| lines.next().is_none()),
            None => lines.next().map(http::HeaderValue::as_bytes),
        }?;
        let read = UseAsDictionary::parse(line)
            .filter(|_| lines.next().is_none())
            .and_then(|f| Some((Pattern::parse(&f.pattern, url)?, f)));
        let result = match read {
            None => Learned::Unsupported,
            Some(_) if body.is_empty() || body.len() as u64 > cfg.origin_dictionary_max.0 => {
                Learned::Size
            }
            Some((pattern, field)) => {
                let memory =
                    usize::try_from(cfg.origin_dictionaries_memory.0).unwrap_or(usize::MAX);
                self.keep(url, pattern, field, body, memory);
                Learned::Kept
            }
        };
        self.learned[result as usize].fetch_add(1, Ordering::Relaxed);
        Some(result)
    }

    fn keep(
        &self,
        url: &str,
        pattern: Pattern,
        field: UseAsDictionary,
        body: &[u8],
        memory: usize,
    ) {
        let dictionary = Arc::new(Dictionary::new(body.to_vec()));
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // A new version at the same URL, or the same bytes elsewhere, replaces it.
        inner
            .known
            .retain(|k| k.url != url && k.dictionary.hash() != dictionary.hash());
        inner.seq += 1;
        let seq = inner.seq;
        inner.known.push(Known {
            url: url.to_owned(),
            pattern,
            field,
            dictionary,
            seq,
        });
        // The oldest go first (`known` is in the order learned).
        let mut bytes: usize = inner.known.iter().map(|k| k.dictionary.bytes().len()).sum();
        while inner.known.len() > COUNT_MAX || (bytes > memory && inner.known.len() > 1) {
            bytes -= inner.known.remove(0).dictionary.bytes().len();
        }
        if bytes > memory {
            inner.known.clear();
            bytes = 0;
        }
        self.bytes.store(bytes as u64, Ordering::Relaxed);
    }

    /// The dictionary a response at `url` with `headers` is also stored `dcz`
    /// against: see the module doc for the choice.
    pub(crate) fn for_response(&self, url: &str, headers: &HeaderMap) -> Option<Arc<Dictionary>> {
        let ct = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .known
            .iter()
            .filter(|k| k.url != url && k.field.for_content_type(ct) && k.pattern.matches(url))
            .max_by_key(|k| (k.pattern.len(), k.seq))
            .map(|k| k.dictionary.clone())
    }

    /// `quire_origin_dictionaries_total{result}` and `quire_origin_dictionaries_bytes`.
    pub(crate) fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP quire_origin_dictionaries_total Responses the origin marked Use-As-Dictionary, by what quire did with them (kept to make dcz against; unsupported field or pattern; size outside encodings.origin_dictionary_max).\n\
             # TYPE quire_origin_dictionaries_total counter"
        );
        for (l, n) in Learned::ALL.iter().zip(&self.learned) {
            let _ = writeln!(
                out,
                "quire_origin_dictionaries_total{{result=\"{}\"}} {}",
                l.label(),
                n.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP quire_origin_dictionaries_bytes Bytes of the origin's dictionaries kept (encodings.origin_dictionaries_memory at most).\n\
             # TYPE quire_origin_dictionaries_bytes gauge\n\
             quire_origin_dictionaries_bytes {}",
            self.bytes.load(Ordering::Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ByteSize;
    use http::HeaderValue;

    fn headers(field: Option<&str>, ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(f) = field {
            h.insert(USE_AS_DICTIONARY, HeaderValue::from_str(f).unwrap());
        }
        h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        h
    }

    fn cfg() -> EncodingsConfig {
        EncodingsConfig::default()
    }

    #[test]
    fn a_later_version_is_made_against_the_dictionary_the_browser_names() {
        let d = OriginDictionaries::default();
        let css = "text/css";
        let v1 = headers(Some(r#"match="/app.*.css""#), css);
        assert_eq!(
            d.learn(
                &cfg(),
                ("https://a.test/app.v1.css", &v1),
                None,
                b"body{color:red}"
            ),
            Some(Learned::Kept)
        );
        let got = d.for_response("https://a.test/app.v2.css", &headers(None, css));
        assert_eq!(got.unwrap().bytes(), b"body{color:red}");
        // Not against itself, not for another path or host.
        assert!(d.for_response("https://a.test/app.v1.css", &v1).is_none());
        assert!(d
            .for_response("https://a.test/app.js", &headers(None, css))
            .is_none());
        assert!(d
            .for_response("https://b.test/app.v2.css", &headers(None, css))
            .is_none());
        // A more specific pattern wins; among equals, the newest.
        let wide = headers(Some(r#"match="/*""#), css);
        d.learn(&cfg(), ("https://a.test/all.css", &wide), None, b"wide");
        let got = d.for_response("https://a.test/app.v2.css", &headers(None, css));
        assert_eq!(got.unwrap().bytes(), b"body{color:red}");
        d.learn(&cfg(), ("https://a.test/app.v0.css", &v1), None, b"newer");
        let got = d.for_response("https://a.test/app.v2.css", &headers(None, css));
        assert_eq!(got.unwrap().bytes(), b"newer");
        // A new version at the same URL replaces the old one.
        d.learn(&cfg(), ("https://a.test/app.v0.css", &v1), None, b"newest");
        assert_eq!(d.inner.lock().unwrap().known.len(), 3);
    }

    #[test]
    fn match_dest_limits_the_types_a_dictionary_is_used_for() {
        let d = OriginDictionaries::default();
        let doc = headers(Some(r#"match="/*", match-dest=("document")"#), "text/html");
        d.learn(&cfg(), ("https://a.test/d", &doc), None, b"<html>");
        assert!(d
            .for_response("https://a.test/p", &headers(None, "text/html"))
            .is_some());
        assert!(d
            .for_response("https://a.test/p.css", &headers(None, "text/css"))
            .is_none());
    }

    #[test]
    fn what_is_not_read_or_too_large_is_not_learned_and_memory_is_capped() {
        let d = OriginDictionaries::default();
        let mut c = cfg();
        let h = headers(Some(r#"match="/:id""#), "text/css");
        assert_eq!(
            d.learn(&c, ("https://a.test/x", &h), None, b"x"),
            Some(Learned::Unsupported)
        );
        assert_eq!(
            d.learn(
                &c,
                ("https://a.test/x", &headers(None, "text/css")),
                None,
                b"x"
            ),
            None
        );
        let h = headers(Some(r#"match="/*""#), "text/css");
        c.origin_dictionary_max = ByteSize(4);
        assert_eq!(
            d.learn(&c, ("https://a.test/x", &h), None, b"12345"),
            Some(Learned::Size)
        );
        assert_eq!(
            d.learn(&c, ("https://a.test/x", &h), None, b""),
            Some(Learned::Size)
        );
        c.origin_dictionaries = false;
        assert_eq!(d.learn(&c, ("https://a.test/x", &h), None, b"1"), None);
        // Past the memory cap the oldest go; past the count cap too.
        let mut c = cfg();
        c.origin_dictionaries_memory = ByteSize(10);
        for i in 0..5u8 {
            d.learn(&c, (&format!("https://a.test/{i}"), &h), None, &[i; 4]);
        }
        assert_eq!(d.bytes.load(Ordering::Relaxed), 8);
        let c = cfg();
        for i in 0..(COUNT_MAX as u32 + 10) {
            d.learn(
                &c,
                (&format!("https://a.test/n{i}"), &h),
                None,
                &i.to_le_bytes(),
            );
        }
        assert_eq!(d.inner.lock().unwrap().known.len(), COUNT_MAX);
        let mut out = String::new();
        d.write_metrics(&mut out);
        assert!(out.contains("quire_origin_dictionaries_total{result=\"unsupported\"} 1"));
        assert!(out.contains("quire_origin_dictionaries_total{result=\"size\"} 2"));
    }
}
