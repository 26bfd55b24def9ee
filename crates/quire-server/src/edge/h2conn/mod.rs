//! HTTP/2 connections: what quire adds around the protocol engine for them (write
//! coalescing, [`cork`]; the executor that polls a stream once in place, [`inline`]).

pub(crate) mod cork;
pub(crate) mod inline;
