//! `quire-site`: `quire serve`, a vault published as a website. Pages are rendered
//! by an in-process [`Upstream`](quire_server::Upstream) that `quire-server` fills
//! its cache from, so a published page takes the same hit path as a proxied one —
//! a lookup and a write — and rendering, templates and databases only ever run on a
//! miss.
//!
//! - [`site`]: the upstream; versions every page's cache key.
//! - [`snapshot`]: one consistent state of the site and every page's version.
//! - [`routes`]: the URL space. [`respond`]: one request answered.
//! - [`request`]: a request as the site sees it, the error page and the 404.
//! - [`model`]: what templates see; [`templates`]: the templates and stylesheet.
//! - [`feed`]: Atom feed and sitemap. [`llms`]: `/llms.txt`. [`robots`]: `/robots.txt`
//!   and its AI-usage signals. [`extras`]: search and view counts. [`mcp`]: the
//!   read-only MCP endpoint for agents, per audience.
//! - [`reply`]: an answer and its cache policy. [`config`]: `site.toml`.
//! - [`auth`]: sign-in, sign-out, sessions. [`audience`]: signed-in readers'
//!   pages, cached per audience.
//! - [`script`]: the opt-in page script (hover previews) and its hash.
//!   [`speculation`]: the links browsers may prefetch.
//! - `csp`: the pages' `Content-Security-Policy`, with and without that script.
//! - [`related`]: precomputed related notes. [`watch`]: reloads on vault changes.
//! - [`ahead`]: changed pages rendered before anyone asks; `behind`: renders nobody
//!   waits for, at low priority.

#![forbid(unsafe_code)]

pub mod ahead;
pub mod audience;
pub mod auth;
mod behind;
pub mod config;
mod csp;
pub mod dictionary;
pub mod dictionary_pages;
pub mod extras;
pub mod feed;
pub mod gate;
pub mod llms;
pub mod mcp;
pub mod model;
pub mod related;
pub mod reply;
pub mod request;
pub mod respond;
pub mod robots;
pub mod routes;
pub mod script;
pub mod shared;
pub mod site;
pub mod snapshot;
pub mod speculation;
pub mod templates;
pub mod watch;

pub use site::{Site, SiteError};
