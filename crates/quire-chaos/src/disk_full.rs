//! The disk-full check: on a 16 MiB tmpfs, quire asked for a 64 MiB volume must refuse
//! to start with an error and leave no volume file behind; asked for 8 MiB it must
//! start and serve right bytes.
//!
//! Key decisions:
//! - **A real filesystem that is really full**: a tmpfs mounted for the check, so
//!   quire's preallocation meets ENOSPC from the kernel. Where mounting is not allowed
//!   the check is skipped with the reason `mount` gave, never passed.
//! - **The mount is undone on every path** (a guard), so a failed check leaves nothing
//!   mounted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::client::{Conn, Proto};
use crate::content::{Catalog, HOST};
use crate::ledger::{Ledger, Part, Verdict};
use crate::origin::Origin;
use crate::quire::{self, Quire};

/// The tmpfs's size and the two volume sizes asked for.
const TMPFS_SIZE: &str = "16m";
const TOO_BIG: &str = "64MiB";
const FITS: &str = "8MiB";

/// What the check found.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    /// Why the check did not run, if it did not.
    pub(crate) skipped: Option<String>,
    /// The too-large start exited with an error (and did not serve).
    pub(crate) too_big_refused: bool,
    /// Its exit status and error text.
    pub(crate) too_big_error: String,
    /// A volume file was left behind after the refusal.
    pub(crate) too_big_file_left: bool,
    /// The start that fits became healthy.
    pub(crate) fits_started: bool,
    /// It served a catalogue URL with the right bytes.
    pub(crate) fits_served_right: bool,
}

impl Report {
    /// Why the check failed (empty: it passed or was skipped).
    pub(crate) fn failures(&self) -> Vec<String> {
        if self.skipped.is_some() {
            return Vec::new();
        }
        let mut f = Vec::new();
        if !self.too_big_refused {
            f.push("disk full: quire did not refuse a volume larger than its filesystem".into());
        }
        if self.too_big_file_left {
            f.push("disk full: a volume file was left behind after the refusal".into());
        }
        if !self.fits_started || !self.fits_served_right {
            f.push("disk full: a volume that fits did not start and serve right bytes".into());
        }
        f
    }
}

/// Unmounts its directory when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount(dir: &Path) -> Result<Mount, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("running mount: {e}"))?;
    if out.status.success() {
        Ok(Mount(dir.to_path_buf()))
    } else {
        Err(format!(
            "mount -t tmpfs failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs the check with the quire binary `exe`, scratch files under `scratch`.
pub(crate) async fn check(exe: &Path, scratch: &Path) -> anyhow::Result<Report> {
    let dir = scratch.join("tmpfs");
    std::fs::create_dir_all(&dir)?;
    let _mount = match mount(&dir) {
        Ok(m) => m,
        Err(why) => {
            return Ok(Report {
                skipped: Some(why),
                ..Report::default()
            })
        }
    };
    let catalog = Arc::new(Catalog::new(1, 100));
    let origin = Origin::start(catalog.clone()).await?;
    let mut report = Report::default();
    too_big(exe, &dir, scratch, &origin, &mut report).await?;
    fits(exe, &dir, scratch, &origin, &catalog, &mut report).await?;
    Ok(report)
}

/// `quire proxy` in front of `origin` on `addr`, with a `size` volume at `vol`.
pub(crate) fn proxy_args(
    origin: &Origin,
    addr: std::net::SocketAddr,
    vol: &Path,
    size: &str,
) -> Vec<std::ffi::OsString> {
    vec![
        "proxy".into(),
        "--origin".into(),
        format!("http://{}", origin.addr()).into(),
        "--listen".into(),
        addr.to_string().into(),
        "--cache".into(),
        vol.into(),
        "--cache-size".into(),
        size.into(),
    ]
}

async fn too_big(
    exe: &Path,
    dir: &Path,
    scratch: &Path,
    origin: &Origin,
    report: &mut Report,
) -> anyhow::Result<()> {
    let vol = dir.join("too-big.vol");
    let addr = quire::free_addr()?;
    let log = scratch.join("quire-disk-full.log");
    let mut q = Quire::new(exe, proxy_args(origin, addr, &vol, TOO_BIG), addr, log);
    let began = Instant::now();
    match q.start(Duration::from_secs(30)).await {
        Ok(_) => {
            report.too_big_error = "started and answered health".into();
            let _ = q.stop(Duration::from_secs(10)).await;
        }
        Err(e) => {
            report.too_big_refused = e.to_string().contains("exited");
            report.too_big_error = format!("{e:#} (after {} ms)", began.elapsed().as_millis());
        }
    }
    report.too_big_file_left = vol.exists();
    Ok(())
}

async fn fits(
    exe: &Path,
    dir: &Path,
    scratch: &Path,
    origin: &Origin,
    catalog: &Catalog,
    report: &mut Report,
) -> anyhow::Result<()> {
    let vol = dir.join("fits.vol");
    let addr = quire::free_addr()?;
    let log = scratch.join("quire-disk-fits.log");
    let mut q = Quire::new(exe, proxy_args(origin, addr, &vol, FITS), addr, log);
    if q.start(Duration::from_secs(30)).await.is_err() {
        return Ok(());
    }
    report.fits_started = true;
    let i = (0..catalog.len())
        .find(|&i| catalog.spec(i).size < 30_000)
        .unwrap_or(0);
    let mut right = 0;
    if let Ok(mut c) = Conn::connect(addr, Proto::H1, None).await {
        // Twice: the miss that fills, then the hit from the volume on the tmpfs.
        for _ in 0..2 {
            let sent = Instant::now();
            let r = c
                .send(
                    Method::GET,
                    &Catalog::path(i),
                    HOST,
                    &[],
                    Bytes::new(),
                    None,
                )
                .await;
            if let Ok(resp) = r {
                if let (200, Ok(body)) = (resp.status, &resp.body) {
                    let v = Ledger::default().judge(catalog, i, sent, Part::Full(body));
                    right += usize::from(v == Verdict::Current);
                }
            }
        }
    }
    report.fits_served_right = right == 2;
    let _ = q.stop(Duration::from_secs(10)).await;
    Ok(())
}
