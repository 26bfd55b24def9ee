//! The signals a running server answers, for `quire proxy` and `quire serve`:
//! SIGHUP reloads the configuration and the certificates, SIGUSR1 reopens the access
//! log, and SIGTERM or SIGINT starts the drain ([`shutdown_signal`]).

use quire_server::{Config, Ctx};

use crate::errors::error_chain;

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
            one_line(&error_chain(&e))
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
