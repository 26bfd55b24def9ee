//! Render budgets end to end (issue 29): a real quire server on a loopback port.

mod common;

use common::*;

#[test]
fn a_note_too_large_to_store_is_rendered_once_then_hits() {
    // Issue 29 (Medium): a 50 MB note was rendered again on every request (2.7 s and
    // 1.7 GB each), as its page was too large to store. Now a note past the page
    // budget (1 MiB by default) answers a short notice that is stored like any page.
    let line = "A long note of plain prose, too large for any page.\n";
    let big = format!(
        "---\nfree: true\n---\n{}",
        line.repeat((2 << 20) / line.len())
    );
    let r = start_with(
        &[
            ("Big.md", &big),
            ("Small.md", "---\nfree: true\n---\nfine\n"),
        ],
        false,
    );
    let a = get(r.addr, "/big");
    assert_eq!(a.status, 200);
    assert!(a.body.contains("render-budget"), "the notice");
    assert!(a.body.contains("page_bytes_max"), "names its bound");
    assert!(a.body.len() < 64 * 1024, "{} bytes", a.body.len());
    assert!(
        a.header("cache-status")
            .is_some_and(|c| c.contains("stored")),
        "{:?}",
        a.header("cache-status")
    );
    let before = r.site.renders();
    for _ in 0..3 {
        let b = get(r.addr, "/big");
        assert!(b.hit(), "{:?}", b.header("cache-status"));
        assert_eq!(b.body, a.body);
    }
    assert_eq!(r.site.renders(), before, "never rendered again per request");
    assert!(get(r.addr, "/small").body.contains("fine"));
}

#[test]
fn render_budget_metrics_count_the_bound_reached() {
    let r = start_with(
        &[(
            "Bomb.md",
            "---\nfree: true\n---\n$\\def\\d#1{#1#1}\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{\\d{x+}}}}}}}}}}}}}}}}1$\n",
        )],
        false,
    );
    let page = get(r.addr, "/bomb");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("math-error"), "shown as source");
    // The site's families, as the server's `/_quire/metrics` writes them.
    let mut m = String::new();
    quire_server::upstream::Upstream::metrics(&r.site, &mut m);
    let line = m
        .lines()
        .find(|l| {
            l.starts_with("quire_site_render_budget_reached_total{bound=\"formula_bytes_max\"}")
        })
        .unwrap_or_else(|| panic!("no budget metric in {m}"));
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 1, "{line}");
    assert!(m.contains("quire_site_renders_cancelled_total"));
}

/// The threads of this process named `name`, with their niceness (Linux,
/// `/proc/self/task/*/stat`).
fn threads_named(name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if comm.trim_end() != name {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state is field 3, nice field 19.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let nice = rest.split(' ').nth(19 - 3).unwrap().parse().unwrap();
        found.push(nice);
    }
    found
}

#[test]
fn a_crowd_of_renders_runs_below_the_hits_priority() {
    // A crowd of addresses asking for new searches and missing pages kept the
    // renders busy at the request workers' priority, and the scheduler split the
    // core evenly between them: a reader's hit p99 went from 2.6 ms to 15 ms. A
    // render a reader waits for now runs at nice 10 or more, so hits win the core.
    let r = start(false);
    for path in ["/no-such-note-1", "/search?q=crowd", "/"] {
        let _ = get(r.addr, path);
    }
    let nices = threads_named("quire-uncached");
    assert!(
        !nices.is_empty(),
        "renders ran on the uncached-work threads"
    );
    assert!(
        nices
            .iter()
            .all(|&n| n >= quire_server::uncached_work::NICE),
        "{nices:?}"
    );
}
