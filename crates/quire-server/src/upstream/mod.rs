//! The upstream floor: where fills and passed requests go.
//!
//! [`port`] is the [`Upstream`] trait and its types, importing no implementation, and
//! `error` its error (re-exported by [`origin`]);
//! [`origin`] is the HTTP origin client that implements it; [`origins`] is several
//! origins routed by host and path, weighted and health-checked, also an
//! [`Upstream`]. `quire-site`'s renderer and `quire-cluster`'s peer fill implement the
//! same port from outside the crate.

pub(crate) mod error;
pub mod origin;
pub mod origins;
pub(crate) mod port;

pub use port::{
    prepend, read_ahead, versioned, Ahead, Audience, BoxError, FillMark, RouteBy, UpBody, UpFuture,
    Upstream, PEER_HEADER,
};
