//! HTTP/2 connections: what quire adds around the protocol engine for them (write
//! coalescing, [`cork`]).

pub(crate) mod cork;
