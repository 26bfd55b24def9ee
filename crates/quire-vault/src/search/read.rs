//! Answering one query on a read-only connection: statements run in stages, inside
//! one read transaction so that every stage sees the same snapshot.
//!
//! Key decisions:
//! - **The audience's own FTS table** ([`super::store::FTS_TABLES`]): every
//!   statement reads the table holding exactly the notes the audience may read, so
//!   bm25 ranks among those only. Two checks stay behind it: the rowid range
//!   (`rowid < (audience + 1) << 32`, as rowids are `visibility << 32 | rank`) and,
//!   in the last stage, `visibility <= audience` on `notes`: a mistake in the tables
//!   or the rowid scheme would lose hits, never leak them.
//! - **Bounded ranking.** bm25 costs about a microsecond per matching note; a word in
//!   most notes of a 10,000-note vault would cost milliseconds. Past
//!   `candidates_max` matches, bm25 ranks only the matches with the best static rank
//!   (most backlinks: the lowest rowids) plus the first `limit` title matches past
//!   them, scored under the whole query like the rest. Smaller result sets are
//!   ranked exactly.
//! - **Scans, not lookups, for given rowids**: FTS5 restarts the whole query (and
//!   bm25 recounts each phrase's documents) for every `rowid = ?`, so scoring or
//!   describing a few chosen notes scans the rowid range they span instead.
//! - **A phrase matching very many notes is ranked by its words**: bm25 of a phrase
//!   checks the phrase in every note holding its words just to count them; past the
//!   bound, the phrase's matches are ranked by bm25 of the same words without the
//!   phrase (which reads doclists only), and snippets still highlight the phrase.
//! - **Hits described by primary key**: the returned notes' titles and bodies are
//!   read from `notes` by id and their snippets made in Rust
//!   ([`super::snippet`]), with no further `MATCH` scan.

use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::snippet::Matcher;
use super::store::FTS_TABLES;
use super::text::snippet_html;

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The note's title.
    pub title: String,
    /// Its page.
    pub url: String,
    /// Its vault-relative path.
    pub path: String,
    /// HTML: the body around the matches, escaped, matches in `<mark>…</mark>`.
    pub snippet: String,
    /// Relevance, higher is better (negated bm25).
    pub score: f64,
}

/// The statements below name the FTS table `{fts}`; [`Statements`] has them for
/// each audience's table.
const FTS: &str = "{fts}";

/// bm25 weights: title, tags, body.
const BM25: &str = "bm25({fts}, 10.0, 4.0, 1.0)";

/// The rowid of the `?3`-th match in the audience's range (`< ?2`), if there are so
/// many.
const CUTOFF_SQL: &str =
    "SELECT rowid FROM {fts} WHERE {fts} MATCH ?1 AND rowid < ?2 LIMIT 1 OFFSET ?3";

/// The first `?4` title matches (`?1` is a title-only query) in `(?2, ?3)`, by
/// static rank; [`TOP_SQL`] then scores them under the whole query with the rest.
const TITLE_SQL: &str = "SELECT rowid FROM {fts} WHERE {fts} MATCH ?1
     AND rowid > ?2 AND rowid < ?3 LIMIT ?4";

/// The best `?5` matches among rowids up to `?3` and those in the JSON array `?4`,
/// all at most `?2`. One statement, so bm25 counts each phrase's documents (its
/// IDF, a pass over the phrase's whole doclist) once. Only `?2` is a bound FTS5
/// seeks with (it takes one upper bound); `+rowid` keeps the others filters, and
/// keeps SQLite from turning the `IN` into lookups, each of which would restart the
/// query.
const TOP_SQL: &str = "SELECT rowid, {bm25} FROM {fts} WHERE {fts} MATCH ?1 AND rowid <= ?2
     AND (+rowid <= ?3 OR +rowid IN (SELECT value FROM json_each(?4)))
     ORDER BY 2 LIMIT ?5";

/// [`TOP_SQL`] for a phrase query past the bound: the matches of the phrase query
/// `?3` up to `?4` and those in the JSON array `?5`, ranked by bm25 of `?1`, the same
/// words without phrases, all at most `?2`. bm25 of a phrase counts its documents by
/// checking the phrase in every note holding its words (~2 ms for `"of time"` in
/// 10,000 notes); bm25 of the words reads their doclists only.
const TOP_WORDS_SQL: &str = "SELECT rowid, {bm25} FROM {fts} WHERE {fts} MATCH ?1 AND rowid <= ?2
     AND +rowid IN (
        SELECT rowid FROM {fts} WHERE {fts} MATCH ?3 AND rowid <= ?4
        UNION ALL SELECT value FROM json_each(?5))
     ORDER BY 2 LIMIT ?6";

/// The statements above for one audience's FTS table.
pub(super) struct Statements {
    cutoff: String,
    title: String,
    top: String,
    top_words: String,
}

impl Statements {
    fn for_table(table: &str) -> Statements {
        let sql = |template: &str| template.replace("{bm25}", BM25).replace(FTS, table);
        Statements {
            cutoff: sql(CUTOFF_SQL),
            title: sql(TITLE_SQL),
            top: sql(TOP_SQL),
            top_words: sql(TOP_WORDS_SQL),
        }
    }

    /// The statements of the audience of visibility code `visibility`.
    pub(super) fn of(visibility: i64) -> &'static Statements {
        static ALL: LazyLock<Vec<Statements>> = LazyLock::new(|| {
            FTS_TABLES
                .iter()
                .map(|t| Statements::for_table(t))
                .collect()
        });
        let i = usize::try_from(visibility).unwrap_or(0);
        // An unknown code gets the narrowest audience's: it can lose hits, never leak.
        ALL.get(i).unwrap_or(&ALL[0])
    }
}

/// Title, page, path and body of the notes in the JSON array `?1` that the audience
/// (`?2`) may read: primary-key lookups, the snippets made in Rust
/// ([`super::snippet`]).
const HITS_SQL: &str = "
SELECT id, title, url, path, body FROM notes
WHERE id IN (SELECT value FROM json_each(?1)) AND visibility <= ?2";

/// What one query asks.
pub(super) struct Ask<'a> {
    /// The sanitised FTS5 query.
    pub(crate) fts: &'a str,
    /// The same without phrases.
    pub(crate) words: &'a str,
    /// The first rowid past the audience's range.
    pub(crate) end: i64,
    /// The audience's visibility code.
    pub(crate) visibility: i64,
    /// The statements for the audience's FTS table.
    pub(crate) sql: &'static Statements,
    /// Hits wanted (> 0).
    pub(crate) limit: usize,
    /// Matches ranked exactly before ranking is bounded.
    pub(crate) candidates_max: usize,
}

/// The best hits for `ask`, best first.
pub(super) fn hits(c: &Connection, ask: &Ask<'_>) -> rusqlite::Result<Vec<Hit>> {
    let tx = c.unchecked_transaction()?;
    // Never fewer candidates than hits asked for.
    let candidates = ask.candidates_max.max(ask.limit);
    let scored = match phrase_bounded(c, ask, candidates)? {
        Some(scored) => scored,
        None => ranked(c, ask, candidates)?,
    };
    let mut hits = describe(c, ask, &scored)?;
    tx.commit()?;
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(hits)
}

/// The rowid of the `candidates`-th match of `fts` in the audience's range, if any.
fn cutoff(
    c: &Connection,
    fts: &str,
    ask: &Ask<'_>,
    candidates: usize,
) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached(&ask.sql.cutoff)?
        .query_row(params![fts, ask.end, candidates as i64], |r| r.get(0))
        .optional()
}

/// `(rowid, bm25)` of the best matches of the query as written: exactly, or past
/// `candidates` matches among the best-linked and title matches.
fn ranked(c: &Connection, ask: &Ask<'_>, candidates: usize) -> rusqlite::Result<Vec<(i64, f64)>> {
    let cutoff = cutoff(c, ask.fts, ask, candidates)?;
    let last = cutoff.map_or(ask.end - 1, |c| c.min(ask.end - 1));
    let titles = match cutoff {
        Some(cutoff) => title_matches(c, ask, cutoff)?,
        None => Vec::new(),
    };
    top(
        c,
        ask,
        last,
        &titles,
        cutoff.is_some() && ask.words != ask.fts,
    )
}

/// For a phrase query whose words are in more than `candidates` notes: the phrase's
/// matches among the first `candidates` notes holding its words (and title matches),
/// ranked by the words' bm25, so the phrase is checked in those notes only, not in
/// every note holding common words. `None` if that finds fewer than `limit` (a rare
/// phrase: [`ranked`] then finds them all) or the query has no phrase.
fn phrase_bounded(
    c: &Connection,
    ask: &Ask<'_>,
    candidates: usize,
) -> rusqlite::Result<Option<Vec<(i64, f64)>>> {
    if ask.words == ask.fts {
        return Ok(None);
    }
    let Some(cut) = cutoff(c, ask.words, ask, candidates)? else {
        return Ok(None);
    };
    let titles = title_matches(c, ask, cut)?;
    let scored = top(c, ask, cut.min(ask.end - 1), &titles, true)?;
    Ok((scored.len() >= ask.limit).then_some(scored))
}

/// `(rowid, bm25)` of the best matches up to rowid `last` or in `extra`, best
/// (lowest) first: ranked by the query as written ([`TOP_SQL`]), or, `by_words`, a
/// phrase query past the bound ranked by its words' bm25 ([`TOP_WORDS_SQL`]).
fn top(
    c: &Connection,
    ask: &Ask<'_>,
    last: i64,
    extra: &[i64],
    by_words: bool,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let bound = extra.iter().copied().fold(last, i64::max);
    let ids = json_ids(extra.iter().copied());
    let limit = ask.limit as i64;
    let (sql, args): (&str, Vec<&dyn rusqlite::ToSql>) = if by_words {
        let args: Vec<&dyn rusqlite::ToSql> =
            vec![&ask.words, &bound, &ask.fts, &last, &ids, &limit];
        (&ask.sql.top_words, args)
    } else {
        (&ask.sql.top, vec![&ask.fts, &bound, &last, &ids, &limit])
    };
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map(args.as_slice(), |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Rowids past `cutoff` whose title matches the whole query.
fn title_matches(c: &Connection, ask: &Ask<'_>, cutoff: i64) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = c.prepare_cached(&ask.sql.title)?;
    let title_fts = format!("{{title}} : ({})", ask.fts);
    let rows = stmt.query_map(params![title_fts, cutoff, ask.end, ask.limit as i64], |r| {
        r.get(0)
    })?;
    rows.collect()
}

fn json_ids(ids: impl Iterator<Item = i64>) -> String {
    let list: Vec<String> = ids.map(|i| i.to_string()).collect();
    format!("[{}]", list.join(","))
}

/// The hits for `scored`, with snippets; unordered.
fn describe(c: &Connection, ask: &Ask<'_>, scored: &[(i64, f64)]) -> rusqlite::Result<Vec<Hit>> {
    if scored.is_empty() {
        return Ok(Vec::new());
    }
    let score: HashMap<i64, f64> = scored.iter().copied().collect();
    let matcher = Matcher::new(ask.fts);
    let mut stmt = c.prepare_cached(HITS_SQL)?;
    let rows = stmt.query_map(
        params![json_ids(scored.iter().map(|s| s.0)), ask.visibility],
        |r| {
            let id: i64 = r.get(0)?;
            // The body is borrowed from the row: no copy of a long note.
            let snippet = match r.get_ref(4)?.as_str() {
                Ok(body) => snippet_html(&matcher.snippet(body)),
                Err(_) => String::new(),
            };
            Ok(Hit {
                title: r.get(1)?,
                url: r.get(2)?,
                path: r.get(3)?,
                snippet,
                // bm25 is lower-is-better; scores are higher-is-better.
                score: -score.get(&id).copied().unwrap_or(0.0),
            })
        },
    )?;
    rows.collect()
}
