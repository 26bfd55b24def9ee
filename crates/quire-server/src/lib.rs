//! `quire-server`: the HTTP service of quire on hyper and tokio — the hit path, the
//! fill path with request coalescing, the origin client, purge and the admin API,
//! metrics and graceful shutdown. Policy (what is stored, for how long, under which
//! key) comes from `quire-http`; bytes live in `quire-store`.
//!
//! The crate is built in floors by role, each a folder whose `mod.rs` declares and
//! re-exports (the plan and why: `docs/architecture.md`):
//!
//! - [`config`]: every option with its default (the TOML the binary reads).
//! - [`metrics`]: lock-free counters and the Prometheus rendering.
//! - `cache`: how a response lies in the store ([`object`]), the invalidation log
//!   and gate every store write passes, the one writer of records.
//! - `edge`: what a connection passes through before it is a request: client
//!   identity ([`client`]), connection caps, rate limits, TLS and
//!   ACME ([`tls`]), sockets handed over ([`inherit`]), the framing guard
//!   ([`guard`]), stalls, `sendfile`, and all of the crate's `unsafe`.
//! - [`upstream`]: the [`Upstream`] port, the HTTP [`origin`] client and the
//!   [`origins`] pool with its health checks.
//! - [`trace`]: OpenTelemetry spans and their exporter, which no request waits
//!   for.
//! - `fill`: coalesced, streamed fills, their commit, and compression
//!   ([`compress`], on a bounded pool).
//! - `request`: one request start to finish: routing, lookup, hit, pass, the
//!   exchange with the upstream, quire's own replies, tunnels.
//! - `http1`: the fast path (fresh hits off the socket without hyper) and its writer.
//! - `ops`: [`purge`], [`purge_api`], [`admin`], the cluster [`bus`] port, the
//!   [`access_log`].
//! - `error`: the side and retry every seam's error says (`quire_http::Fault`).
//! - The root wires them: `state` ([`Ctx`], the shared state), [`policy`] (what the
//!   configuration decides per request, swapped whole on reload, and the checks
//!   that need several sections), `server` ([`Server`], the listener loop that hands
//!   connections to the fast path or hyper), `clock` ([`Clock`]).
//!
//! The face of the crate is the modules declared `pub` or re-exported below (each
//! one used by another crate, a test or the fuzz target); the floors themselves are
//! private, so `unreachable_pub` sees every item no other crate can name.

#![deny(unsafe_code)]

mod cache;
mod clock;
pub mod config;
mod edge;
pub(crate) mod error;
mod fill;
mod http1;
pub mod metrics;
mod ops;
pub mod policy;
mod request;
mod server;
mod state;
pub mod trace;
pub mod upstream;

pub use cache::object;
pub use edge::{client, guard, inherit, tls};
pub use fill::{compress, uncached_work};
pub use ops::{access_log, admin, bus, purge, purge_api};
pub use request::prefill;
pub use upstream::{origin, origins};

pub use clock::Clock;
pub use config::Config;
pub use policy::StartError;
pub use server::Server;
pub use state::Ctx;
pub use upstream::Upstream;
