//! The graphs' models and drawings: golden SVG, escaping, bounds, and that no note
//! hidden from a reader reaches their graphs.

use super::local::LOCAL_NODES_MAX;
use super::site::SITE_NODES_MAX;
use super::*;
use crate::testing::vault;

const FREE: &str = "---\nfree: true\n---\n";

fn free(body: &str) -> String {
    format!("{FREE}{body}")
}

#[test]
fn local_graph_golden_svg() {
    let (_d, v) = vault(&[
        ("Home.md", &free("[[Apple]] and [[Banana]]")),
        ("Apple.md", &free("back to [[Home]], over to [[Banana]]")),
        ("Banana.md", &free("plain")),
        ("Cherry.md", &free("[[Home]]")),
        ("Lonely.md", &free("no links")),
    ]);
    let links = Links::new(&v, Visibility::Public);
    let home = v.resolve("home").unwrap();
    let g = local(&v, &links, home).unwrap();
    let titles: Vec<&str> = g.nodes.iter().map(|n| n.title.as_str()).collect();
    assert_eq!(titles, ["Apple", "Banana", "Cherry"]);
    assert_eq!(g.edges, [(0, 1)], "Apple links Banana");
    assert_eq!(g.more, 0);
    let golden = concat!(
        "<svg class=\"graph graph-local\" viewBox=\"0 0 720 180\" role=\"group\" aria-label=\"Notes linked with Home\">",
        "<path class=\"edges\" d=\"M360 82L180.5 71 M360 82L180.5 93 M360 82L540 82\"/>",
        "<path class=\"edges edges-side\" d=\"M180.5 71L180.5 93\"/>",
        "<a class=\"node\" href=\"/apple\"><title>Apple</title><circle cx=\"180.5\" cy=\"71\" r=\"5.5\"/><text x=\"171.5\" y=\"75\" text-anchor=\"end\">Apple</text></a>",
        "<a class=\"node\" href=\"/banana\"><title>Banana</title><circle cx=\"180.5\" cy=\"93\" r=\"5.5\"/><text x=\"171.5\" y=\"97\" text-anchor=\"end\">Banana</text></a>",
        "<a class=\"node\" href=\"/cherry\"><title>Cherry</title><circle cx=\"540\" cy=\"82\" r=\"5.5\"/><text x=\"549\" y=\"86\" text-anchor=\"start\">Cherry</text></a>",
        "<a class=\"node here\" href=\"/home\"><title>Home</title><circle cx=\"360\" cy=\"82\" r=\"9\"/><text x=\"360\" y=\"107\" text-anchor=\"middle\">Home</text></a>",
        "</svg>"
    );
    assert_eq!(g.svg(), golden);
    assert!(local(&v, &links, v.resolve("lonely").unwrap()).is_none());
}

#[test]
fn titles_are_escaped_in_text_tooltips_and_labels() {
    let hostile = "<script>alert(\"x\")</script> & co";
    let (_d, v) = vault(&[
        ("Home.md", &free("[[Evil]]")),
        (
            "Evil.md",
            &format!("---\nfree: true\ntitle: '{hostile}'\n---\n"),
        ),
    ]);
    let links = Links::new(&v, Visibility::Public);
    let evil = v.resolve("evil").unwrap();
    assert_eq!(v.notes()[evil].title(), hostile);
    for svg in [
        local(&v, &links, v.resolve("home").unwrap()).unwrap().svg(),
        local(&v, &links, evil).unwrap().svg(),
        SiteGraph::build(&v, &links, &[]).svg().to_owned(),
    ] {
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains("\"x\""), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co"),
            "{svg}"
        );
    }
}

#[test]
fn local_graph_is_capped_most_linked_first_and_counts_the_rest() {
    let mut files = vec![("Hub.md".to_owned(), free(""))];
    for k in 0..LOCAL_NODES_MAX + 5 {
        // Every spoke links the hub; the last five are linked from one more note each.
        files.push((format!("S{k:02}.md"), free("[[Hub]]")));
    }
    for k in LOCAL_NODES_MAX..LOCAL_NODES_MAX + 5 {
        files.push((format!("T{k}.md"), free(&format!("[[S{k:02}]]"))));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (_d, v) = vault(&refs);
    let links = Links::new(&v, Visibility::Public);
    let g = local(&v, &links, v.resolve("hub").unwrap()).unwrap();
    assert_eq!(g.nodes.len(), LOCAL_NODES_MAX);
    assert_eq!(g.more, 5);
    for k in LOCAL_NODES_MAX..LOCAL_NODES_MAX + 5 {
        let t = format!("S{k:02}");
        assert!(
            g.nodes.iter().any(|n| n.title == t),
            "the more linked {t} is kept"
        );
    }
    assert!(g.svg().contains(">+5 more</text>"));
}

#[test]
fn adding_a_link_changes_the_targets_local_graph_and_nothing_unrelated() {
    let before = [
        ("A.md", free("alone")),
        ("B.md", free("text")),
        ("C.md", free("[[A]]")),
        ("D.md", free("unrelated, [[E]]")),
        ("E.md", free("")),
    ];
    let mut after = before.clone();
    after[1].1 = free("text, now with [[A]]");
    let print = |files: &[(&str, String)]| {
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let (_d, v) = vault(&refs);
        let links = Links::new(&v, Visibility::Public);
        let f = |name: &str| local(&v, &links, v.resolve(name).unwrap()).map(|g| g.fingerprint());
        (
            f("a"),
            f("d"),
            local(&v, &links, v.resolve("a").unwrap()).unwrap(),
        )
    };
    let (a0, d0, g0) = print(&before);
    let (a1, d1, g1) = print(&after);
    assert_ne!(a0, a1, "B now links A: A's graph changed");
    assert_eq!(d0, d1, "D's graph did not");
    assert_eq!(g0.nodes.len() + 1, g1.nodes.len());
    assert!(g1.nodes.iter().any(|n| n.title == "B"));
}

#[test]
fn site_graph_draws_every_visible_note_and_reuses_an_unchanged_layout() {
    let (_d, v) = vault(&[
        ("Home.md", &free("[[A]] [[B]] [[Secret]]")),
        ("A.md", &free("[[B]]")),
        ("B.md", &free("")),
        ("Orphan.md", &free("")),
        ("Secret.md", "[[A]] secret text"),
    ]);
    let g = Graphs::build(&v, None);
    let public = g.site(&v, Visibility::Public);
    assert_eq!((public.shown(), public.total(), public.links()), (4, 4, 3));
    assert_eq!(public.svg().matches("<a class=\"node").count(), 4);
    assert!(!public.svg().contains("/secret") && !public.svg().contains("Secret"));
    let private = g.site(&v, Visibility::Private);
    assert_eq!((private.shown(), private.links()), (5, 5));
    assert!(private.svg().contains("href=\"/secret\""));
    let again = Graphs::build(&v, Some(&g));
    for a in [Visibility::Public, Visibility::Private, Visibility::Draft] {
        assert!(
            std::ptr::eq(again.site(&v, a), g.site(&v, a)),
            "{a:?} reused"
        );
    }
    // Private and draft readers see the same notes here: one drawing.
    assert!(std::ptr::eq(
        g.site(&v, Visibility::Private),
        g.site(&v, Visibility::Draft)
    ));
}

#[test]
fn site_graph_is_capped_most_linked_first() {
    let n = SITE_NODES_MAX + 3;
    let mut files: Vec<(String, String)> =
        (0..n).map(|k| (format!("N{k:04}.md"), free(""))).collect();
    files[0].1 = free("[[N0001]] [[N0002]]");
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (_d, v) = vault(&refs);
    let links = Links::new(&v, Visibility::Public);
    let g = SiteGraph::build(&v, &links, &[]);
    assert_eq!((g.shown(), g.total(), g.links()), (SITE_NODES_MAX, n, 2));
    for url in ["/n0000", "/n0001", "/n0002"] {
        assert!(
            g.svg().contains(&format!("href=\"{url}\"")),
            "{url} is linked: kept"
        );
    }
}

#[test]
fn clique_graph_edges_are_bounded_and_spread() {
    // Issue 29 (Low): a 1,000-note clique drew 499,500 links (a 12.9 MB page). 200
    // notes all linked make 19,900 links, past the default cap of 10,000.
    let n = 200;
    let all: String = (0..n).map(|k| format!("[[C{k:03}]] ")).collect();
    let files: Vec<(String, String)> = (0..n)
        .map(|k| (format!("C{k:03}.md"), free(&all)))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (_d, v) = vault(&refs);
    let g = SiteGraph::build(&v, &Links::new(&v, Visibility::Public), &[]);
    let max = crate::render::budget::limits().graph_edges_max;
    assert_eq!(g.links_total(), n * (n - 1) / 2);
    assert!(g.links() <= max, "{} links drawn", g.links());
    assert!(
        g.links() >= max / 2,
        "the cap is spent, not starved: {}",
        g.links()
    );
    assert!(
        g.svg().len() < 2 << 20,
        "drawing of {} bytes",
        g.svg().len()
    );
    assert_eq!(g.shown(), n, "every note still drawn");
}

mod hidden {
    use super::*;
    use proptest::prelude::*;

    /// A note: visibility (0 public, 1 private, 2 draft) and the notes it links to.
    fn note() -> impl Strategy<Value = (u8, Vec<u8>)> {
        (0u8..3, proptest::collection::vec(0u8..7, 0..6))
    }

    fn text(k: usize, vis: u8, targets: &[u8]) -> String {
        let mut s = match vis {
            0 => "---\nfree: true\n---\n".to_owned(),
            1 => format!("---\ntitle: Hidden{k}title\n---\n"),
            _ => format!("---\ndraft: true\ntitle: Hidden{k}title\n---\n"),
        };
        for t in targets {
            s.push_str(&format!("[[N{t}]] "));
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the links, no graph a reader sees names a note they may not see:
        /// neither its title nor its page, and it adds to no count.
        #[test]
        fn no_hidden_note_reaches_a_graph(notes in proptest::collection::vec(note(), 2..7)) {
            let files: Vec<(String, String)> = notes
                .iter()
                .enumerate()
                .map(|(k, (vis, t))| (format!("N{k}.md"), text(k, *vis, t)))
                .collect();
            let refs: Vec<(&str, &str)> =
                files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let (_d, v) = vault(&refs);
            let g = Graphs::build(&v, None);
            for audience in [Visibility::Public, Visibility::Private] {
                let hidden: Vec<usize> = (0..v.notes().len())
                    .filter(|&j| v.notes()[j].visibility() > audience)
                    .collect();
                let links = g.links(audience);
                let mut pages = vec![g.site(&v, audience).svg().to_owned()];
                for i in 0..v.notes().len() {
                    if let Some(l) = local(&v, links, i) {
                        prop_assert!(!hidden.contains(&i), "a hidden note has a graph");
                        let visible = links.neighbours(i).len();
                        prop_assert_eq!(l.nodes.len() + l.more, visible);
                        pages.push(l.svg());
                    }
                }
                let seen = v.notes().iter().filter(|n| n.visibility() <= audience).count();
                prop_assert_eq!(g.site(&v, audience).total(), seen);
                for svg in &pages {
                    for &j in &hidden {
                        let n = &v.notes()[j];
                        prop_assert!(!svg.contains(&format!("Hidden{j}title")), "{}", svg);
                        prop_assert!(!svg.contains(&format!("href=\"{}\"", n.url)), "{}", svg);
                    }
                }
            }
        }
    }
}
