//! The base page of `quire bench serve`: a note embedding an Obsidian base that reads
//! the whole synthetic vault (two tags, a formula, sorted by date, the newest 100
//! shown), so its render cost grows with the vault. What is timed: its render alone
//! (`quire_vault::render::render` on a freshly reloaded vault each time, so no run is
//! kept from the one before), and over HTTP its first request (by then the site has
//! rendered it ahead, as it does every public page after the first fill) and later
//! ones (hits).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use quire_vault::{Vault, Visibility};

/// The base page's note (public), at the vault's root.
pub(crate) const NOTE: &str = "Base Page";
/// Its URL.
pub(crate) const URL: &str = "/base-page";

const BASE: &str = "filters:
  or:
    - file.hasTag(\"caching\")
    - file.hasTag(\"databases\")
formulas:
  kb: '(file.size / 1000).toFixed(1)'
views:
  - type: table
    name: Newest
    order: [file.basename, date, formula.kb, file.tags]
    sort:
      - property: date
        direction: DESC
    limit: 100
";

/// Writes the base and the note embedding it into `vault`.
pub(crate) fn write(vault: &Path) -> std::io::Result<()> {
    std::fs::write(vault.join("Bench.base"), BASE)?;
    std::fs::write(
        vault.join(format!("{NOTE}.md")),
        "---\nfree: true\n---\n# Newest notes on caching and databases\n\n![[Bench.base]]\n",
    )
}

/// The base page's render time, `reps` times, each on a vault reloaded from `dir`.
pub(crate) fn render_times(dir: &Path, reps: usize) -> anyhow::Result<Vec<Duration>> {
    let mut v = Vault::load(dir).context("loading the vault")?;
    let i = v.resolve(NOTE).context("the base page is in the vault")?;
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        v = Vault::reload(dir, &v)?;
        let t = Instant::now();
        let html = quire_vault::render::render(&v, i, Visibility::Public).html;
        out.push(t.elapsed());
        anyhow::ensure!(html.contains("base-table"), "the base was not drawn");
    }
    Ok(out)
}
