//! `quire-server`: the HTTP service of quire on hyper and tokio — the hit path, the
//! fill path with request coalescing, the origin client, purge and the admin API,
//! metrics and graceful shutdown. Policy (what is stored, for how long, under which
//! key) comes from `quire-http`; bytes live in `quire-store`.
//!
//! - [`config`]: every option with its default (the TOML the binary reads).
//! - [`state`]: the shared state built from it; [`policy`]: what the configuration
//!   decides per request, swapped whole on reload.
//! - [`object`]: how a response lies in the store (record, bodies per coding, tags).
//! - [`compress`]: content codings, computed once per response on the bounded
//!   [`compress_pool`]; [`recompress`] adds the slower codings in the background.
//! - [`invalidate`]: the invalidation log and the gate every store write passes, so
//!   a purge wins every race with a fill.
//! - [`upstream`]: where fills go (an HTTP [`origin`] or an in-process renderer);
//!   [`origin`]: the origin client and what is forwarded to it; [`origins`]:
//!   several of them, routed by host and path, weighted and health-checked.
//! - [`fill`]: coalesced, streamed fills; [`miss`] fetches, [`commit`] stores,
//!   every record write going through [`put`].
//! - [`body`]: response bodies (mapped bytes, fills, pass-through).
//! - [`metrics`]: lock-free counters and the Prometheus rendering; [`access_log`]:
//!   one line per request, written off the request path; [`rate_limit`]: the
//!   per-client token buckets for hits and for requests to the origin.
//! - [`service`]: one request start to finish. [`lookup`] finds what the store holds
//!   for it (the fast path calls the same lookup); [`hit`] serves it; an
//!   [`exchange`] takes it to the origin ([`pass`], or a fill); [`reply`] writes
//!   quire's own small answers; [`admin`], [`purge_api`] and [`purge`] are the
//!   operator's; [`bus`] is where a cluster's shared invalidation log plugs in.
//! - [`fastpath`]: fresh HTTP/1.1 hits answered off the socket without hyper, and
//!   the service's answers written by [`h1`] on the same connection.
//! - [`clock`]: the wall clock freshness is decided by (tests move it).
//! - [`sys`]: the crate's only `unsafe` code (two socket calls).
//! - [`server`]: the listener, connection limits and graceful shutdown ([`conns`]:
//!   the per-client cap, idle connections closed when full); [`guard`]
//!   refuses ambiguously framed HTTP/1.1 requests on the byte stream; [`sendfile`]
//!   sends large hit bodies from the volume file; [`client`] says who a request is
//!   from (the peer, or the client a trusted proxy names); [`refuse`] turns away
//!   request heads the RFCs forbid before they are routed; [`tls`] holds the
//!   certificate and rustls' settings, and `wire` is the connection underneath
//!   (cleartext or TLS) that the fast path and hyper both run on; `redirect` is the
//!   plain-HTTP listener that sends clients to HTTPS; [`inherit`] takes the
//!   listening sockets systemd or an upgrading quire hands over; [`tunnel`] passes
//!   WebSocket (any `Upgrade`) connections through to the origin.

#![deny(unsafe_code)]

pub mod access_log;
pub mod admin;
mod body;
pub mod bus;
pub mod client;
pub mod clock;
mod commit;
pub mod compress;
pub mod compress_pool;
pub mod config;
mod conns;
mod exchange;
mod fastpath;
pub mod fill;
pub mod guard;
mod h1;
mod h2conn;
mod hit;
#[expect(
    unsafe_code,
    reason = "owning a descriptor handed over at exec, by number; see the module doc"
)]
pub mod inherit;
mod inline;
mod invalidate;
mod key_epoch;
mod lookup;
pub mod metrics;
mod miss;
pub mod object;
pub mod origin;
pub mod origins;
mod pass;
pub mod policy;
pub mod purge;
pub mod purge_api;
mod put;
pub mod rate_limit;
mod recompress;
mod redirect;
mod refuse;
mod reply;
mod sendfile;
pub mod server;
mod service;
mod stall;
pub mod state;
#[expect(
    unsafe_code,
    reason = "the two socket calls with no safe form; see the module doc"
)]
mod sys;
pub mod tls;
pub mod tunnel;
pub mod upstream;
mod wire;

pub use clock::Clock;
pub use config::Config;
pub use server::Server;
pub use state::{Ctx, StartError};
pub use upstream::Upstream;
