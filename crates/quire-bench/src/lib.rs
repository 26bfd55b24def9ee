//! `quire-bench`: the whole-workload benchmarks behind `quire bench`, their baselines and
//! their load generators, kept out of the crates they measure so that those read as
//! what they are (an engine, a server, a vault). The `quire` binary parses the command
//! line and calls one `run` per command; everything else is here.
//!
//! Organised by what is measured:
//!
//! - [`store`]: `quire bench store`, quire's memory-mapped store against the
//!   file-per-entry `baseline` behind the store's `Engine` trait, scenario by scenario
//!   (warm reads, a Zipf mix scored against an exact LRU, eviction, overflow, restart,
//!   the RAM tier).
//! - [`http`]: `quire bench http`, an HTTP server under load from pinned cores beside
//!   nginx and Varnish, with quire's own generator in [`http::load`] (`quire bench
//!   load`, started by `bench http` as a process of its own).
//! - [`serve`]: `quire bench serve`, miss and hit times of note pages as a vault grows.
//! - [`search`]: `quire bench search`, full-text query latency while the index is
//!   rebuilt.
//! - [`synth`]: the deterministic synthetic vault `serve` and `search` run on.
//! - `histogram`: the latency histogram the store and HTTP benchmarks share.
//! - `machine`: the machine and its state (cores, CPU model, busy and steal time),
//!   reported beside every figure.
//!
//! Key decision: a benchmark that starts quire as a server (`bench http`) re-runs the
//! binary it is linked into (`std::env::current_exe`), so it measures exactly the build
//! that runs it; `bench serve` runs the server in-process instead.

// (`deny`, not `forbid`: the load generator's wait, `http::load::wait`, is the one
// module allowed `unsafe`, for a system call rustix makes only in whole milliseconds.)
#![deny(unsafe_code)]

mod baseline;
pub mod dict_codings;
mod histogram;
pub mod http;
mod machine;
pub mod search;
pub mod serve;
mod serve_bases;
mod serve_mcp;
pub mod store;
pub mod synth;
