//! `quire-http`: the HTTP caching semantics of quire, as pure functions of requests,
//! responses and an injected clock. It knows nothing of sockets, runtimes or the
//! store's layout: `quire-server` feeds it parsed heads and acts on its decisions.
//!
//! - [`cache_control`]: `Cache-Control` and `CDN-Cache-Control` directives (RFC 9111
//!   §5.2, RFC 9213), parsed leniently and safely from hostile input.
//! - [`freshness`]: storability (§3), freshness lifetime and heuristics (§4.2), age
//!   (§4.2.3), reuse and revalidation decisions (§4), stale-while-revalidate and
//!   stale-if-error (RFC 5861).
//! - [`key`]: URL normalisation and the cache key, `Vary` (§4.1).
//! - [`bypass`]: which requests are served from the anonymous cache at all.
//! - [`encoding`]: `Accept-Encoding` negotiation among stored variants; [`media`]:
//!   whether an `Accept` prefers markdown to HTML.
//! - [`dictionary`]: compression dictionaries (RFC 9842): the fields and the `dcz`
//!   header.
//! - [`dictionary_use`]: an origin's `Use-As-Dictionary` and the URL pattern it
//!   names.
//! - [`conditional`]: `If-None-Match`/`If-Modified-Since` (RFC 9110 §13) and `Range`
//!   (RFC 9110 §14) answered from a stored response.
//! - [`status`]: the `Cache-Status` response header (RFC 9211).
//! - [`meta`]: the stored-metadata codec (response head and timing) kept beside each body.
//! - [`fault`]: whose fault an error is ([`Side`]), for the error types of every crate.

#![forbid(unsafe_code)]

pub mod bypass;
pub mod cache_control;
pub mod conditional;
pub mod dictionary;
pub mod dictionary_use;
pub mod encoding;
pub mod fault;
pub mod freshness;
pub mod key;
pub mod media;
pub mod meta;
pub mod status;
pub mod syntax;

pub use fault::{Fault, Side};
