//! `quire-vault`: the publishing model of `quire serve` — a folder of markdown notes
//! (an Obsidian-style vault) read into notes with front matter, wikilinks resolved
//! across folders, backlinks, and HTML rendering that never shows a reader a note
//! they may not see, plus what a published site keeps beside its pages: search,
//! related notes, readers and view counts. It knows nothing of sockets or the cache:
//! `quire-site` serves what it renders, through `quire-server`.
//!
//! - [`front`]: YAML front matter.
//! - [`links`]: wikilinks, embeds and slugs; `scan`: code and comments in raw markdown.
//! - [`note`]: one note and its visibility.
//! - [`vault`]: loading a folder, resolving names, backlinks; [`base_files`]: its
//!   `.base` files; [`bases`]: the Bases engine that runs them; [`canvas`]: JSON
//!   Canvas files.
//! - [`graph`]: a note's local graph and the site's graph, as static SVG.
//! - [`render`]: markdown to HTML; `highlight`: code blocks.
//! - [`pages`]: index, folder, tag and backlink listings, filtered by audience.
//! - [`preview`]: what a link preview of a note shows.
//! - [`readers`]: the users file, password hashes, signed session cookies.
//! - [`views`]: view counts through a bounded queue into SQLite.
//! - `fault`: when trying again can help, for the errors above (`quire_http::Fault`).
//! - [`search`]: full-text search (SQLite FTS5), filtered by audience in SQL.
//! - [`related`]: related notes per audience, computed when notes change.

#![forbid(unsafe_code)]

pub mod base_files;
pub mod bases;
pub mod canvas;
mod fault;
pub mod front;
pub mod graph;
mod highlight;
mod html;
pub mod links;
pub mod note;
pub mod pages;
pub mod preview;
pub mod readers;
pub mod related;
pub mod render;
mod scan;
pub mod search;
pub mod vault;
pub mod views;

#[cfg(test)]
mod testing;

pub use note::{Note, Visibility};
pub use vault::Vault;
