//! The command line, as clap derive types: `quire <command> ...`: `serve`, `proxy`,
//! `purge`, `bench`, `user` and `config`, each with its own args struct; the flags
//! `serve` and `proxy` share are one struct, [`ServerArgs`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use quire_bench::http::floor::BenchFloorArgs;
use quire_bench::http::load::BenchLoadArgs;
use quire_bench::http::BenchHttpArgs;
use quire_bench::search::BenchSearchArgs;
use quire_bench::serve::BenchServeArgs;
use quire_bench::store::BenchStoreArgs;

/// quire: a page cache for content sites, with a publishing server built in.
#[derive(Debug, Parser)]
#[command(name = "quire", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Format of the log on standard error: `text` (colour only on a terminal) or
    /// `json` (one object a line, for log shippers)
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "QUIRE_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// How log events are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines; colour codes only when standard error is a terminal.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields`.
    Json,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Publish a folder of markdown notes (a vault) as a website, cached.
    Serve(ServeArgs),
    /// Run a caching reverse proxy in front of an origin.
    Proxy(ProxyArgs),
    /// Purge cached pages through a running quire's admin API.
    Purge(PurgeArgs),
    /// Watch a running quire live: requests, hit ratio, latency, fills (admin API).
    Top(TopArgs),
    /// Fetch every URL of a sitemap or a list through a running quire, at a bounded
    /// rate, so they are cached before readers ask for them.
    Warm(WarmArgs),
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Manage a vault's readers (VAULT/.quire/users.toml).
    #[command(subcommand)]
    User(crate::user::UserCommand),
    /// Check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Ask a running quire whether it is up (`/_quire/health`); exit 0 when it is.
    Health(crate::health::HealthArgs),
}

/// Arguments of `quire proxy`. Flags override the config file.
#[derive(Debug, Clone, Args)]
pub(crate) struct ProxyArgs {
    /// The origin, http://host[:port] or https://host[:port] (certificates checked
    /// against the system's CAs and `origin_ca_file` in the config file).
    #[arg(long, value_name = "URL")]
    pub origin: Option<String>,
    /// The flags `quire serve` has too.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Arguments of `quire serve`. Flags override the config file.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// The vault: a folder of markdown notes (site settings, templates and users in
    /// its `.quire/` folder).
    #[arg(value_name = "VAULT", default_value = "examples/vault")]
    pub vault: PathBuf,
    /// The flags `quire proxy` has too.
    #[command(flatten)]
    pub server: ServerArgs,
    /// Do not watch the vault for changes (pages change only on restart).
    #[arg(long)]
    pub no_watch: bool,
}

/// The flags of `quire serve` and `quire proxy`: the server, its cache, HTTPS and
/// the access log. Each one overrides the config file.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ServerArgs {
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// TOML configuration file for the server and cache (every option is documented
    /// in the README; `quire serve` ignores `origin`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Cache volume file (default quire-cache/proxy.vol, or quire-cache/serve.vol
    /// for `quire serve`).
    #[arg(long, value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Cache size, e.g. 512MiB (default 1GiB, or 256MiB for `quire serve`).
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// HTTPS.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The access log.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The HTTPS flags of `quire serve` and `quire proxy` (the `[tls]` section and
/// `listen_http` of the config file).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct TlsArgs {
    /// Certificate chain, PEM (the site's certificate first): with --tls-key,
    /// --listen serves HTTPS (HTTP/2 and HTTP/1.1).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key, PEM.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With TLS on, also serve plain HTTP here, redirecting every request to HTTPS
    /// (and answering ACME HTTP-01 challenges).
    #[arg(long, value_name = "ADDR")]
    pub listen_http: Option<std::net::SocketAddr>,
    /// Obtain and renew the certificate for NAME with ACME (Let's Encrypt unless
    /// `[tls.acme] directory` says otherwise). Repeatable.
    #[arg(long = "acme-domain", value_name = "NAME", conflicts_with = "tls_cert")]
    pub acme_domains: Vec<String>,
}

/// The access-log flags of `quire serve` and `quire proxy` (the `[log]` section of
/// the config file).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct LogArgs {
    /// Write an access log to FILE (appended; reopened on SIGUSR1), or `-` for
    /// standard output.
    #[arg(long, value_name = "FILE|-")]
    pub access_log: Option<PathBuf>,
    /// The access log's format: `combined` (nginx's, plus the cache outcome) or
    /// `json` (one object a line).
    #[arg(long, value_name = "FORMAT", value_parser = ["combined", "json"])]
    pub access_log_format: Option<String>,
}

/// `quire config ...`
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate a configuration file and print the effective configuration.
    Check {
        /// The TOML configuration file.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// Where a running quire's admin API is, and its token: `quire purge` and
/// `quire top`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AdminArgs {
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
}

impl AdminArgs {
    /// The token, or why there is none.
    pub(crate) fn token(&self) -> anyhow::Result<&str> {
        self.token
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("no admin token: give --token or set QUIRE_ADMIN_TOKEN"))
    }

    /// `host:port` of `--server`, which must be `http://host:port`.
    pub(crate) fn authority(&self) -> anyhow::Result<&str> {
        authority_of(&self.server)
    }
}

/// `host:port` of a `--server` value, which must be `http://host:port` (the admin
/// commands and `quire health` run beside the server, over plain HTTP).
pub(crate) fn authority_of(server: &str) -> anyhow::Result<&str> {
    server
        .strip_prefix("http://")
        .map(|a| a.trim_end_matches('/'))
        .ok_or_else(|| anyhow::anyhow!("--server must be http://host:port"))
}

/// Arguments of `quire top`.
#[derive(Debug, Clone, Args)]
pub(crate) struct TopArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Seconds between frames (0.2 to 60).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print one plain-text frame (two scrapes an interval apart) and exit.
    #[arg(long)]
    pub once: bool,
}

/// Arguments of `quire purge`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Mark stale instead of removing: the next request revalidates once.
    #[arg(long)]
    pub soft: bool,
    /// In a cluster, answer only once every live node has applied the purge (at
    /// most 5 s; the answer lists each node).
    #[arg(long)]
    pub wait_all: bool,
    /// Fetch the purged URLs that readers hit lately again at once, in the background
    /// (hard purges only; the server's default is storage.refill_after_purge).
    #[arg(long, conflicts_with = "soft")]
    pub refill: bool,
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

/// Arguments of `quire warm`.
#[derive(Debug, Args)]
pub(crate) struct WarmArgs {
    /// The quire to warm, http://host:port or https://host:port: every request goes
    /// there, with the URL's host in `Host` (and, over TLS, as the server name whose
    /// certificate is checked).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// PEM certificates trusted besides the system's, for an https:// --server.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// A sitemap (or sitemap index) URL, e.g. http://example.com/sitemap.xml, fetched
    /// through the server.
    #[arg(long, value_name = "URL")]
    pub sitemap: Option<String>,
    /// A file of absolute URLs, one a line (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Requests started a second, at most.
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    pub rate: f64,
    /// Requests in flight at once, at most (1-256).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub concurrency: usize,
    /// URLs warmed at most.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max: usize,
}

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
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
    /// Bytes per page of brotli against a dictionary (dcb) beside zstd's (dcz) and
    /// brotli alone, on a folder of pages.
    Dict(quire_bench::dict_codings::BenchDictArgs),
    /// Load an HTTP server from pinned cores with many real URLs and report
    /// throughput, latency percentiles and the machine's state: quire (serve or
    /// proxy, started here) or a running target, beside nginx and Varnish.
    Http(Box<BenchHttpArgs>),
    /// quire's own load generator, run by `bench http` as a separate process: prints
    /// one line `QUIRE-LOAD {json}`.
    #[command(hide = true)]
    Load(BenchLoadArgs),
    /// The machine's floor, run by `bench http --peer floor` as a separate process:
    /// one write of a prebuilt response per request, nothing parsed.
    #[command(hide = true)]
    Floor(BenchFloorArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use quire_bench::http::Peer;
    use quire_bench::store::Scenario;

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
        assert_eq!(a.server.cache_size.as_deref(), Some("64MiB"));
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
            "--wait-all",
        ])
        .expect("parses");
        let Command::Purge(p) = cli.command else {
            panic!("not purge")
        };
        assert_eq!(p.urls.len(), 2);
        assert!(p.soft);
        assert!(p.wait_all);
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
        assert!(parse(&["--signed-in"]).unwrap().signed_in);
        assert!(!parse(&[]).unwrap().signed_in);
        assert!(parse(&["--signed-in", "--uncached"]).is_err());
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
        assert!(!listed("floor"), "{help}");
    }

    #[test]
    fn bench_floor_and_the_floor_peer_parse() {
        let cli = Cli::try_parse_from([
            "quire",
            "bench",
            "floor",
            "--listen",
            "127.0.0.1:0",
            "--bytes",
            "14000",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Floor(a)) = cli.command else {
            panic!("not bench floor")
        };
        assert_eq!((a.listen.as_str(), a.bytes), ("127.0.0.1:0", 14_000));
        let cli = Cli::try_parse_from(["quire", "bench", "http", "--proxy", "http://o:1"])
            .expect("parses");
        assert!(matches!(cli.command, Command::Bench(BenchCommand::Http(_))));
        let cli = Cli::try_parse_from([
            "quire",
            "bench",
            "http",
            "--proxy",
            "http://o:1",
            "--peer",
            "floor",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Http(a)) = cli.command else {
            panic!("not bench http")
        };
        assert_eq!(a.peer, [Peer::Floor]);
    }
}
