//! The edge floor: everything a connection passes through before it is a request.
//!
//! Who a client is ([`client`]) and how many connections and requests it may hold
//! ([`conns`], [`rate_limit`]); the sockets handed over by systemd or an upgrading
//! quire ([`inherit`]); TLS and ACME for the listener ([`tls`]) and the plain-HTTP
//! listener that redirects to it ([`redirect`]); the connection underneath both
//! HTTP/1.1 paths ([`wire`], cleartext or TLS) and the socket calls under it
//! ([`sys`]); the framing guard in front of hyper ([`guard`]); the stall sweep that
//! drops a response nobody reads ([`stall`]); the slots of upgraded connections
//! ([`upgrades`]); the budget of uncached work all clients share, handed out
//! fairly ([`budget`]); `sendfile(2)` of large hits
//! ([`sendfile`]); what quire adds around HTTP/2 ([`h2conn`]).
//!
//! All of the crate's `unsafe` is on this floor, in two files: [`sys`] (the socket
//! calls with no safe form, the hit loop's epoll set handed to tokio, and a cache
//! prefetch hint for repeat hits) and [`inherit`] (owning a descriptor handed over by
//! number). The crate root denies `unsafe_code`; only those two modules are let off.

pub(crate) mod budget;
pub mod client;
pub(crate) mod conns;
pub(crate) mod crawlers;
pub mod guard;
pub(crate) mod h2conn;
#[expect(
    unsafe_code,
    reason = "owning a descriptor handed over at exec, by number; see the module doc"
)]
pub mod inherit;
pub(crate) mod rate_limit;
pub(crate) mod redirect;
pub(crate) mod sendfile;
pub(crate) mod stall;
#[expect(
    unsafe_code,
    reason = "the socket calls with no safe form, an epoll set handed to tokio, a prefetch hint; see the module doc"
)]
pub(crate) mod sys;
pub mod tls;
pub(crate) mod upgrades;
pub(crate) mod wire;
