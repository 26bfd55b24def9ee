//! Render budgets: what one page's render may spend — MathML bytes per formula and per
//! page, HTML bytes per page, tags per note — and the record of which bound a render
//! hit, so the site can log it (once per note and bound) and count it.
//!
//! Key decisions:
//! - **Past a budget the construct is shown, not the work.** A formula past its bound
//!   renders as its escaped source marked `math-error` with the bound in its tooltip;
//!   a body past the page budget is replaced by one short notice. Either way the page
//!   is small, so it is stored like any page and never rendered again per request.
//! - **A note whose markdown alone is over the page budget is not rendered at all**
//!   (its output could only be larger, give or take comments): a 50 MB note costs a
//!   length check, not a parse.
//! - **The meter is per thread, set around one render** ([`metered`]): the passes
//!   (`math`, the HTML writer) ask it what is left without a budget argument through
//!   every call, and a render on the blocking pool has its thread to itself. The
//!   meter also carries the request's cancellation flag: a render whose client left
//!   stops at its next formula or its next written block.
//! - **The limits are process-wide** ([`set_limits`]): they come from the site's
//!   `site.toml` `[render]`, read before the vault is loaded (the tag cap applies while
//!   notes are parsed); one `quire serve` publishes one vault.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What one render may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// MathML bytes of one formula (its parse stops at a tenth of this in events).
    pub formula_bytes_max: usize,
    /// MathML bytes of one page, all formulas together.
    pub math_bytes_max: usize,
    /// HTML bytes of one note's body (and markdown bytes of the note rendered).
    pub page_bytes_max: usize,
    /// Tags of one note (front matter first, then inline ones).
    pub tags_per_note_max: usize,
    /// Links drawn in the site graph.
    pub graph_edges_max: usize,
}

/// The defaults: generous for any note written by hand, small next to the bombs
/// they stop (a 7 KB `\def` formula wrote 4.4 MB; a 1.8 MB note 1.1 GB).
const DEFAULT: Limits = Limits {
    formula_bytes_max: 128 << 10,
    math_bytes_max: 512 << 10,
    // Under the largest object `quire serve`'s default 256 MiB cache stores (its
    // region, 2 MiB, less 64 KiB), with room for the template around the body.
    page_bytes_max: 1 << 20,
    tags_per_note_max: 256,
    graph_edges_max: 10_000,
};

impl Default for Limits {
    fn default() -> Limits {
        DEFAULT
    }
}

/// A bound a render reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// One formula's MathML, or its expansion.
    FormulaBytes,
    /// The page's MathML.
    MathBytes,
    /// The page's HTML (or the note's markdown).
    PageBytes,
    /// The note's tags.
    TagsPerNote,
}

impl Bound {
    /// Every bound, in metric order.
    pub const ALL: [Bound; 4] = [
        Bound::FormulaBytes,
        Bound::MathBytes,
        Bound::PageBytes,
        Bound::TagsPerNote,
    ];

    /// Its `site.toml` key under `[render]` (also its metric label).
    pub fn key(self) -> &'static str {
        match self {
            Bound::FormulaBytes => "formula_bytes_max",
            Bound::MathBytes => "math_bytes_max",
            Bound::PageBytes => "page_bytes_max",
            Bound::TagsPerNote => "tags_per_note_max",
        }
    }

    /// Its value in `l`.
    pub fn limit(self, l: &Limits) -> usize {
        match self {
            Bound::FormulaBytes => l.formula_bytes_max,
            Bound::MathBytes => l.math_bytes_max,
            Bound::PageBytes => l.page_bytes_max,
            Bound::TagsPerNote => l.tags_per_note_max,
        }
    }

    fn slot(self) -> usize {
        Bound::ALL.iter().position(|&b| b == self).unwrap_or(0)
    }
}

static FORMULA_BYTES_MAX: AtomicUsize = AtomicUsize::new(DEFAULT.formula_bytes_max);
static MATH_BYTES_MAX: AtomicUsize = AtomicUsize::new(DEFAULT.math_bytes_max);
static PAGE_BYTES_MAX: AtomicUsize = AtomicUsize::new(DEFAULT.page_bytes_max);
static TAGS_PER_NOTE_MAX: AtomicUsize = AtomicUsize::new(DEFAULT.tags_per_note_max);
static GRAPH_EDGES_MAX: AtomicUsize = AtomicUsize::new(DEFAULT.graph_edges_max);

/// Renders that reached each bound (in [`Bound::ALL`] order).
static EXCEEDED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Renders stopped because their client left.
static CANCELLED: AtomicU64 = AtomicU64::new(0);

/// Sets the limits every render from now on uses.
pub fn set_limits(l: Limits) {
    FORMULA_BYTES_MAX.store(l.formula_bytes_max, Ordering::Relaxed);
    MATH_BYTES_MAX.store(l.math_bytes_max, Ordering::Relaxed);
    PAGE_BYTES_MAX.store(l.page_bytes_max, Ordering::Relaxed);
    TAGS_PER_NOTE_MAX.store(l.tags_per_note_max, Ordering::Relaxed);
    GRAPH_EDGES_MAX.store(l.graph_edges_max, Ordering::Relaxed);
}

/// The limits in force.
pub fn limits() -> Limits {
    Limits {
        formula_bytes_max: FORMULA_BYTES_MAX.load(Ordering::Relaxed),
        math_bytes_max: MATH_BYTES_MAX.load(Ordering::Relaxed),
        page_bytes_max: PAGE_BYTES_MAX.load(Ordering::Relaxed),
        tags_per_note_max: TAGS_PER_NOTE_MAX.load(Ordering::Relaxed),
        graph_edges_max: GRAPH_EDGES_MAX.load(Ordering::Relaxed),
    }
}

/// How many renders reached `b` since the process started.
pub fn exceeded_total(b: Bound) -> u64 {
    EXCEEDED[b.slot()].load(Ordering::Relaxed)
}

/// How many renders were stopped because nobody waited for them.
pub fn cancelled_total() -> u64 {
    CANCELLED.load(Ordering::Relaxed)
}

/// What one render has spent and reached.
#[derive(Debug)]
struct Meter {
    limits: Limits,
    math_bytes: usize,
    reached: Vec<Bound>,
    cancel: Option<Arc<AtomicBool>>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// What a metered render reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spent {
    /// Each bound reached, once, in the order first reached.
    pub reached: Vec<Bound>,
    /// Whether the render stopped because its cancellation flag was raised.
    pub cancelled: bool,
}

/// Runs `f` (one page's render) under a fresh meter with `limits`; a raised `cancel`
/// makes the passes stop early.
pub(crate) fn metered<T>(
    limits: Limits,
    cancel: Option<Arc<AtomicBool>>,
    f: impl FnOnce() -> T,
) -> (T, Spent) {
    let meter = Meter {
        limits,
        math_bytes: 0,
        reached: Vec::new(),
        cancel,
    };
    let outer = METER.with(|m| m.borrow_mut().replace(meter));
    let out = f();
    let meter = METER.with(|m| std::mem::replace(&mut *m.borrow_mut(), outer));
    let spent = meter.map_or_else(Spent::default, |m| Spent {
        cancelled: m.cancel.is_some_and(|c| c.load(Ordering::Relaxed)),
        reached: m.reached,
    });
    for b in &spent.reached {
        EXCEEDED[b.slot()].fetch_add(1, Ordering::Relaxed);
    }
    if spent.cancelled {
        CANCELLED.fetch_add(1, Ordering::Relaxed);
    }
    (out, spent)
}

/// The limits of the render on this thread (those in force outside one).
pub(crate) fn current() -> Limits {
    METER.with(|m| m.borrow().as_ref().map_or_else(limits, |m| m.limits))
}

/// Records that the render on this thread reached `b`.
pub(crate) fn reach(b: Bound) {
    METER.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            if !m.reached.contains(&b) {
                m.reached.push(b);
            }
        }
    });
}

/// Whether the render on this thread has been given up by its client.
pub(crate) fn cancelled() -> bool {
    METER.with(|m| {
        m.borrow()
            .as_ref()
            .and_then(|m| m.cancel.as_ref())
            .is_some_and(|c| c.load(Ordering::Relaxed))
    })
}

/// Spends `bytes` of the page's MathML on one formula: `Err(bound)` (recorded) if
/// the formula or the page would go past its budget, and nothing is spent then.
pub(crate) fn spend_math(bytes: usize) -> Result<(), Bound> {
    let l = current();
    if bytes > l.formula_bytes_max {
        reach(Bound::FormulaBytes);
        return Err(Bound::FormulaBytes);
    }
    METER.with(|m| {
        let mut m = m.borrow_mut();
        let Some(m) = m.as_mut() else { return Ok(()) };
        if m.math_bytes + bytes > m.limits.math_bytes_max {
            if !m.reached.contains(&Bound::MathBytes) {
                m.reached.push(Bound::MathBytes);
            }
            return Err(Bound::MathBytes);
        }
        m.math_bytes += bytes;
        Ok(())
    })
}

/// Charges the page `bytes` of MathML for work that wrote nothing (a formula
/// stopped at its bound costs the page a full formula), so a page of bombs stops
/// parsing after `math_bytes_max / formula_bytes_max` of them.
pub(crate) fn charge_math(bytes: usize) {
    METER.with(|m| {
        let mut m = m.borrow_mut();
        let Some(m) = m.as_mut() else { return };
        m.math_bytes = m.math_bytes.saturating_add(bytes);
        if m.math_bytes > m.limits.math_bytes_max && !m.reached.contains(&Bound::MathBytes) {
            m.reached.push(Bound::MathBytes);
        }
    });
}

/// Whether the page has no MathML left to spend (later formulas skip their parse).
pub(crate) fn math_spent() -> bool {
    METER.with(|m| {
        m.borrow()
            .as_ref()
            .is_some_and(|m| m.reached.contains(&Bound::MathBytes))
    })
}

/// The notice shown instead of a body past the page budget.
pub(crate) fn page_notice(limit: usize) -> String {
    format!(
        "<p class=\"render-budget\" role=\"note\">This note is larger than the site's page \
         budget ({limit} bytes, <code>[render] page_bytes_max</code>); it is not shown.</p>\n"
    )
}

/// A `fmt::Write` that fails past `max` bytes or once the render is cancelled, so
/// pulldown-cmark's writer stops there instead of writing the rest.
struct Capped<'a> {
    out: &'a mut String,
    max: usize,
    writes: u32,
}

impl fmt::Write for Capped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.out.len() + s.len() > self.max {
            return Err(fmt::Error);
        }
        self.writes = self.writes.wrapping_add(1);
        // A thread-local read per 1,024 writes: cheap next to the writing.
        if self.writes.is_multiple_of(1024) && cancelled() {
            return Err(fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// `events` as HTML into `out`, at most the page budget: past it (or once the
/// render is cancelled) `out` holds the page notice instead.
pub(crate) fn push_html<'a>(
    out: &mut String,
    events: impl Iterator<Item = pulldown_cmark::Event<'a>>,
) {
    let max = current().page_bytes_max;
    let w = Capped {
        out,
        max,
        writes: 0,
    };
    if pulldown_cmark::html::write_html_fmt(w, events).is_err() {
        out.clear();
        if !cancelled() {
            reach(Bound::PageBytes);
        }
        out.push_str(&page_notice(max));
    }
}

/// Notes and bounds already logged: each is logged once per process (the set is
/// forgotten past [`LOGGED_MAX`] entries, so it stays bounded).
static LOGGED: Mutex<Option<HashSet<(String, Bound)>>> = Mutex::new(None);

/// Entries [`LOGGED`] holds before it starts over.
const LOGGED_MAX: usize = 4096;

/// Logs, once per process, that the render of note `path` reached each bound of
/// `spent`.
pub(crate) fn log_once(path: &str, spent: &Spent) {
    if spent.reached.is_empty() {
        return;
    }
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    let set = logged.get_or_insert_with(HashSet::new);
    if set.len() >= LOGGED_MAX {
        set.clear();
    }
    let l = limits();
    for &b in &spent.reached {
        if set.insert((path.to_owned(), b)) {
            tracing::warn!(
                note = path,
                bound = b.key(),
                limit = b.limit(&l),
                "render budget reached: shown as source with a note (logged once per note and bound)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;
    use crate::render::render_metered;
    use crate::testing::vault;
    use crate::Visibility;

    /// A formula whose `\def` doubles its argument, nested 16 times: 2¹⁶ copies of
    /// `x+` from 110 bytes.
    pub(crate) fn def_bomb() -> String {
        format!(
            r"\def\d#1{{#1#1}}{}x+{}1",
            r"\d{".repeat(16),
            "}".repeat(16)
        )
    }

    fn small(l: impl FnOnce(&mut Limits)) -> Limits {
        let mut limits = Limits::default();
        l(&mut limits);
        limits
    }

    #[test]
    fn def_bomb_formula_renders_as_its_source_not_megabytes() {
        // Issue 29.2: `\def` turned a 7 KB formula into 4.4 MB of MathML.
        let md = format!("Before ${}$ after.\n\n$x^2$\n", def_bomb());
        let (_d, v) = vault(&[("Bomb.md", &md)]);
        let (r, spent) = render_metered(&v, 0, Visibility::Draft, Limits::default(), None);
        assert!(r.html.len() < 64 * 1024, "{} bytes", r.html.len());
        assert!(r.html.contains("class=\"math-error\""), "shown as source");
        assert!(
            r.html.contains("formula_bytes_max"),
            "the bound in the tooltip: {}",
            &r.html[..r.html.len().min(600)]
        );
        assert!(
            r.html.contains(r"\def\d#1{#1#1}\d{\d{"),
            "its source, escaped"
        );
        assert!(
            r.html.contains("<msup>"),
            "an ordinary formula still renders"
        );
        assert_eq!(spent.reached, [Bound::FormulaBytes]);
    }

    #[test]
    fn a_page_of_def_bombs_stops_parsing_after_its_math_budget() {
        // Issue 29.2: a 1.8 MB note of such formulas rendered a 1.1 GB page. Each
        // bomb stopped at its bound costs the page a formula's budget: at most
        // math_bytes_max / formula_bytes_max of them are parsed.
        let md = format!(
            "${}$

",
            def_bomb()
        )
        .repeat(100);
        let (_d, v) = vault(&[("Bombs.md", &md)]);
        let l = Limits::default();
        let (r, spent) = render_metered(&v, 0, Visibility::Draft, l, None);
        assert_eq!(spent.reached, [Bound::FormulaBytes, Bound::MathBytes]);
        let unparsed = r.html.matches("math_bytes_max").count();
        assert!(
            unparsed >= 100 - l.math_bytes_max / l.formula_bytes_max - 1,
            "{unparsed} not parsed"
        );
        assert_eq!(r.html.matches("math-error").count(), 100);
    }

    #[test]
    fn formulas_past_the_page_math_budget_show_as_source() {
        // A page of many ordinary formulas: the first ones render, the rest (past
        // math_bytes_max) are source, and are not parsed at all.
        let md = "$\\frac{a+b}{c+d}$ ".repeat(400);
        let (_d, v) = vault(&[("Many.md", &md)]);
        let limits = small(|l| l.math_bytes_max = 20_000);
        let (r, spent) = render_metered(&v, 0, Visibility::Draft, limits, None);
        let rendered = r.html.matches("<math").count();
        let source = r.html.matches("math-error").count();
        assert!(
            rendered > 10 && source > 200,
            "{rendered} rendered, {source} source"
        );
        assert_eq!(rendered + source, 400);
        assert!(r.html.contains("math_bytes_max"));
        assert_eq!(spent.reached, [Bound::MathBytes]);
    }

    #[test]
    fn a_body_past_the_page_budget_is_a_notice_and_a_larger_note_is_not_rendered() {
        // Issue 29 (Medium): a 50 MB note cost 2.7 s and 1.7 GB on every request.
        let limits = small(|l| l.page_bytes_max = 64 * 1024);
        let grows = "*a* ".repeat(10_000); // 40 KB of markdown, 110 KB of HTML
        let huge = "word ".repeat(20_000); // 100 KB of markdown
        let (_d, v) = vault(&[("Grows.md", &grows), ("Huge.md", &huge), ("Ok.md", "fine")]);
        for name in ["grows", "huge"] {
            let i = v.resolve(name).unwrap();
            let (r, spent) = render_metered(&v, i, Visibility::Draft, limits, None);
            assert!(
                r.html.contains("render-budget"),
                "{name}: {}",
                &r.html[..80]
            );
            assert!(r.html.len() < 1024, "{name}: a notice, not the page");
            assert_eq!(spent.reached, [Bound::PageBytes], "{name}");
        }
        let ok = v.resolve("ok").unwrap();
        let (r, spent) = render_metered(&v, ok, Visibility::Draft, limits, None);
        assert_eq!(r.html, "<p>fine</p>\n");
        assert!(spent.reached.is_empty());
    }

    #[test]
    fn a_render_nobody_waits_for_stops_early() {
        let md = "A paragraph with $x$.\n\n".repeat(5_000);
        let (_d, v) = vault(&[("Long.md", &md)]);
        let cancel = Arc::new(AtomicBool::new(true));
        let (r, spent) = render_metered(&v, 0, Visibility::Draft, Limits::default(), Some(cancel));
        assert!(spent.cancelled);
        assert!(
            !r.html.contains("<math"),
            "no formula parsed once cancelled"
        );
        assert!(r.html.len() < 1024, "stopped: {} bytes", r.html.len());
        let (r, spent) = render_metered(&v, 0, Visibility::Draft, Limits::default(), None);
        assert!(!spent.cancelled && r.html.matches("<math").count() == 5_000);
    }

    #[test]
    fn a_bomb_logs_its_note_and_bound_once() {
        let log = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        let md = format!("${}$\n", def_bomb());
        let (_d, v) = vault(&[("Bombs/logged-once.md", &md)]);
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..3 {
                let (_, spent) = crate::render::render_bounded(&v, 0, Visibility::Public, None);
                assert_eq!(spent.reached, [Bound::FormulaBytes]);
            }
        });
        let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("render budget"))
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].contains("Bombs/logged-once.md"), "{}", lines[0]);
        assert!(lines[0].contains("formula_bytes_max"), "{}", lines[0]);
        assert!(exceeded_total(Bound::FormulaBytes) >= 3);
    }

    /// A log writer appending to a shared buffer.
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
