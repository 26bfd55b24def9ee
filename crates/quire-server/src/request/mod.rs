//! The request floor: one request start to finish, whichever connection it came on.
//!
//! [`service`] routes it (refusals from [`refuse`], quire's own answers from
//! [`reply`], admin paths, the client); [`lookup`] finds what the store holds for it
//! (the fast path calls the same lookup; an entry not in memory is read in by [`cold`]
//! off the worker); [`hit`] serves a usable entry; an
//! [`exchange`] takes it to the upstream ([`pass`], or a fill); [`tunnel`] passes
//! `Upgrade` connections through; [`peer`] answers a cluster peer's requests;
//! [`prefill`] fills what an upstream says changed before anyone asks; [`prefetch`]
//! answers a browser's prefetch only from the store; [`previous`]
//! answers a miss from its page's previous presentation while the current one fills; [`body`] is every response body quire sends.

pub(crate) mod agents;
pub(crate) mod body;
pub(crate) mod cold;
pub(crate) mod exchange;
pub(crate) mod hit;
pub(crate) mod lookup;
pub(crate) mod pass;
pub(crate) mod peer;
pub(crate) mod prefetch;
pub mod prefill;
pub(crate) mod previous;
pub(crate) mod refuse;
pub(crate) mod reply;
pub(crate) mod service;
pub(crate) mod tunnel;
