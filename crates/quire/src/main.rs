//! The `quire` binary: parses the command line ([`cli`]) and dispatches to the command:
//!
//! - `quire serve` ([`serve`]): publish a vault as a website, cached;
//! - `quire proxy` ([`proxy`]): a caching reverse proxy in front of an origin;
//! - `quire purge` ([`purge`]): purge through a running quire's admin API;
//! - `quire top` ([`top`]): a live view of a running quire, from its admin API;
//! - `quire warm` ([`warm`]): fetch a sitemap's or a list's URLs through a running
//!   quire, so they are cached before readers ask;
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
//! stderr is a terminal, or as JSON lines with `--log-format json`.

#![forbid(unsafe_code)]

mod cli;
mod cluster;
mod config_cmd;
mod errors;
mod health;
mod proxy;
mod purge;
mod serve;
mod settings;
mod signals;
mod systemd;
mod top;
mod upgrade;
mod user;
mod warm;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{BenchCommand, Cli, Command, LogFormat};
use crate::errors::error_chain;

/// mimalloc rather than glibc's allocator: HTTP/2 and hyper allocate per stream and
/// per frame, and glibc's `malloc`/`free` took about 8 % of an HTTP/2 hit's time
/// (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_log(cli.log_format);
    match dispatch(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("quire: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Log events to standard error, filtered by `RUST_LOG` (default `warn`).
fn init_log(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => log.json().init(),
        // Colour codes only for a person at a terminal: a file, a pipe or journald
        // would keep them as `ESC[2m` noise.
        LogFormat::Text => log
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}

fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Bench(BenchCommand::Store(args)) => quire_bench::store::run(args),
        Command::Bench(BenchCommand::Search(args)) => quire_bench::search::run(args),
        Command::Bench(BenchCommand::Dict(args)) => {
            quire_bench::dict_codings::run(args).map(|()| ExitCode::SUCCESS)
        }
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
        Command::Top(args) => top::run(args).map(|()| ExitCode::SUCCESS),
        Command::Warm(args) => warm::run(args).map(|ok| {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
        Command::User(cmd) => user::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Config(cmd) => config_cmd::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Health(args) => health::run(args).map(|()| ExitCode::SUCCESS),
    }
}
