//! The index file: its schema, opening it for writing, and every write — a whole
//! re-index, a note upserted, a note removed.
//!
//! Key decisions:
//! - **Rowids carry the audience and the static rank**: `visibility << 32 | rank`,
//!   rank 1 for the most linked note (counting links from notes at most as hidden
//!   as it: see [`Row::backlinks`]). Readers find an audience's notes as a rowid
//!   range and the best-linked first ([`super::read`]). A full re-index renumbers;
//!   an upserted note keeps its rank (moving band if its visibility changed), a new
//!   one comes last.
//! - **One FTS5 table per audience** ([`FTS_TABLES`]): the table of an audience
//!   indexes exactly the notes it may read (a public note is in all three, a draft
//!   in the admins' only), so bm25's statistics — the number of notes, their average
//!   lengths, how many notes hold a word — are that audience's: no score an
//!   audience sees depends on a note it may not read (see `super` for the cost).
//! - **External content**: the text is stored once, in `notes`; each FTS table is
//!   only an index whose content is a view of `notes` restricted to its audience
//!   (`audience_public`, …), so each is rebuilt in one statement (`'rebuild'`), and
//!   a note is removed from the tables holding it with its old text (`'delete'`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::error::{sql_err, SearchError};
use super::text::{self, plain_body};
use crate::note::Visibility;
use crate::vault::Vault;

/// `PRAGMA user_version` of the schema below; a file with another is rebuilt.
/// 3: one FTS table per audience (2 had one `notes_fts` for all).
pub(super) const SCHEMA_VERSION: i64 = 3;

/// The FTS5 table of each audience, by visibility code: it indexes the notes of
/// that visibility and below.
pub(super) const FTS_TABLES: [&str; 3] =
    ["notes_fts_public", "notes_fts_private", "notes_fts_draft"];

/// The view each FTS table takes its content from, by visibility code.
const CONTENT_VIEWS: [&str; 3] = ["audience_public", "audience_private", "audience_draft"];

/// The notes table; [`fts_schema`] adds each audience's view and FTS table.
const NOTES_SCHEMA: &str = "
CREATE TABLE notes (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    title TEXT NOT NULL,
    tags TEXT NOT NULL,
    body TEXT NOT NULL,
    visibility INTEGER NOT NULL,
    version INTEGER NOT NULL
);
";

/// The view and FTS table of the audience of visibility `code`.
fn fts_schema(code: usize) -> String {
    let (table, view) = (FTS_TABLES[code], CONTENT_VIEWS[code]);
    format!(
        "CREATE VIEW {view} AS SELECT id, title, tags, body FROM notes WHERE visibility <= {code};
         CREATE VIRTUAL TABLE {table} USING fts5(
             title, tags, body,
             content = '{view}', content_rowid = 'id',
             tokenize = 'porter unicode61 remove_diacritics 2',
             prefix = '2 3 4'
         );"
    )
}

/// Drops whatever an index of any schema version holds, then creates this one's.
fn recreate_sql() -> String {
    let mut sql = String::from("DROP TABLE IF EXISTS notes_fts;");
    for (table, view) in FTS_TABLES.iter().zip(CONTENT_VIEWS) {
        sql.push_str(&format!(
            "DROP TABLE IF EXISTS {table}; DROP VIEW IF EXISTS {view};"
        ));
    }
    sql.push_str("DROP TABLE IF EXISTS notes;");
    sql.push_str(NOTES_SCHEMA);
    for code in 0..FTS_TABLES.len() {
        sql.push_str(&fts_schema(code));
    }
    sql.push_str(&format!("PRAGMA user_version = {SCHEMA_VERSION};"));
    sql
}

/// The FTS tables holding a note of visibility code `visibility`: its audience's
/// and every wider one's.
fn tables_holding(visibility: i64) -> &'static [&'static str] {
    let from = usize::try_from(visibility)
        .unwrap_or(0)
        .min(FTS_TABLES.len());
    &FTS_TABLES[from..]
}

/// Rowids are `visibility << 32 | rank`: an audience's notes are a rowid range FTS5
/// seeks within, and within it the rank orders notes by backlinks (most first).
pub(super) const VISIBILITY_SHIFT: u32 = 32;
pub(super) const RANK_MASK: i64 = (1 << VISIBILITY_SHIFT) - 1;

/// A note as stored.
pub(super) struct Row {
    pub(super) path: String,
    url: String,
    title: String,
    tags: String,
    body: String,
    visibility: i64,
    version: i64,
    /// Notes linking to it that are at most as hidden as it: the static rank. A
    /// link from a private note does not lift a public one, so the order in which
    /// an audience's notes are ranked past the bound depends on its notes only.
    pub(super) backlinks: usize,
}

pub(super) fn visibility_code(v: Visibility) -> i64 {
    match v {
        Visibility::Public => 0,
        Visibility::Private => 1,
        Visibility::Draft => 2,
    }
}

/// Note `i` as stored, or `None` when it is not published (its page is another's).
pub(super) fn row_of(vault: &Vault, i: usize) -> Option<Row> {
    let n = vault.notes().get(i)?;
    if vault.by_url(&n.url) != Some(i) {
        return None;
    }
    Some(Row {
        path: n.path.clone(),
        url: n.url.clone(),
        title: text::clean(n.title(), 1024),
        tags: text::clean(&n.front.tags.join(" "), 4096),
        body: plain_body(n),
        visibility: visibility_code(n.visibility()),
        // Stored as its bits: SQLite integers are signed.
        version: n.version as i64,
        backlinks: vault
            .backlinks(i)
            .iter()
            .filter(|&&j| vault.notes()[j].visibility() <= n.visibility())
            .count(),
    })
}

pub(super) fn open_writer(path: &Path) -> Result<Connection, SearchError> {
    let err = sql_err(path, "opening");
    let mut c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(&err)?;
    c.busy_timeout(Duration::from_secs(5)).map_err(&err)?;
    let mode: String = c
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(&err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SearchError::NotWal {
            path: path.to_owned(),
            mode,
        });
    }
    // synchronous=NORMAL: a commit may be lost on power failure, never corrupted —
    // and the index is rebuilt from the vault anyway.
    c.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 67108864;
         PRAGMA cache_size = -32768; PRAGMA temp_store = MEMORY;",
    )
    .map_err(&err)?;
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&err)?;
    if version != SCHEMA_VERSION {
        let foreign: Vec<String> = {
            let mut stmt = c
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = 'table'
                     AND name <> 'notes' AND name NOT LIKE 'notes_fts%' LIMIT 5",
                )
                .map_err(&err)?;
            let names = stmt.query_map([], |r| r.get(0)).map_err(&err)?;
            names.collect::<rusqlite::Result<_>>().map_err(&err)?
        };
        if !foreign.is_empty() {
            return Err(SearchError::Foreign {
                path: path.to_owned(),
                tables: foreign.join(", "),
            });
        }
        if version != 0 {
            tracing::info!(
                "search index {}: schema {version} is not {SCHEMA_VERSION}; rebuilding it empty",
                path.display()
            );
        }
        let tx = c.transaction().map_err(&err)?;
        tx.execute_batch(&recreate_sql()).map_err(&err)?;
        tx.commit().map_err(&err)?;
    }
    Ok(c)
}

/// Moves the file at `path` and its `-wal` and `-shm` companions aside.
pub(super) fn move_aside(path: &Path) -> Result<(), SearchError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for suffix in ["", "-wal", "-shm"] {
        let mut from = path.as_os_str().to_owned();
        from.push(suffix);
        let from = PathBuf::from(from);
        if !from.exists() {
            continue;
        }
        let mut to = path.as_os_str().to_owned();
        to.push(format!(".corrupt-{secs}{suffix}"));
        std::fs::rename(&from, &to).map_err(|source| SearchError::Io {
            path: from.clone(),
            op: "moving a corrupt index aside",
            source,
        })?;
    }
    Ok(())
}

/// Writes note `r` as row `id` of `notes` (its FTS rows are the caller's).
fn insert(tx: &Connection, id: i64, r: &Row) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO notes (id, path, url, title, tags, body, visibility, version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        r.path,
        r.url,
        r.title,
        r.tags,
        r.body,
        r.visibility,
        r.version
    ])?;
    Ok(())
}

/// The whole index replaced in one transaction: readers see the old or the new.
pub(super) fn replace_all(conn: &mut Connection, rows: &[Row]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("DELETE FROM notes", [])?;
    for (rank, r) in (1..).zip(rows) {
        insert(&tx, rowid(r.visibility, rank), r)?;
    }
    // Rebuilds each audience's FTS index from its view of `notes`.
    for table in FTS_TABLES {
        tx.execute(
            &format!("INSERT INTO {table} ({table}) VALUES ('rebuild')"),
            [],
        )?;
    }
    tx.commit()
}

/// Removes note `id`, of visibility code `visibility`, from the FTS tables holding
/// it (external content: the old text is needed).
fn unindex(tx: &Connection, id: i64, visibility: i64) -> rusqlite::Result<()> {
    for table in tables_holding(visibility) {
        tx.prepare_cached(&format!(
            "INSERT INTO {table} ({table}, rowid, title, tags, body)
             SELECT 'delete', id, title, tags, body FROM notes WHERE id = ?1"
        ))?
        .execute([id])?;
    }
    Ok(())
}

/// Adds `r`, stored as note `id`, to the FTS tables of every audience that may read it.
fn index(tx: &Connection, id: i64, r: &Row) -> rusqlite::Result<()> {
    for table in tables_holding(r.visibility) {
        tx.prepare_cached(&format!(
            "INSERT INTO {table} (rowid, title, tags, body) VALUES (?1, ?2, ?3, ?4)"
        ))?
        .execute(params![id, r.title, r.tags, r.body])?;
    }
    Ok(())
}

/// The rowid of a note of `visibility` at `rank`.
fn rowid(visibility: i64, rank: i64) -> i64 {
    debug_assert!((0..=2).contains(&visibility) && rank > 0 && rank <= RANK_MASK);
    (visibility << VISIBILITY_SHIFT) | rank
}

/// The first rowid past what `audience` may read.
pub(super) fn rowid_end(audience: Visibility) -> i64 {
    (visibility_code(audience) + 1) << VISIBILITY_SHIFT
}

/// The rank after every stored note's (three seeks, one per visibility).
fn rank_next(tx: &Connection) -> rusqlite::Result<i64> {
    let mut last = 0;
    for v in 0..=2i64 {
        let max: Option<i64> = tx
            .prepare_cached("SELECT max(id) FROM notes WHERE id >= ?1 AND id < ?2")?
            .query_row(
                [v << VISIBILITY_SHIFT, (v + 1) << VISIBILITY_SHIFT],
                |row| row.get(0),
            )?;
        last = last.max(max.unwrap_or(0) & RANK_MASK);
    }
    Ok(last + 1)
}

/// Inserts or replaces the note at `r.path`. A note keeps its rank; a new one comes
/// last.
pub(super) fn upsert(tx: &Connection, r: &Row) -> rusqlite::Result<()> {
    let old: Option<(i64, i64)> = tx
        .prepare_cached("SELECT id, visibility FROM notes WHERE path = ?1")?
        .query_row([&r.path], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let id = match old {
        Some((old, visibility)) => {
            unindex(tx, old, visibility)?;
            let id = rowid(r.visibility, old & RANK_MASK);
            tx.prepare_cached(
                "UPDATE notes SET id = ?2, url = ?3, title = ?4, tags = ?5, body = ?6,
                 visibility = ?7, version = ?8 WHERE id = ?1",
            )?
            .execute(params![
                old,
                id,
                r.url,
                r.title,
                r.tags,
                r.body,
                r.visibility,
                r.version
            ])?;
            id
        }
        None => {
            let id = rowid(r.visibility, rank_next(tx)?);
            insert(tx, id, r)?;
            id
        }
    };
    index(tx, id, r)
}

/// Removes the note at `path`, if indexed.
pub(super) fn remove(tx: &Connection, path: &str) -> rusqlite::Result<()> {
    let old: Option<(i64, i64)> = tx
        .prepare_cached("SELECT id, visibility FROM notes WHERE path = ?1")?
        .query_row([path], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if let Some((id, visibility)) = old {
        unindex(tx, id, visibility)?;
        tx.prepare_cached("DELETE FROM notes WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(())
}

pub(super) fn remove_paths(conn: &mut Connection, paths: &[String]) -> rusqlite::Result<()> {
    for chunk in paths.chunks(500) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for p in chunk {
            remove(&tx, p)?;
        }
        tx.commit()?;
    }
    Ok(())
}

pub(super) fn stored_paths(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT path FROM notes")?;
    let paths = stmt.query_map([], |r| r.get(0))?;
    paths.collect()
}

/// Copies the WAL back into the file after a re-index and restarts it, so readers
/// read the new index from the mapped file rather than from WAL frames. (RESTART
/// waits for readers still on the old snapshot; they hold it for a query, not long.)
pub(super) fn checkpoint(conn: &Connection, path: &Path) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())) {
        tracing::warn!("search index {}: checkpoint: {e}", path.display());
    }
}
