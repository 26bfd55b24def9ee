//! What a hostile case is given and what it gives back: the scale, the [`Env`] that
//! starts a `quire proxy` for it ([`Proxy`]) and keeps the logs searched for panics,
//! and its [`Outcome`]. Below the cases and the suite that runs them (`super`), so
//! every case imports these without importing the suite.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::quire::{self, Quire};

/// How big the attacks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub(crate) enum Scale {
    /// A few seconds per case: CI.
    Small,
    /// The sizes the attacks were found at: one command, minutes.
    Full,
}

impl Scale {
    /// `small` at small scale, `full` at full scale.
    pub(crate) fn pick<T>(self, small: T, full: T) -> T {
        match self {
            Scale::Small => small,
            Scale::Full => full,
        }
    }
}

/// What a case needs: the binary, a scratch directory, the scale.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) exe: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) scale: Scale,
    /// The logs of every quire started, searched for panics after each case.
    logs: std::sync::Mutex<Vec<PathBuf>>,
}

/// One case's result.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Outcome {
    pub(crate) name: String,
    /// What the case measured, by name.
    pub(crate) figures: Vec<(String, f64)>,
    /// Broken promises, in words.
    pub(crate) failures: Vec<String>,
    /// Why the case judged nothing (a tool it needs is missing), if it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) skipped: Option<String>,
}

impl Outcome {
    pub(crate) fn new(name: &str) -> Outcome {
        Outcome {
            name: name.to_string(),
            ..Outcome::default()
        }
    }

    /// Records a figure.
    pub(crate) fn figure(&mut self, name: &str, value: f64) {
        self.figures.push((name.to_string(), value));
    }

    /// Records a failure unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }
}

/// A quire proxy started for one case; stopped when dropped (the child is killed on
/// drop).
#[derive(Debug)]
pub(crate) struct Proxy {
    _quire: Quire,
    pub(crate) addr: SocketAddr,
}

impl Env {
    /// An environment for the cases of one run: `exe` the `quire` binary, `dir` their
    /// scratch directory.
    pub(super) fn new(exe: &Path, dir: &Path, scale: Scale) -> Env {
        Env {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            scale,
            logs: std::sync::Mutex::default(),
        }
    }

    /// Starts `quire proxy` in front of `origin` with `toml` appended to its config
    /// file (which already sets `origin`, `listen` and `[cache]`), `case` naming its files.
    pub(crate) async fn proxy(
        &self,
        case: &str,
        origin: &str,
        toml: &str,
    ) -> anyhow::Result<Proxy> {
        self.proxy_sized(case, origin, toml, "64 MiB").await
    }

    /// [`Env::proxy`] with a cache of `size` (a larger volume stores larger objects).
    pub(crate) async fn proxy_sized(
        &self,
        case: &str,
        origin: &str,
        toml: &str,
        size: &str,
    ) -> anyhow::Result<Proxy> {
        let addr = quire::free_addr()?;
        let config = self.dir.join(format!("{case}.toml"));
        let volume = self.dir.join(format!("{case}.vol"));
        let origin_line = if origin.is_empty() {
            String::new()
        } else {
            format!("origin = \"{origin}\"\n")
        };
        let text = format!(
            "listen = \"{addr}\"\n{origin_line}{toml}\n\n[cache]\npath = \"{}\"\nsize = \"{size}\"\n",
            volume.display()
        );
        std::fs::write(&config, text)?;
        let args: Vec<OsString> = vec!["proxy".into(), "--config".into(), config.into()];
        let log = self.dir.join(format!("{case}.log"));
        self.watch_log(&log);
        let mut quire = Quire::new(&self.exe, args, addr, log);
        quire.start(Duration::from_secs(20)).await?;
        Ok(Proxy {
            _quire: quire,
            addr,
        })
    }

    /// Adds `log` to the logs searched for panics after the case.
    pub(crate) fn watch_log(&self, log: &Path) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(log.to_path_buf());
        }
    }

    /// Panics in the logs of the quires started since the last call.
    pub(super) fn panics(&self) -> Vec<String> {
        let logs = self
            .logs
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        logs.iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .flat_map(|text| {
                text.lines()
                    .filter(|l| l.contains("panicked"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}
