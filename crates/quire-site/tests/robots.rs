//! `/robots.txt` with the site's AI-usage signals (`[robots]` in `site.toml`), end to
//! end against a real quire server, and a change of the settings reaching it.

mod common;

use common::*;

const NOTE: &str = "---\nfree: true\n---\nA note.\n";

#[test]
fn robots_txt_carries_the_sites_signals_and_follows_a_change() {
    let settings = "[robots]\nsearch = true\nai_train = false\ndisallow = [\"GPTBot\"]\n";
    let r = start_with(&[("a.md", NOTE), (".quire/site.toml", settings)], false);
    let got = get(r.addr, "/robots.txt");
    assert_eq!(got.status, 200);
    assert!(
        got.body.starts_with(
            "User-agent: *\nContent-Signal: search=yes, ai-train=no\nDisallow: /_views\n"
        ),
        "{}",
        got.body
    );
    assert!(
        got.body.contains("\nUser-agent: GPTBot\nDisallow: /\n"),
        "{}",
        got.body
    );
    assert!(get(r.addr, "/robots.txt").hit());
    edit_file(&r, ".quire/site.toml", "[robots]\nai_train = true\n");
    let got = get(r.addr, "/robots.txt");
    assert!(
        got.body.contains("Content-Signal: ai-train=yes\n"),
        "{}",
        got.body
    );
    assert!(!got.body.contains("GPTBot"), "{}", got.body);
}
