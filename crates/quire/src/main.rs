//! The `quire` binary: parses the command line ([`cli`]) and dispatches to the command:
//! `quire serve` ([`serve`]), `quire proxy` ([`proxy`]), `quire purge` ([`purge`]),
//! `quire bench store` ([`bench_store`]), `quire bench search` ([`bench_search`]).
//! Logs go to stderr, filtered by `RUST_LOG` (default `warn`).

mod bench_http;
mod bench_search;
mod bench_serve;
mod bench_store;
mod cli;
mod proxy;
mod purge;
mod serve;
mod user;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{BenchCommand, Cli, Command};

fn main() -> ExitCode {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
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
fn error_chain(e: &anyhow::Error) -> String {
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
        Command::Bench(BenchCommand::Store(args)) => bench_store::run(args),
        Command::Bench(BenchCommand::Http(args)) => {
            bench_http::run(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Load(args)) => {
            bench_http::load::main(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Serve(args)) => {
            bench_serve::run(args).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Search(args)) => bench_search::run(args),
        Command::Serve(args) => serve::run(args).map(|()| ExitCode::SUCCESS),
        Command::Proxy(args) => proxy::run(args).map(|()| ExitCode::SUCCESS),
        Command::Purge(args) => purge::run(args).map(|()| ExitCode::SUCCESS),
        Command::User(cmd) => user::run(cmd).map(|()| ExitCode::SUCCESS),
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
