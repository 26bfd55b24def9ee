//! `quire serve`: publishes a vault through the cache. Loads the server
//! configuration (file, then flags), opens the site, starts the server with the site
//! as its upstream and the vault watcher, and drains on SIGTERM or SIGINT, or once
//! a binary upgrade has taken over ([`crate::upgrade`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use quire_server::config::ByteSize;
use quire_server::{Config, Ctx};
use quire_site::Site;

use crate::cli::ServeArgs;
use crate::proxy::runtime;
use crate::settings;
use crate::signals::{reload_on_sighup, reopen_log_on_sigusr1};
use crate::upgrade::{self, Start};

/// The default cache size of `quire serve` (a site is smaller than what a proxy
/// fronts).
const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// Without a configuration file, the largest response stored is what the volume's
/// regions (1/128 of it, a power of two) hold, up to the general default of 8 MiB: the
/// default start (a 256 MiB volume) used to warn about its own defaults, that
/// responses over 2 MB would not be stored. A file that sets `limits.object_bytes`
/// keeps it, and the warning when the volume is too small for it.
fn fitting_object_bytes(cache_bytes: u64) -> u64 {
    let region = 1u64 << (cache_bytes / 128).max(1).ilog2();
    region.clamp(64 << 10, 8 << 20)
}

/// The configuration `args` describe: the file if given, then each flag over it.
pub(crate) fn config_from(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut cfg = match &args.server.config {
        Some(p) => settings::load_config(p)?,
        None => {
            let mut c = Config::default();
            c.cache.path = PathBuf::from("quire-cache/serve.vol");
            c.cache.size = ByteSize(DEFAULT_CACHE_BYTES);
            c
        }
    };
    cfg.origin = None;
    settings::apply(&mut cfg, &args.server)?;
    if args.server.config.is_none() {
        cfg.limits.object_bytes = ByteSize(fitting_object_bytes(cfg.cache.size.0));
    }
    Ok(cfg)
}

/// Serves the vault until SIGTERM/SIGINT (or a binary upgrade took over), then drains.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let cfg = config_from(args)?;
    let mut start = Start::from_env()?;
    let (rt, workers) = runtime(cfg.workers)?;
    rt.block_on(async move {
        start
            .take_over(&cfg, || upgrade::check_serve(&cfg, &args.vault))
            .await?;
        // After a take-over, the old process has flushed and closed the vault's
        // databases by now (it lets go of the volume last).
        let mode = crate::cluster::session_mode(&cfg)?;
        let site = Site::open_with(&args.vault, &mode)
            .with_context(|| format!("opening the vault {}", args.vault.display()))?;
        let ctx = start
            .open(|| Ctx::with_upstream(cfg.clone(), Arc::new(site.clone())))
            .await?;
        site.prefill_with(quire_server::prefill::Prefill::start(ctx.clone()));
        let watcher = if args.no_watch {
            None
        } else {
            Some(
                quire_site::watch::start(site.clone(), ctx.clone())
                    .context("watching the vault for changes")?,
            )
        };
        let cluster = crate::cluster::join_site(&ctx, &cfg, &site).await?;
        let server = start.server(ctx.clone()).await?;
        // Every signal handler before `serving` tells systemd (and the log) that
        // the server is ready: a signal sent on READY=1 must find its handler.
        let flags = args.clone();
        reload_on_sighup(&ctx, move || config_from(&flags));
        reopen_log_on_sigusr1(&ctx);
        let stop = start.serving(&server);
        let addr = server.local_addr()?;
        let snap = site.snapshot();
        eprintln!(
            "quire: serving {} ({} notes) on {}://{addr} (cache {}, {} workers{})",
            args.vault.display(),
            snap.vault.notes().len(),
            if ctx.tls.is_some() { "https" } else { "http" },
            ctx.peek().cfg.cache.path.display(),
            workers,
            if watcher.is_some() {
                ", watching for changes"
            } else {
                ""
            },
        );
        server.run(stop).await;
        if let Some(c) = cluster {
            c.stop().await;
        }
        drop(watcher);
        site.flush();
        eprintln!("quire: stopped");
        anyhow::Ok(())
    })
}
