//! Full-text search over a vault's published notes: an SQLite FTS5 index that
//! `quire serve`'s `/search` and `/api/search` query. This module owns the index file,
//! its schema, writing it from a [`Vault`] and answering queries; the HTTP side only
//! calls [`SearchIndex::search`].
//!
//! Key decisions:
//! - **One writer, many read-only readers, WAL** (a search service on SQLite FTS5 that
//!   shared one connection behind a mutex saw searches block behind batch writes; a
//!   read-only connection in WAL mode brought its queries to 0-0.4 ms): the indexer
//!   writes through one connection behind a mutex; queries run on a small pool of
//!   `SQLITE_OPEN_READ_ONLY` connections and never take the writer's lock, so a
//!   re-index never blocks a search — readers keep answering from the last committed
//!   contents until the re-index commits.
//! - **Each audience is ranked among the notes it may read**: one FTS5 table per
//!   audience (anonymous, signed-in, admin), each indexing the notes of its
//!   visibility and below (`search/store.rs`). bm25's statistics (how many notes
//!   hold a word, the average lengths) are then the reader's own: with one shared
//!   table, five private notes sharing a public note's words moved an anonymous
//!   reader's score for it from 1.09 to 0.000003, telling them the private notes
//!   exist. The cost: a public note is indexed three times, a private one twice —
//!   on the synthetic vault (70 % public, 27 % private) the file grows 1.76× (2,000
//!   notes: 13.0 → 22.8 MB) and a full re-index takes 1.6× as long — while a query
//!   still reads one table, no larger than before. Rejected: computing bm25 from
//!   per-audience statistics of our own, since FTS5 gives a note's per-phrase
//!   counts only to auxiliary functions (its C API) or by scanning `fts5vocab`
//!   instance rows on every query.
//! - **The audience is checked twice more inside SQL**: rowids are
//!   `visibility << 32 | rank`, so an audience's notes are a rowid range FTS5
//!   searches within, and the statement that returns hits joins `notes` and checks
//!   `visibility <= audience` again (`search/read.rs`).
//! - **Reader input is never FTS syntax** (`search/query.rs`): words are quoted,
//!   phrases and prefixes re-created by us; a malformed query is a sanitised one or
//!   an empty result with a notice, and [`SearchIndex::search`] never returns an
//!   error.
//! - **External-content FTS5** (`search/store.rs`): the text lives once, in table
//!   `notes`; each audience's FTS table indexes title (bm25 weight 10), tags (4)
//!   and body (1), tokenised by `porter unicode61 remove_diacritics 2`, with prefix
//!   indexes for 2-, 3- and 4-character prefixes (as-you-type queries; +13 % index
//!   size, a 4-letter prefix twice as fast). Bodies are indexed as readers see them
//!   (`search/text.rs`).
//! - **Bounded work per query**: bm25 ranks at most
//!   [`IndexOptions::candidates_max`] matches (the best-linked, plus title matches);
//!   snippets are made for the returned hits only.
//! - **A full re-index is one transaction** by default: readers see the old index or
//!   the new one, never a mix, and it kept reader latency lower than batches of
//!   commits in `quire bench search` ([`IndexOptions::reindex_batch_notes`] selects
//!   batches).
//! - The index is derived data: a file of another schema version is rebuilt empty,
//!   and [`SearchIndex::open_or_rebuild`] moves a corrupt file aside.

mod error;
mod query;
mod read;
mod snippet;
mod store;
mod text;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

pub use error::SearchError;
pub use query::canonical as canonical_query;
pub(crate) use query::{sanitize, Sanitized};
pub use read::Hit;
pub use text::{plain_body, snippet_html};

use error::sql_err;

use store::{
    checkpoint, move_aside, open_writer, remove, remove_paths, replace_all, row_of, rowid_end,
    stored_paths, upsert, visibility_code, Row,
};

use crate::note::Visibility;
use crate::vault::Vault;

/// Most hits one query returns.
pub const LIMIT_MAX: usize = 100;

/// Tuning knobs; [`IndexOptions::default`] is what `quire serve` uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOptions {
    /// Notes per transaction in [`SearchIndex::reindex`]; 0: the whole re-index is
    /// one transaction (readers never see a half-built index).
    pub reindex_batch_notes: usize,
    /// Idle read-only connections kept open; more are opened when queries overlap
    /// and closed afterwards.
    pub readers_idle_max: usize,
    /// Page cache of each read-only connection, KiB.
    pub reader_cache_kib: u32,
    /// `mmap_size` of each read-only connection, bytes.
    pub reader_mmap_bytes: u64,
    /// Most matches ranked by bm25 per query. A query matching more (a very common
    /// word) ranks the best-linked `candidates_max` of them plus the first title
    /// matches past them: bounded work (~1 µs of bm25 per candidate), at the price
    /// of exact ranking for such queries. Never fewer than the hits asked for.
    pub candidates_max: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            reindex_batch_notes: 0,
            readers_idle_max: 8,
            reader_cache_kib: 16 * 1024,
            reader_mmap_bytes: 256 << 20,
            candidates_max: 1000,
        }
    }
}

/// The answer to a query.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Results {
    /// Best first.
    pub hits: Vec<Hit>,
    /// The FTS5 query actually run (empty when nothing was searchable).
    pub query: String,
    /// Something the reader should know: the query was cut, had nothing searchable,
    /// or search failed.
    pub notice: Option<String>,
}

/// The full-text index of one vault.
pub struct SearchIndex {
    path: PathBuf,
    options: IndexOptions,
    /// The only connection that writes; only the indexer takes this lock.
    writer: Mutex<Connection>,
    /// Idle read-only connections; the lock is held only to take or return one.
    readers: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("path", &self.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic mid-transaction rolled it back when the transaction dropped: the
    // connection is still sound.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SearchIndex {
    /// Opens (or creates, with its folders) the index at `path`, with default options.
    pub fn open(path: &Path) -> Result<SearchIndex, SearchError> {
        SearchIndex::open_with(path, IndexOptions::default())
    }

    /// Opens the index at `path`; a corrupt file is moved aside (to
    /// `<path>.corrupt-<unix secs>`) and a fresh one created. The flag says whether
    /// that happened: the caller should then [`reindex`](SearchIndex::reindex).
    pub fn open_or_rebuild(path: &Path) -> Result<(SearchIndex, bool), SearchError> {
        match SearchIndex::open(path) {
            Ok(i) => Ok((i, false)),
            Err(e) if e.is_corrupt() => {
                tracing::warn!("{e}; moving it aside and starting a new index");
                move_aside(path)?;
                Ok((SearchIndex::open(path)?, true))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the index at `path` with `options`.
    pub fn open_with(path: &Path, options: IndexOptions) -> Result<SearchIndex, SearchError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| SearchError::Io {
                path: dir.to_owned(),
                op: "creating its folder",
                source,
            })?;
        }
        let writer = open_writer(path)?;
        let index = SearchIndex {
            path: path.to_owned(),
            options,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        };
        // Fail now, not on the first query, if readers cannot open it.
        let reader = index.open_reader()?;
        lock(&index.readers).push(reader);
        Ok(index)
    }

    /// Notes in the index (every audience).
    pub fn note_count(&self) -> Result<usize, SearchError> {
        let n: i64 =
            self.with_reader(|c| c.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Replaces the index's contents with every published note of `vault`. Searches
    /// meanwhile answer from the previous contents (all of them, until the commit, in
    /// the default one-transaction mode; note by note with
    /// [`IndexOptions::reindex_batch_notes`]).
    pub fn reindex(&self, vault: &Vault) -> Result<(), SearchError> {
        // The text is extracted before the writer lock is taken.
        let mut rows: Vec<Row> = (0..vault.notes().len())
            .filter_map(|i| row_of(vault, i))
            .collect();
        // Rank order: most linked first (the sort is stable: then by path).
        rows.sort_by_key(|r| std::cmp::Reverse(r.backlinks));
        let err = sql_err(&self.path, "re-indexing");
        let mut conn = lock(&self.writer);
        if self.options.reindex_batch_notes == 0 {
            replace_all(&mut conn, &rows).map_err(&err)?;
        } else {
            for chunk in rows.chunks(self.options.reindex_batch_notes) {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(&err)?;
                for r in chunk {
                    upsert(&tx, r).map_err(&err)?;
                }
                tx.commit().map_err(&err)?;
            }
            let keep: HashSet<&str> = rows.iter().map(|r| r.path.as_str()).collect();
            let stale: Vec<String> = stored_paths(&conn)
                .map_err(&err)?
                .into_iter()
                .filter(|p| !keep.contains(p.as_str()))
                .collect();
            remove_paths(&mut conn, &stale).map_err(&err)?;
        }
        checkpoint(&conn, &self.path);
        Ok(())
    }

    /// Re-indexes the notes at `changed` (indices into `vault`) and removes the notes
    /// at `removed_paths` (vault-relative), in one transaction. A changed note that is
    /// no longer published is removed.
    pub fn update(
        &self,
        vault: &Vault,
        changed: &[usize],
        removed_paths: &[String],
    ) -> Result<(), SearchError> {
        let mut rows = Vec::with_capacity(changed.len());
        let mut gone: Vec<String> = removed_paths.to_vec();
        for &i in changed {
            match (row_of(vault, i), vault.notes().get(i)) {
                (Some(r), _) => rows.push(r),
                (None, Some(n)) => gone.push(n.path.clone()),
                (None, None) => tracing::warn!(
                    "search index {}: update of note {i}, past the vault's {} notes",
                    self.path.display(),
                    vault.notes().len()
                ),
            }
        }
        let err = sql_err(&self.path, "updating");
        let mut conn = lock(&self.writer);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        for r in &rows {
            upsert(&tx, r).map_err(&err)?;
        }
        for p in &gone {
            remove(&tx, p).map_err(&err)?;
        }
        tx.commit().map_err(&err)
    }

    /// The best `limit` (at most [`LIMIT_MAX`]) notes `audience` may read that match
    /// `q`. Never fails: problems are logged and answered with no hits and a notice.
    pub fn search(&self, q: &str, audience: Visibility, limit: usize) -> Results {
        self.run(sanitize(q, false), audience, limit)
    }

    /// [`search`](SearchIndex::search) for a query still being typed: its last word
    /// is a prefix.
    pub fn search_as_you_type(&self, q: &str, audience: Visibility, limit: usize) -> Results {
        self.run(sanitize(q, true), audience, limit)
    }

    fn run(&self, s: Sanitized, audience: Visibility, limit: usize) -> Results {
        let limit = limit.min(LIMIT_MAX);
        if s.fts.is_empty() || limit == 0 {
            return Results {
                hits: Vec::new(),
                query: s.fts,
                notice: s.notice,
            };
        }
        let ask = read::Ask {
            fts: &s.fts,
            words: &s.words,
            end: rowid_end(audience),
            visibility: visibility_code(audience),
            sql: read::Statements::of(visibility_code(audience)),
            limit,
            candidates_max: self.options.candidates_max,
        };
        let found = self.with_reader(|c| read::hits(c, &ask));
        match found {
            Ok(hits) => Results {
                hits,
                query: s.fts,
                notice: s.notice,
            },
            Err(e) => {
                tracing::warn!(query = %s.fts, "{e}");
                Results {
                    hits: Vec::new(),
                    query: s.fts,
                    notice: Some("search failed; the server log says why".to_owned()),
                }
            }
        }
    }

    /// Runs `f` on an idle read-only connection (opening one if none is idle).
    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, SearchError> {
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(c) => c,
            None => self.open_reader()?,
        };
        let out = f(&conn).map_err(sql_err(&self.path, "searching"));
        // A connection that failed is closed rather than reused.
        if out.is_ok() {
            let mut pool = lock(&self.readers);
            if pool.len() < self.options.readers_idle_max {
                pool.push(conn);
            }
        }
        out
    }

    fn open_reader(&self) -> Result<Connection, SearchError> {
        let err = sql_err(&self.path, "opening a reader");
        let c = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(&err)?;
        c.busy_timeout(Duration::from_secs(2)).map_err(&err)?;
        c.execute_batch(&format!(
            "PRAGMA cache_size = -{}; PRAGMA mmap_size = {}; PRAGMA temp_store = MEMORY;",
            self.options.reader_cache_kib, self.options.reader_mmap_bytes
        ))
        .map_err(&err)?;
        Ok(c)
    }
}
