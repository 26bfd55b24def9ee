//! The bombs of issue 29, as generated notes: each a function of the scale, written
//! into the `Hostile/` folder of the vault copy. Every note is public (`free: true`),
//! so an anonymous reader reaches it as an attacker would.
//!
//! Key decision: **the full scale is the sizes** (a 1.8 MB note of `\def`
//! formulas, 8,000 `# a` headings, 20,000 tags, a 50 MB note, a 1,000-note clique,
//! a 16 KB note of pasted embed markers, a 70 KB note of missing-section embeds), the
//! small one a tenth or less of each, enough to pass every default budget, so the CI
//! run takes seconds.

use std::path::Path;

use super::Scale;

/// One bomb: the note the suite requests, and the budget its render should report.
#[derive(Debug, Clone)]
pub(crate) struct Bomb {
    /// Its name in the report.
    pub(crate) name: &'static str,
    /// Its page.
    pub(crate) url: String,
    /// Its note's path in the vault (what the log line names).
    pub(crate) path: String,
    /// The `[render]` bounds one of which a log line must name with the path, if the
    /// bomb is one a render budget stops (empty: bounded by another mechanism).
    pub(crate) bounds: &'static [&'static str],
}

/// The folder the bombs are written to.
pub(crate) const FOLDER: &str = "Hostile";

/// A formula whose `\def` doubles its argument, nested 16 times (2¹⁶ copies of `x+`).
fn def_formula(k: usize) -> String {
    format!(
        "$\\def\\d#1{{#1#1}}{}x_{{{k}}}+{}1$",
        "\\d{".repeat(16),
        "}".repeat(16)
    )
}

fn front(title: &str) -> String {
    format!("---\ntitle: {title}\nfree: true\n---\n\n")
}

fn pick(scale: Scale, small: usize, full: usize) -> usize {
    match scale {
        Scale::Small => small,
        Scale::Full => full,
    }
}

/// Writes every bomb into `vault/Hostile/` at `scale`; returns them, and the
/// ordinary note the suite edits (its path in the vault).
pub(crate) fn write(vault: &Path, scale: Scale) -> std::io::Result<Vec<Bomb>> {
    let dir = vault.join(FOLDER);
    std::fs::create_dir_all(&dir)?;
    let mut bombs = Vec::new();
    let mut put =
        |name: &'static str, file: &str, text: String, bounds: &'static [&'static str]| {
            std::fs::write(dir.join(format!("{file}.md")), text)?;
            bombs.push(Bomb {
                name,
                url: format!("/{}/{file}", FOLDER.to_lowercase()),
                path: format!("{FOLDER}/{file}.md"),
                bounds,
            });
            std::io::Result::Ok(())
        };
    // 29.2: `\def` formulas, ~1.8 MB at full scale.
    let n = pick(scale, 400, 15_000);
    let mut math = front("Math bomb");
    for k in 0..n {
        math.push_str(&def_formula(k));
        math.push('\n');
    }
    // At full scale the note (1.8 MB) is past the page budget itself.
    let math_bounds = &["formula_bytes_max", "math_bytes_max", "page_bytes_max"];
    put("math (29.2)", "math-bomb", math, math_bounds)?;
    // 29.3: one embed, then its marker pasted: 16 KB at full scale.
    let target = "Filler text for an embed target, repeated. ".repeat(pick(scale, 200, 1_400));
    put(
        "embed target",
        "embed-target",
        front("Embed target") + &target,
        &[],
    )?;
    let markers = "\u{E000}0\u{E001} ".repeat(pick(scale, 300, 2_600));
    let pasted = format!(
        "{}![[embed-target]]\n\n{markers}\n",
        front("Pasted markers")
    );
    put("pasted markers (29.3)", "pasted-markers", pasted, &[])?;
    // 29.4: the same heading again and again (32 KB at full scale).
    let headings = front("Headings") + &"# a\n".repeat(pick(scale, 2_000, 8_000));
    put("headings (29.4)", "headings", headings, &[])?;
    // 29.5: embeds of sections that are not there (70 KB at full scale).
    let missing: String = (0..pick(scale, 200, 2_000))
        .map(|k| format!("![[embed-target#No such part {k}]]\n"))
        .collect();
    put(
        "missing sections (29.5)",
        "missing-sections",
        front("Missing sections") + &missing,
        &[],
    )?;
    // 29.6: inline tags.
    let tags: String = (0..pick(scale, 2_000, 20_000))
        .map(|k| format!("#tag{k} "))
        .collect();
    put(
        "tags (29.6)",
        "tags",
        front("Tags") + &tags,
        &["tags_per_note_max"],
    )?;
    // Medium: a page too large to store (50 MB at full scale, 2 MB small: past the
    // default 1 MiB page budget either way).
    let line = "A long note of plain prose, line after line, too large for any page. \n";
    let big = front("Big") + &line.repeat(pick(scale, 2 << 20, 50 << 20) / line.len());
    put("big page (Medium)", "big", big, &["page_bytes_max"])?;
    write_clique(&dir, pick(scale, 150, 1_000))?;
    bombs.push(Bomb {
        name: "graph clique (Low)",
        url: "/graph".into(),
        path: format!("{FOLDER}/Clique/c0000.md"),
        bounds: &[],
    });
    Ok(bombs)
}

/// `n` notes that all link to each other.
fn write_clique(dir: &Path, n: usize) -> std::io::Result<()> {
    let dir = dir.join("Clique");
    std::fs::create_dir_all(&dir)?;
    let links: String = (0..n).map(|k| format!("[[c{k:04}]] ")).collect();
    for k in 0..n {
        std::fs::write(
            dir.join(format!("c{k:04}.md")),
            format!("{}{links}\n", front(&format!("Clique {k}"))),
        )?;
    }
    Ok(())
}

/// The ordinary note the suite edits to time a reload: its path and text at `v`.
pub(crate) fn ordinary(v: u32) -> (String, String) {
    (
        format!("{FOLDER}/ordinary.md"),
        format!(
            "{}An ordinary note among bombs. ordinary-marker-v{v}-end\n",
            front("Ordinary")
        ),
    )
}
