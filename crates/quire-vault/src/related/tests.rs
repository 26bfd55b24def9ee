//! Tests of `related`: the dot product, note text, audiences and updates on small
//! vaults.

use super::*;
use crate::testing::vault;

fn paths(v: &Vault, list: &[usize]) -> Vec<String> {
    list.iter().map(|&i| v.notes()[i].path.clone()).collect()
}

fn one_thread() -> Options {
    Options {
        threads: 1,
        ..Options::default()
    }
}

#[test]
fn dot_is_symmetric_to_the_bit() {
    let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..37).map(|i| (i as f32 * 1.91).cos()).collect();
    assert_eq!(dot(&a, &b).to_bits(), dot(&b, &a).to_bits());
    let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((dot(&a, &b) - naive).abs() < 1e-5);
}

#[test]
fn note_text_has_title_tags_and_link_text_but_not_embeds() {
    let (_d, v) = vault(&[(
        "A.md",
        "---\ntitle: Alpha\ntags: [cache, rust]\n---\nSee [[Beta|the other one]] and ![[pic.png]].",
    )]);
    let t = note_text(&v.notes()[0]);
    assert!(t.starts_with("Alpha\ncache rust \n"), "{t}");
    assert!(t.contains("See the other one (Beta) and ."), "{t}");
    let (_d, v) = vault(&[("A.md", "Kept %%hidden [[Beta]]%% text.")]);
    let t = note_text(&v.notes()[0]);
    assert!(
        t.contains("Kept  text.") && !t.contains("hidden") && !t.contains("Beta"),
        "{t}"
    );
}

#[test]
fn tiny_vaults_empty_notes_and_lonely_notes() {
    let (_d, v) = vault(&[
        (
            "a.md",
            "---\nfree: true\n---\nsourdough starter flour water",
        ),
        ("b.md", "---\nfree: true\n---\nsourdough loaf flour oven"),
        ("empty.md", "---\nfree: true\n---\n"),
        ("odd.md", "---\nfree: true\n---\nquasar nebula telescope"),
    ]);
    let l = Lexical::for_vault(&v, Visibility::Public);
    let r = Related::build_with(&v, &l, one_thread());
    let i = |p: &str| v.notes().iter().position(|n| n.path == p).unwrap();
    assert_eq!(
        paths(&v, r.related(i("a.md"), Visibility::Public)),
        ["b.md"]
    );
    assert!(r.related(i("empty.md"), Visibility::Draft).is_empty());
    assert!(
        r.related(i("odd.md"), Visibility::Draft).is_empty(),
        "nothing alike: no list rather than arbitrary notes"
    );
    assert!(r.related(99, Visibility::Draft).is_empty());
    let (_d, none) = vault(&[]);
    let r = Related::build_with(&none, &l, one_thread());
    assert!(r.is_empty());
}

#[test]
fn hidden_notes_have_no_lists_for_audiences_that_cannot_read_them() {
    let (_d, v) = vault(&[
        ("pub.md", "---\nfree: true\n---\ncache eviction lru"),
        ("priv.md", "cache eviction lru tinylfu"),
        ("draft.md", "---\ndraft: true\n---\ncache eviction tinylfu"),
    ]);
    let l = Lexical::for_vault(&v, Visibility::Draft);
    let r = Related::build_with(&v, &l, one_thread());
    let i = |p: &str| v.notes().iter().position(|n| n.path == p).unwrap();
    assert!(r.related(i("priv.md"), Visibility::Public).is_empty());
    assert!(r.related(i("draft.md"), Visibility::Private).is_empty());
    assert_eq!(
        paths(&v, r.related(i("pub.md"), Visibility::Public)),
        Vec::<String>::new()
    );
    assert_eq!(
        paths(&v, r.related(i("pub.md"), Visibility::Private)),
        ["priv.md"]
    );
    assert_eq!(r.related(i("pub.md"), Visibility::Draft).len(), 2);
}

#[test]
fn an_update_follows_renames_and_shifted_indices() {
    let files = [
        ("b.md", "---\nfree: true\n---\nbread flour water salt"),
        ("c.md", "---\nfree: true\n---\nbread flour yeast"),
        ("d.md", "---\nfree: true\n---\nhiking boots trail"),
    ];
    let (dir, v) = vault(&files);
    let l = Lexical::for_vault(&v, Visibility::Public);
    let mut r = Related::build_with(&v, &l, one_thread());
    // A new note sorts first, shifting every index; c.md is renamed.
    std::fs::write(
        dir.path().join("a.md"),
        "---\nfree: true\n---\nhiking trail map",
    )
    .unwrap();
    std::fs::rename(dir.path().join("c.md"), dir.path().join("e.md")).unwrap();
    let v2 = Vault::load(dir.path()).unwrap();
    let purge = r.update(&v2, &l, &[], &["c.md"]);
    let i = |p: &str| v2.notes().iter().position(|n| n.path == p).unwrap();
    assert_eq!(
        paths(&v2, r.related(i("b.md"), Visibility::Public)),
        ["e.md"]
    );
    assert_eq!(
        paths(&v2, r.related(i("d.md"), Visibility::Public)),
        ["a.md"]
    );
    assert_eq!(
        paths(&v2, r.related(i("a.md"), Visibility::Public)),
        ["d.md"]
    );
    let fresh = Related::build_with(&v2, &l, one_thread());
    for n in 0..v2.notes().len() {
        for a in AUDIENCES {
            assert_eq!(r.related(n, a), fresh.related(n, a));
        }
    }
    let mut want = vec![i("a.md"), i("b.md"), i("d.md"), i("e.md")];
    want.sort_unstable();
    assert_eq!(purge, want);
    // Nothing changed: nothing to purge.
    assert!(r.update(&v2, &l, &[], &[]).is_empty());
}

#[test]
fn related_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Related>();
    shared::<Lexical>();
}
