//! `quire proxy`: loads the configuration (file, then flags), starts the runtime and
//! the server (on sockets handed over when there are: [`crate::upgrade`]), and drains
//! on SIGTERM or SIGINT, or once a binary upgrade has taken over.

use std::sync::Arc;

use anyhow::Context;
use quire_server::{Config, Ctx};

use crate::cli::ProxyArgs;
use crate::settings;
use crate::signals::{reload_on_sighup, reopen_log_on_sigusr1};
use crate::upgrade::{self, Start};

/// The configuration `args` describe: the file if given, then each flag over it.
pub(crate) fn config_from(args: &ProxyArgs) -> anyhow::Result<Config> {
    let mut cfg = match &args.server.config {
        Some(p) => settings::load_config(p)?,
        None => Config::default(),
    };
    if let Some(o) = &args.origin {
        // The flag names the one origin: it replaces the file's `[[origins]]` too.
        cfg.origin = Some(o.clone());
        cfg.origins.clear();
    }
    settings::apply(&mut cfg, &args.server)?;
    Ok(cfg)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::settings::parse_config;

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
