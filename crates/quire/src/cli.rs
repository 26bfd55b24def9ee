//! The command line, as clap derive types: `quire <command> ...`: `serve`, `proxy`,
//! `purge` and `bench`, each with its own args struct.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use quire_store::bench::Scenario;

/// quire: a page cache for content sites, with a publishing server built in.
#[derive(Debug, Parser)]
#[command(name = "quire", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Publish a folder of markdown notes (a vault) as a website, cached.
    Serve(ServeArgs),
    /// Run a caching reverse proxy in front of an origin.
    Proxy(ProxyArgs),
    /// Purge cached pages through a running quire's admin API.
    Purge(PurgeArgs),
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Manage a vault's readers (VAULT/.quire/users.toml).
    #[command(subcommand)]
    User(crate::user::UserCommand),
}

/// Arguments of `quire proxy`. Flags override the config file.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// The origin, http://host[:port].
    #[arg(long, value_name = "URL")]
    pub origin: Option<String>,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// TOML configuration file (every option is documented in the README).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Cache volume file (default quire-cache/proxy.vol).
    #[arg(long, value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Cache size, e.g. 512MiB (default 1GiB).
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
}

/// Arguments of `quire serve`. Flags override the config file.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The vault: a folder of markdown notes (site settings, templates and users in
    /// its `.quire/` folder).
    #[arg(value_name = "VAULT", default_value = "examples/vault")]
    pub vault: PathBuf,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// TOML configuration file for the server and cache (the README lists every
    /// option); `origin` is ignored.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Cache volume file (default quire-cache/serve.vol).
    #[arg(long, value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Cache size, e.g. 512MiB (default 256MiB).
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Do not watch the vault for changes (pages change only on restart).
    #[arg(long)]
    pub no_watch: bool,
}

/// Arguments of `quire purge`.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// The quire server, http://host:port.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Admin token (default: $QUIRE_ADMIN_TOKEN).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "QUIRE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Mark stale instead of removing: the next request revalidates once.
    #[arg(long)]
    pub soft: bool,
    /// A URL to purge (all its variants), e.g. http://example.com/a. Repeatable.
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,
    /// A prefix: everything under its directory, e.g. http://example.com/blog/. Repeatable.
    #[arg(long = "prefix", value_name = "URL")]
    pub prefixes: Vec<String>,
    /// A surrogate key from Surrogate-Key / Cache-Tag. Repeatable.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
}

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Compare quire's memory-mapped store with the file-per-entry baseline (the tests
    /// of the published comparison it reproduces: warm reads, realistic mix with and
    /// without scans, eviction sweep, overflow, warm restart; and quire's RAM tier off vs
    /// on). Exits non-zero if any hit returned wrong bytes.
    Store(BenchStoreArgs),
    /// Full-text search latency (p50/p99/p99.9 by query kind) on a synthetic vault,
    /// idle and while a full re-index runs. Exits non-zero if a hit went to an
    /// audience that may not read it.
    Search(BenchSearchArgs),
    /// Publishing cost as a vault grows: miss and hit times of note pages on
    /// synthetic vaults of each size, served in-process over loopback.
    Serve(BenchServeArgs),
    /// Load an HTTP server from pinned cores with many real URLs and report
    /// throughput, latency percentiles and the machine's state: quire (serve or
    /// proxy, started here) or a running target, beside nginx and Varnish.
    Http(Box<BenchHttpArgs>),
    /// quire's own load generator, run by `bench http` as a separate process: prints
    /// one line `QUIRE-LOAD {json}`.
    #[command(hide = true)]
    Load(BenchLoadArgs),
}

/// Arguments of `quire bench load` (hidden: the harness runs it).
#[derive(Debug, Clone, Args)]
pub struct BenchLoadArgs {
    /// The server, host:port (or http://host:port).
    #[arg(long, value_name = "ADDR")]
    pub host: String,
    /// Paths to request, one per line, in this order (cycled).
    #[arg(long, value_name = "FILE")]
    pub paths: PathBuf,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Seconds to send requests.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub duration: f64,
    /// Open loop: this many requests per second in total, latency counted from when
    /// each was due (default: closed loop).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// The Accept-Encoding field.
    #[arg(long, default_value = "gzip, br")]
    pub accept_encoding: String,
    /// A Cookie field for every request.
    #[arg(long, value_name = "STR")]
    pub cookie: Option<String>,
    /// Seconds before an unanswered request is an error.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub timeout: f64,
}

/// Arguments of `quire bench search`.
#[derive(Debug, Clone, Args)]
pub struct BenchSearchArgs {
    /// Notes in the generated vault.
    #[arg(long, default_value_t = 10_000)]
    pub notes: usize,
    /// Seed of the generated vault and of the queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Queries per scenario.
    #[arg(long, default_value_t = 5_000)]
    pub queries: usize,
    /// Search this vault instead of generating one.
    #[arg(long, value_name = "DIR", conflicts_with = "keep")]
    pub vault: Option<PathBuf>,
    /// Generate the vault into DIR (new or empty) and leave it there.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Put the scratch vault and index under DIR (default: the system temp
    /// directory); they are removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Arguments of `quire bench http`.
#[derive(Debug, Clone, Args)]
pub struct BenchHttpArgs {
    /// A running server, http://host:port.
    #[arg(long, value_name = "URL", conflicts_with_all = ["serve", "proxy"])]
    pub target: Option<String>,
    /// Start `quire serve VAULT` (this binary) pinned to --server-cpus and measure it.
    #[arg(long, value_name = "VAULT", conflicts_with = "proxy")]
    pub serve: Option<PathBuf>,
    /// Start `quire proxy --origin ORIGIN` (this binary) pinned to --server-cpus and
    /// measure it.
    #[arg(long, value_name = "ORIGIN")]
    pub proxy: Option<String>,
    /// Also measure this peer (repeatable), started with an equivalent cache in front
    /// of the same origin (with --serve: a second quire serve of the vault), pinned to
    /// the same CPUs, in the same rounds.
    #[arg(long, value_enum)]
    pub peer: Vec<Peer>,
    /// A TOML config for the quire that --serve/--proxy starts (its flags still set
    /// listen, cache and workers).
    #[arg(long, value_name = "FILE")]
    pub quire_config: Option<PathBuf>,
    /// CPUs for the server that --serve/--proxy starts, and for the peers (a taskset
    /// list).
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// CPUs for the peers' origin that --serve starts (default: not pinned).
    #[arg(long, default_value = "")]
    pub origin_cpus: String,
    /// Also measure every request bypassing the cache (a cookie on each request: quire
    /// renders or fetches every time), interleaved, and report cached/uncached.
    #[arg(long)]
    pub uncached: bool,
    /// Paths to request, one per line (default: the server's /sitemap.xml).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Which URLs requests pick.
    #[arg(long, value_enum, default_value = "uniform")]
    pub order: crate::bench_http::urls::Order,
    /// The load generator.
    #[arg(long, value_enum, default_value = "builtin")]
    pub loadgen: Loadgen,
    /// Open loop: this many requests per second in total, latency counted from when
    /// each was due (default: closed loop; built-in generator only).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Length of each run: seconds, or with a unit (`15s`, `10m`), at least 1 s.
    #[arg(long, default_value = "10s")]
    pub duration: quire_server::config::Secs,
    /// Rounds (each runs every server once, in rotating order).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// The Accept-Encoding of every request.
    #[arg(long, default_value = "gzip")]
    pub accept_encoding: String,
    /// CPUs for the load generator (a taskset list); keep the server off them.
    #[arg(long, default_value = "1")]
    pub loadgen_cpus: String,
    /// The --target server's process id, for its CPU use.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Skip the warm-up pass (and its check that every URL is a hit).
    #[arg(long)]
    pub no_warmup: bool,
    /// Seed of the request order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw latency distributions and throughput over time to FILE.svg.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// A peer cache `quire bench http` can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// nginx `proxy_cache` (Debian's nginx).
    Nginx,
    /// Varnish (Debian's varnish).
    Varnish,
}

/// The load generator of `quire bench http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Loadgen {
    /// quire's own (`quire bench load`): epoll, no per-request scripting, open loop.
    Builtin,
    /// Debian's wrk, with a Lua script.
    Wrk,
}

/// Arguments of `quire bench serve`.
#[derive(Debug, Clone, Args)]
pub struct BenchServeArgs {
    /// Vault sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 10_000])]
    pub notes: Vec<usize>,
    /// Note pages timed per size.
    #[arg(long, default_value_t = 300)]
    pub pages: usize,
    /// Seed of the synthetic vaults.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Arguments of `quire bench store`.
#[derive(Debug, Clone, Args)]
pub struct BenchStoreArgs {
    /// Small and short: the CI smoke run (under a minute on 2 cores).
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Put the scratch volumes and directories under DIR (default: the system temp
    /// directory); they are removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Run only this scenario.
    #[arg(long, value_name = "SCENARIO", value_enum)]
    pub only: Option<ScenarioArg>,
    /// Seed of the op streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `--only` values: the scenarios' keys in the JSON report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScenarioArg {
    /// Warm reads across object sizes and thread counts.
    #[value(name = "warm_reads", alias = "warm-reads", alias = "warm")]
    WarmReads,
    /// Zipf mix of gets (cache-aside), puts and deletes, working set 2x the cap.
    #[value(name = "mixed")]
    Mixed,
    /// The mix with 10 % one-hit scan gets.
    #[value(name = "mixed_scan", alias = "mixed-scan")]
    MixedScan,
    /// Stream new objects into a small cache, one thread.
    #[value(name = "eviction")]
    Eviction,
    /// Write ten times a 16 MiB cap and watch the disk.
    #[value(name = "overflow")]
    Overflow,
    /// Hit ratio before and after close + reopen (quire only).
    #[value(name = "restart")]
    Restart,
    /// Warm reads with quire's RAM tier off vs on (quire only).
    #[value(name = "ram_tier", alias = "ram-tier")]
    RamTier,
}

impl From<ScenarioArg> for Scenario {
    fn from(s: ScenarioArg) -> Scenario {
        match s {
            ScenarioArg::WarmReads => Scenario::WarmReads,
            ScenarioArg::Mixed => Scenario::Mixed,
            ScenarioArg::MixedScan => Scenario::MixedScan,
            ScenarioArg::Eviction => Scenario::Eviction,
            ScenarioArg::Overflow => Scenario::Overflow,
            ScenarioArg::Restart => Scenario::Restart,
            ScenarioArg::RamTier => Scenario::RamTier,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_store_parses() {
        let cli = Cli::try_parse_from([
            "quire",
            "bench",
            "store",
            "--quick",
            "--json",
            "out.json",
            "--only",
            "mixed-scan",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Store(args)) = cli.command else {
            panic!("not bench store")
        };
        assert!(args.quick);
        assert_eq!(args.json, Some(PathBuf::from("out.json")));
        assert_eq!(args.only.map(Scenario::from), Some(Scenario::MixedScan));
        assert_eq!(args.dir, None);
        assert_eq!(args.seed, 1);
    }

    #[test]
    fn every_scenario_name_is_accepted_and_others_are_not() {
        for s in Scenario::ALL {
            let cli = Cli::try_parse_from(["quire", "bench", "store", "--only", s.name()])
                .expect("parses");
            let Command::Bench(BenchCommand::Store(args)) = cli.command else {
                panic!("not bench store")
            };
            assert_eq!(args.only.map(Scenario::from), Some(s));
        }
        let cli =
            Cli::try_parse_from(["quire", "bench", "store", "--only", "ram-tier"]).expect("parses");
        let Command::Bench(BenchCommand::Store(args)) = cli.command else {
            panic!("not bench store")
        };
        assert_eq!(args.only.map(Scenario::from), Some(Scenario::RamTier));
        assert!(Cli::try_parse_from(["quire", "bench", "store", "--only", "nope"]).is_err());
        assert!(Cli::try_parse_from(["quire", "bench"]).is_err());
    }

    #[test]
    fn bench_search_parses() {
        let cli =
            Cli::try_parse_from(["quire", "bench", "search", "--notes", "500", "--keep", "v"])
                .expect("parses");
        let Command::Bench(BenchCommand::Search(args)) = cli.command else {
            panic!("not bench search")
        };
        assert_eq!((args.notes, args.seed, args.queries), (500, 1, 5_000));
        assert_eq!(args.keep, Some(PathBuf::from("v")));
        assert!(
            Cli::try_parse_from(["quire", "bench", "search", "--vault", "a", "--keep", "b"])
                .is_err()
        );
    }

    #[test]
    fn proxy_and_purge_parse() {
        let cli = Cli::try_parse_from([
            "quire",
            "proxy",
            "--origin",
            "http://127.0.0.1:9000",
            "--listen",
            "127.0.0.1:0",
            "--cache-size",
            "64MiB",
        ])
        .expect("parses");
        let Command::Proxy(a) = cli.command else {
            panic!("not proxy")
        };
        assert_eq!(a.origin.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(a.cache_size.as_deref(), Some("64MiB"));
        let cli = Cli::try_parse_from([
            "quire",
            "purge",
            "--url",
            "http://h/a",
            "--url",
            "http://h/b",
            "--tag",
            "t",
            "--soft",
        ])
        .expect("parses");
        let Command::Purge(p) = cli.command else {
            panic!("not purge")
        };
        assert_eq!(p.urls.len(), 2);
        assert!(p.soft);
        assert!(Cli::try_parse_from(["quire", "proxy", "--listen", "nope"]).is_err());
    }

    #[test]
    fn bench_http_takes_durations_with_units_and_repeated_peers() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["quire", "bench", "http", "--serve", "v"];
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Bench(BenchCommand::Http(a))) => Ok(a),
                Ok(_) => panic!("not bench http"),
                Err(e) => Err(e),
            }
        };
        let a = parse(&["--duration", "10m", "--peer", "nginx", "--peer", "varnish"]).unwrap();
        assert_eq!(a.duration.0, std::time::Duration::from_secs(600));
        assert_eq!(a.peer, [Peer::Nginx, Peer::Varnish]);
        assert_eq!(parse(&[]).unwrap().duration.0.as_secs(), 10);
        assert!(parse(&["--duration", "ten"]).is_err());
        assert!(parse(&["--peer", "squid"]).is_err());
        assert!(
            parse(&["--target", "http://h:1"]).is_err(),
            "--serve or --target"
        );
    }

    #[test]
    fn bench_load_parses_and_is_hidden() {
        let cli = Cli::try_parse_from([
            "quire",
            "bench",
            "load",
            "--host",
            "127.0.0.1:8090",
            "--paths",
            "p.txt",
            "--rate",
            "5000",
            "--cookie",
            "a=b",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Load(a)) = cli.command else {
            panic!("not bench load")
        };
        assert_eq!(
            (a.connections, a.duration, a.rate),
            (32, 10.0, Some(5000.0))
        );
        assert_eq!(a.accept_encoding, "gzip, br");
        assert_eq!(a.cookie.as_deref(), Some("a=b"));
        let help = Cli::command()
            .find_subcommand_mut("bench")
            .expect("bench")
            .render_help()
            .to_string();
        let listed = |name: &str| help.lines().any(|l| l.trim_start().starts_with(name));
        assert!(listed("http") && !listed("load"), "{help}");
    }
}
