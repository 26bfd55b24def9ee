//! The operator's floor: purges ([`purge`], and its admin endpoint [`purge_api`]),
//! the rest of the admin API ([`admin`]; what every endpoint shares,
//! [`answer`]), the port a cluster's shared invalidation
//! log plugs into ([`bus`]), where a purge's refills go ([`refill`]) and the access
//! log ([`access_log`]).

pub mod access_log;
pub mod admin;
pub(crate) mod answer;
pub mod bus;
pub mod purge;
pub mod purge_api;
pub(crate) mod refill;
