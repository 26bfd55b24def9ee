//! `quire bench dict --dict FILE --pages DIR`: does brotli against a dictionary
//! (`dcb`, RFC 9842 §5.1) pay beside zstd against it (`dcz`, which `quire serve`
//! stores)? For each page in DIR: brotli at quality 5 and 11 alone, `dcz` at zstd
//! level 19 (as stored), and `dcb` at quality 5 and 11 (brotli with the dictionary
//! as its custom prefix, plus the 36-byte header), each `dcb` decoded back to check
//! it. Prints bytes per page and each coding against brotli 11, and the time per
//! page of each coding (compression happens once per page, in the background).

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use quire_http::dictionary::Dictionary;

/// Arguments of `quire bench dict`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchDictArgs {
    /// The dictionary (e.g. a site's `/_static/dictionary-….dict`).
    #[arg(long)]
    pub dict: PathBuf,
    /// A folder of pages (identity bodies), one file each.
    #[arg(long)]
    pub pages: PathBuf,
}

/// The `dcb` header: magic, then the dictionary's SHA-256 (RFC 9842 §4.1).
const DCB_MAGIC: [u8; 4] = [0xff, 0x44, 0x43, 0x42];

/// Runs the comparison and prints it.
pub fn run(args: &BenchDictArgs) -> anyhow::Result<()> {
    let dict = std::fs::read(&args.dict).with_context(|| format!("{}", args.dict.display()))?;
    let d = Dictionary::new(dict.clone());
    let mut pages = Vec::new();
    for e in std::fs::read_dir(&args.pages)? {
        pages.push(std::fs::read(e?.path())?);
    }
    anyhow::ensure!(!pages.is_empty(), "no pages in {}", args.pages.display());
    let names = [
        "identity",
        "brotli 5",
        "brotli 11",
        "dcz (zstd 19)",
        "dcb 5",
        "dcb 11",
    ];
    let mut bytes = [0usize; 6];
    let mut time = [Duration::ZERO; 6];
    for page in &pages {
        let mut timed =
            |i: usize, f: &dyn Fn() -> anyhow::Result<Vec<u8>>| -> anyhow::Result<Vec<u8>> {
                let t = Instant::now();
                let out = f()?;
                time[i] += t.elapsed();
                bytes[i] += out.len();
                Ok(out)
            };
        timed(0, &|| Ok(page.clone()))?;
        timed(1, &|| brotli(page, 5, &[]))?;
        timed(2, &|| brotli(page, 11, &[]))?;
        timed(3, &|| Ok(quire_server::compress::encode_dcz(page, &d, 19)?))?;
        for (i, q) in [(4, 5), (5, 11)] {
            let out = timed(i, &|| {
                let mut v = DCB_MAGIC.to_vec();
                v.extend_from_slice(d.hash());
                v.extend(brotli(page, q, &dict)?);
                Ok(v)
            })?;
            anyhow::ensure!(
                unbrotli(&out[36..], &dict)? == *page,
                "dcb {q} did not round-trip"
            );
        }
    }
    let n = pages.len();
    println!("{n} pages, dictionary {} bytes", dict.len());
    println!(
        "{:<16} {:>14} {:>14} {:>16}",
        "coding", "bytes/page", "vs brotli 11", "ms/page to make"
    );
    for i in 0..names.len() {
        println!(
            "{:<16} {:>14.0} {:>14.2} {:>16.2}",
            names[i],
            bytes[i] as f64 / n as f64,
            bytes[i] as f64 / bytes[2] as f64,
            time[i].as_secs_f64() * 1e3 / n as f64
        );
    }
    Ok(())
}

fn brotli(body: &[u8], quality: i32, dict: &[u8]) -> anyhow::Result<Vec<u8>> {
    let params = brotli::enc::BrotliEncoderParams {
        quality,
        lgwin: 22,
        ..Default::default()
    };
    let mut out = Vec::new();
    let (mut inb, mut outb) = (vec![0u8; 4096], vec![0u8; 4096]);
    brotli::enc::BrotliCompressCustomIoCustomDict(
        &mut brotli::IoReaderWrapper(&mut &body[..]),
        &mut brotli::IoWriterWrapper(&mut out),
        &mut inb,
        &mut outb,
        &params,
        brotli::enc::StandardAlloc::default(),
        &mut |_, _, _, _| (),
        dict,
        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "unexpected end"),
    )?;
    Ok(out)
}

fn unbrotli(body: &[u8], dict: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut r = brotli::Decompressor::new_with_custom_dict(body, 4096, dict.to_vec().into());
    let mut out = Vec::new();
    r.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brotli against a dictionary decodes only with it, and a page much like the
    /// dictionary costs a fraction of its bytes alone.
    #[test]
    fn dcb_round_trips_against_its_dictionary() {
        let dict =
            b"<html><head><title>quire</title></head><body><nav>home tags search</nav>".repeat(20);
        let page = [&dict[..600], b"<p>a note of its own</p>", &dict[600..900]].concat();
        let with = brotli(&page, 11, &dict).unwrap();
        let without = brotli(&page, 11, &[]).unwrap();
        assert!(
            with.len() < without.len(),
            "{} vs {}",
            with.len(),
            without.len()
        );
        assert_eq!(unbrotli(&with, &dict).unwrap(), page);
        assert!(unbrotli(&with, &[]).map_or(true, |out| out != page));
    }
}
