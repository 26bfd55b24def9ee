//! The `quire` binary: parses the command line ([`cli`]) and dispatches to the command:
//!
//! - `quire serve` ([`serve`]): publish a vault as a website, cached;
//! - `quire proxy` ([`proxy`]): a caching reverse proxy in front of an origin;
//! - `quire purge` ([`purge`]): purge through a running quire's admin API;
//! - `quire user` ([`user`]): manage a vault's readers;
//! - `quire config check` ([`config_cmd`]): validate a configuration file;
//! - `quire bench store`, `bench search`, `bench serve`, `bench http` and the hidden
//!   `bench load` (the load generator `bench http` starts as a process of its own):
//!   the benchmarks, which live in the `quire-bench` crate; this binary only parses
//!   their arguments and calls their `run`.
//!
//! Around `serve` and `proxy`: [`upgrade`] (socket activation, the binary upgrade on
//! `SIGUSR2`) and [`systemd`] (readiness, reload and stop notifications, watchdog).
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default `warn`), in colour only when
//! stderr is a terminal.

#![forbid(unsafe_code)]

mod cli;
mod cluster;
mod config_cmd;
mod proxy;
mod purge;
mod serve;
mod systemd;
mod upgrade;
mod user;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{BenchCommand, Cli, Command};

fn main() -> ExitCode {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // Colour codes only for a person at a terminal: a file, a pipe or journald
    // would keep them as `ESC[2m` noise.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match dispatch(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("quire: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes joined with `: `, leaving out a cause its outer message already
/// says: the library errors put their source in their own message (`preallocating
/// VOL: No space left on device`), so anyhow's `{:#}` printed it once per level.
pub(crate) fn error_chain(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Bench(BenchCommand::Store(args)) => quire_bench::store::run(args),
        Command::Bench(BenchCommand::Search(args)) => quire_bench::search::run(args),
        Command::Bench(BenchCommand::Serve(args)) => {
            quire_bench::serve::run(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Http(args)) => {
            quire_bench::http::run(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Load(args)) => {
            quire_bench::http::load::main(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Floor(args)) => {
            quire_bench::http::floor::main(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Serve(args) => serve::run(args).map(|()| ExitCode::SUCCESS),
        Command::Proxy(args) => proxy::run(args).map(|()| ExitCode::SUCCESS),
        Command::Purge(args) => purge::run(args).map(|()| ExitCode::SUCCESS),
        Command::User(cmd) => user::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Config(cmd) => config_cmd::run(cmd).map(|()| ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::other("No space left on device");
        let inner = quire_store::StoreError::Io {
            context: "preallocating v.vol".into(),
            source: io,
        };
        let e = anyhow::Error::new(inner).context("cache volume v.vol");
        let text = error_chain(&e);
        assert_eq!(
            text,
            "cache volume v.vol: preallocating v.vol: No space left on device"
        );
        // A cause the message does not say is kept.
        let e = anyhow::anyhow!("outer").context("top");
        assert_eq!(error_chain(&e), "top: outer");
    }
}
