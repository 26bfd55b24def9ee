//! The HTTP/1.1 floor: fresh hits answered off the socket without hyper
//! ([`fastpath`]), and the writer ([`h1`]) that frames the service's answers on the
//! same connection as hyper would, so a keep-alive connection keeps the fast path.

pub(crate) mod fastpath;
pub(crate) mod h1;
