//! `quire proxy`: loads the configuration (file, then flags), starts the runtime and
//! the server (on sockets handed over when there are: [`crate::upgrade`]), and drains
//! on SIGTERM or SIGINT, or once a binary upgrade has taken over.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use quire_server::config::ByteSize;
use quire_server::{Config, Ctx};

use crate::cli::ProxyArgs;
use crate::upgrade::{self, Start};

/// Reads a TOML configuration file; unknown keys and bad values are errors that
/// name the file and the key.
pub(crate) fn load_config(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config {}", path.display()))?;
    parse_config(&text).with_context(|| format!("config {}", path.display()))
}

/// Parses configuration text.
pub(crate) fn parse_config(text: &str) -> anyhow::Result<Config> {
    Ok(toml::from_str(text)?)
}

/// The configuration `args` describe: the file if given, then each flag over it.
pub(crate) fn config_from(args: &ProxyArgs) -> anyhow::Result<Config> {
    let mut cfg = match &args.config {
        Some(p) => load_config(p)?,
        None => Config::default(),
    };
    if let Some(o) = &args.origin {
        // The flag names the one origin: it replaces the file's `[[origins]]` too.
        cfg.origin = Some(o.clone());
        cfg.origins.clear();
    }
    apply_flags(
        &mut cfg,
        args.listen,
        args.cache.as_ref(),
        args.cache_size.as_deref(),
        args.workers,
    )?;
    apply_tls_flags(&mut cfg, &args.tls);
    apply_log_flags(&mut cfg, &args.log);
    Ok(cfg)
}

/// Sets the flags shared by `quire proxy` and `quire serve` over `cfg`.
pub(crate) fn apply_flags(
    cfg: &mut Config,
    listen: Option<std::net::SocketAddr>,
    cache: Option<&std::path::PathBuf>,
    cache_size: Option<&str>,
    workers: Option<usize>,
) -> anyhow::Result<()> {
    if let Some(l) = listen {
        cfg.listen = l;
    }
    if let Some(c) = cache {
        cfg.cache.path = c.clone();
    }
    if let Some(s) = cache_size {
        cfg.cache.size = s
            .parse::<ByteSize>()
            .map_err(|e| anyhow::anyhow!("--cache-size: {e}"))?;
    }
    if let Some(w) = workers {
        cfg.workers = w;
    }
    Ok(())
}

/// Sets the HTTPS flags over `cfg`.
pub(crate) fn apply_tls_flags(cfg: &mut Config, tls: &crate::cli::TlsArgs) {
    if let (Some(cert), Some(key)) = (&tls.tls_cert, &tls.tls_key) {
        cfg.tls.cert = Some(cert.clone());
        cfg.tls.key = Some(key.clone());
    }
    if let Some(a) = tls.listen_http {
        cfg.listen_http = Some(a);
    }
    if !tls.acme_domains.is_empty() {
        let acme = cfg.tls.acme.get_or_insert_with(Default::default);
        acme.domains = tls.acme_domains.clone();
    }
}

/// Sets the access-log flags over `cfg`.
pub(crate) fn apply_log_flags(cfg: &mut Config, log: &crate::cli::LogArgs) {
    if let Some(path) = &log.access_log {
        cfg.log.access = Some(path.clone());
    }
    match log.access_log_format.as_deref() {
        Some("json") => cfg.log.format = quire_server::access_log::Format::Json,
        Some(_) => cfg.log.format = quire_server::access_log::Format::Combined,
        None => {}
    }
}

/// The proxy's state: its origins, behind peer fill in a cluster with peers.
fn open_proxy(cfg: &Config) -> Result<Arc<Ctx>, quire_server::StartError> {
    let upstream = Ctx::proxy_upstream(cfg)?;
    let upstream = crate::cluster::with_peer_fill(upstream, cfg)?;
    Ctx::with_upstream(cfg.clone(), upstream)
}

/// Runs the proxy until SIGTERM/SIGINT, then drains.
pub(crate) fn run(args: &ProxyArgs) -> anyhow::Result<()> {
    let cfg = config_from(args)?;
    let mut start = Start::from_env()?;
    let (rt, workers) = runtime(cfg.workers)?;
    rt.block_on(async move {
        start.take_over(&cfg, || upgrade::check_proxy(&cfg)).await?;
        let ctx = start.open(|| open_proxy(&cfg)).await?;
        let cluster = crate::cluster::join(&ctx, &cfg).await?;
        let server = start.server(ctx.clone()).await?;
        // Every signal handler before `serving` tells systemd (and the log) that
        // the server is ready: a signal sent on READY=1 must find its handler.
        let flags = args.clone();
        reload_on_sighup(&ctx, move || config_from(&flags));
        reopen_log_on_sigusr1(&ctx);
        let stop = start.serving(&server);
        let addr = server.local_addr()?;
        eprintln!(
            "quire: proxying {}://{addr} -> {} (cache {}, {} workers)",
            if ctx.tls.is_some() { "https" } else { "http" },
            quire_server::origins::describe(&ctx.peek().cfg),
            ctx.peek().cfg.cache.path.display(),
            workers
        );
        server.run(stop).await;
        if let Some(c) = cluster {
            c.stop().await;
        }
        eprintln!("quire: stopped");
        anyhow::Ok(())
    })
}

/// On SIGUSR1 (logrotate's convention), reopens the access log: lines go to a new
/// file at the configured path once the old one was moved away.
pub(crate) fn reopen_log_on_sigusr1(ctx: &std::sync::Arc<Ctx>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    let ctx = ctx.clone();
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            // The log of the policy now (a reload may have moved it).
            if let Some(log) = ctx.peek().access_log.clone() {
                log.reopen();
            }
        }
    });
}

/// The runtime for `workers` (0: one per core), and the worker count.
pub(crate) fn runtime(workers: usize) -> anyhow::Result<(tokio::runtime::Runtime, usize)> {
    let workers = if workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        workers
    };
    // One worker: a current-thread runtime (no work-stealing queues or cross-thread
    // wake-ups on the hit path); more: the multi-thread scheduler.
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    let rt = builder
        .enable_all()
        .thread_name("quire-worker")
        .build()
        .context("starting the runtime")?;
    Ok((rt, workers))
}

/// On SIGHUP, reads the configuration again with `load` (the file, then the
/// command line's flags over it) and applies it to requests that start from then
/// on; requests in flight finish under the old one. A configuration that does not
/// parse or validate is logged and the old one stays. Then the TLS certificate
/// files (or ACME's stored ones) are read again and presented to new connections;
/// open connections keep theirs, and a file that fails the start-up checks is
/// logged and the current certificate stays. Reloads run one at a time, off the
/// runtime's threads (they read files); systemd hears `RELOADING=1` before each and
/// `READY=1` after.
pub(crate) fn reload_on_sighup(
    ctx: &std::sync::Arc<Ctx>,
    load: impl Fn() -> anyhow::Result<Config> + Send + Sync + 'static,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    let ctx = ctx.clone();
    let load = std::sync::Arc::new(load);
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            crate::systemd::reloading();
            let (ctx, load) = (ctx.clone(), load.clone());
            let _ = tokio::task::spawn_blocking(move || reload(&ctx, load.as_ref())).await;
            crate::systemd::ready();
        }
    });
}

/// `text` on one line (TOML's errors quote the offending line under the message),
/// so that a log line says the whole of it.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.trim_start_matches(['|', '^', ' ']).is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// One reload: the configuration, then the certificates (see [`reload_on_sighup`]).
pub(crate) fn reload(ctx: &Ctx, load: &dyn Fn() -> anyhow::Result<Config>) {
    let applied = load()
        .inspect_err(|_| ctx.reloads.failed())
        .and_then(|cfg| Ok(ctx.reload(cfg)?));
    match applied {
        Ok(r) if r.needs_restart.is_empty() => eprintln!("quire: SIGHUP: configuration reloaded"),
        Ok(r) => eprintln!(
            "quire: SIGHUP: configuration reloaded; changed but applied only on restart: {}",
            r.needs_restart.join(", ")
        ),
        Err(e) => eprintln!(
            "quire: SIGHUP: configuration not reloaded, the current one stays: {}",
            one_line(&crate::error_chain(&e))
        ),
    }
    let Some(tls) = &ctx.tls else {
        return;
    };
    match tls.reload() {
        Ok(l) => {
            let left = l.not_after.duration_since(std::time::SystemTime::now());
            let days = left.map_or(0, |d| d.as_secs() / 86_400);
            eprintln!("quire: SIGHUP: certificate reloaded ({days} days left)");
        }
        Err(e) => {
            eprintln!("quire: SIGHUP: certificate not reloaded, the current one stays: {e}")
        }
    }
}

/// Resolves on the first SIGTERM or SIGINT. The handlers are installed on the
/// call, not on the first poll: from then on neither signal ends the process
/// without a drain.
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = signals else {
            // Without signal handlers, run until killed.
            std::future::pending::<()>().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("quire: shutting down, draining in-flight requests");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_origins_parse_and_the_origin_flag_replaces_them() {
        let text = r#"
            [[origins]]
            url = "http://10.0.0.1:8080"
            weight = 3
            health_path = "/healthz"
            health_interval = "2s"
            [[origins]]
            url = "http://10.0.0.2:8080"
            [[origins]]
            url = "https://api.internal"
            hosts = ["api.example.com"]
            path_prefix = "/v1"
            max_connections = 64
            "#;
        let cfg = parse_config(text).unwrap();
        assert_eq!(cfg.origins.len(), 3);
        assert_eq!(cfg.origins[0].weight, 3);
        assert_eq!(cfg.origins[0].health_interval.0.as_secs(), 2);
        assert_eq!(cfg.origins[2].max_connections, Some(64));
        cfg.validate().unwrap();
        assert_eq!(quire_server::origins::describe(&cfg), "3 origins");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quire.toml");
        std::fs::write(&path, text).unwrap();
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "quire",
            "proxy",
            "--config",
            path.to_str().unwrap(),
            "--origin",
            "http://127.0.0.1:9000",
        ])
        .unwrap();
        let crate::cli::Command::Proxy(args) = cli.command else {
            panic!("not proxy")
        };
        let cfg = config_from(&args).unwrap();
        assert!(cfg.origins.is_empty());
        cfg.validate().unwrap();
    }

    #[test]
    fn a_full_config_parses() {
        let cfg = parse_config(
            r#"
            listen = "127.0.0.1:9999"
            origin = "http://127.0.0.1:9000"
            admin_token = "0123456789abcdef0123"
            [cache]
            path = "/tmp/q.vol"
            size = "256 MiB"
            [limits]
            object_bytes = "4MiB"
            origin_read_timeout = "5s"
            [keys]
            drop_params = ["utm_*"]
            host_aliases = { "www.example.com" = "example.com" }
            [storage]
            stale_if_error_grace = "1h"
            heuristic_by_type = { "text/html" = "5m" }
            [encodings]
            zstd = false
            "#,
        )
        .unwrap();
        assert_eq!(cfg.cache.size.0, 256 << 20);
        assert_eq!(cfg.limits.object_bytes.0, 4 << 20);
        assert_eq!(cfg.storage.stale_if_error_grace.0.as_secs(), 3600);
        assert!(!cfg.encodings.zstd);
        cfg.validate().unwrap();
    }

    #[test]
    fn https_origin_keys_parse_and_skipping_checks_is_never_the_default() {
        let cfg = parse_config(
            "origin = \"https://origin.example:8443\"\norigin_ca_file = \"/etc/quire/origin-ca.pem\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.origin_ca_file.as_deref(),
            Some(Path::new("/etc/quire/origin-ca.pem"))
        );
        assert!(!cfg.origin_insecure_skip_verify);
        cfg.validate().unwrap();
        let cfg = parse_config("origin_insecure_skip_verify = true").unwrap();
        assert!(cfg.origin_insecure_skip_verify);
        assert!(parse_config("origin_insecure_skip_verify = \"yes\"").is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(parse_config("listen = \"127.0.0.1:1\"\nlisen = 3").is_err());
        assert!(parse_config("[cache]\nsize = \"lots\"").is_err());
        assert!(parse_config("[limits]\norigin_read_timeout = \"soon\"").is_err());
        assert!(parse_config("listen = \"not an address\"").is_err());
    }
}
