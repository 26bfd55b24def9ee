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
            eprintln!("quire: {e:#}");
            ExitCode::FAILURE
        }
    }
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
