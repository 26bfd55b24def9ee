//! The bundled `examples/vault` loads cleanly, and rendering it keeps every private
//! and draft note out of what a public reader sees.

use std::path::Path;

use quire_vault::render::render;
use quire_vault::{Vault, Visibility};

fn example() -> Vault {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
    Vault::load(&root).expect("examples/vault loads")
}

#[test]
fn the_example_vault_loads_with_every_feature_present() {
    let v = example();
    let notes = v.notes();
    assert!(notes.len() >= 100, "only {} notes", notes.len());
    let count = |vis| notes.iter().filter(|n| n.visibility() == vis).count();
    assert!(
        count(Visibility::Public) > 0
            && count(Visibility::Private) > 0
            && count(Visibility::Draft) > 0
    );
    assert!(v.warnings().is_empty(), "warnings: {:?}", v.warnings());
    assert!(v.resolve("Home").is_some(), "a Home note");
    let links: usize = (0..notes.len())
        .map(|i| v.targets(i).iter().flatten().count())
        .sum();
    let broken = (0..notes.len())
        .flat_map(|i| notes[i].links.iter().zip(v.targets(i)))
        .filter(|(l, t)| !l.embed && !l.target.is_empty() && t.is_none())
        .count();
    assert!(
        links > notes.len(),
        "the notes link to each other ({links} links)"
    );
    assert!(broken > 0, "some links are deliberately broken");
    assert!(notes.iter().any(|n| n
        .links
        .iter()
        .any(|l| l.embed && v.attachment(&l.target).is_some())));
    assert!((0..notes.len()).any(|i| !v.backlinks(i).is_empty()));
}

#[test]
fn public_pages_never_name_a_private_page() {
    let v = example();
    let hidden: Vec<&str> = v
        .notes()
        .iter()
        .filter(|n| n.visibility() != Visibility::Public)
        .map(|n| n.url.as_str())
        .collect();
    for (i, n) in v.notes().iter().enumerate() {
        if n.visibility() != Visibility::Public {
            continue;
        }
        let html = render(&v, i, Visibility::Public).html;
        for url in &hidden {
            assert!(
                !html.contains(&format!("href=\"{url}\""))
                    && !html.contains(&format!("href=\"{url}#")),
                "{} links to the hidden page {url}",
                n.path
            );
        }
        // Every audience renders every note without trouble.
        for aud in [Visibility::Private, Visibility::Draft] {
            assert!(!render(&v, i, aud).html.is_empty() || n.body.trim().is_empty());
        }
    }
}

#[test]
fn public_listings_hold_only_public_notes() {
    use quire_vault::pages;
    let v = example();
    let public = |i: usize| v.notes()[i].visibility() == Visibility::Public;
    let index = pages::index(&v, Visibility::Public);
    assert!(!index.is_empty() && index.iter().all(|e| public(e.note)));
    assert!(index.len() < v.notes().len(), "hidden notes are left out");
    assert!(pages::tags(&v, Visibility::Public)
        .values()
        .flatten()
        .all(|e| public(e.note)));
    assert!(pages::folders(&v, Visibility::Public)
        .values()
        .flatten()
        .all(|e| public(e.note)));
    assert!(!pages::folders(&v, Visibility::Public).contains_key("Private"));
    for i in 0..v.notes().len() {
        assert!(pages::backlinks(&v, i, Visibility::Public)
            .iter()
            .all(|e| public(e.note)));
    }
}
