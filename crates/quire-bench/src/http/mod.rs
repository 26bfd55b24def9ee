//! `quire bench http`: measures an HTTP server the way earlier measurements of the note
//! server quire grew from learned to, after a generator on the server's cores, a cold
//! cache and a development build had each understated it about 2x — a load generator in a process of its own on cores of its own, many real URLs in
//! a realistic order, a verified warm cache, repeated and interleaved runs, tail
//! latency, and the machine's own state reported beside the figures.
//!
//! What it measures ([`run`]):
//! - `--target URL`: a server already running;
//! - `--serve VAULT` / `--proxy ORIGIN`: a `quire serve` / `quire proxy` it starts
//!   itself (`servers`), release build, one worker, pinned to `--server-cpus`;
//! - `--uncached`: the same server with a cookie on every request (quire then renders
//!   or fetches each time), for the cached/uncached ratio;
//! - `--signed-in` (with `--serve`): the load as a signed-in reader gets the site
//!   ([`signin`]): quire serves a copy of the vault given a reader of the
//!   benchmark's own, the harness signs in through `POST /login` and every request
//!   of the load carries the session cookie; the report says so, with the
//!   `Cache-Status` a signed-in request got before the rounds (today `fwd=bypass`:
//!   the figure is the render's);
//! - `--peer nginx|varnish`: the peer with an equivalent cache configuration in front
//!   of the same origin, pinned to the same CPUs, measured in the same run (in serve
//!   mode their origin is a second `quire serve` of the vault, idle once they are
//!   warm);
//! - `--peer floor`: the machine's floor ([`floor`]): one thread, epoll, one write of
//!   a prebuilt response of the mean size of the first server's answers per request,
//!   nothing parsed, pinned like the peers. Every server's CPU per request is then
//!   also reported as a multiple of the floor's (`x floor`). `--peer floor-tokio`
//!   adds the same floor on a current-thread tokio runtime: the runtime's own share.
//!   `--peer floor-corpus` answers from as many distinct responses as there are URLs:
//!   the share of the working set's size.
//!
//! How (`measure`): URLs from the sitemap or `--urls`, in uniform, Zipf or hot
//! order (`urls`); every server warmed and checked to answer every URL as a hit
//! (`warm`); then `--reps` rounds, each running every server in turn (the order
//! rotates each round, so none always runs first), with the load from the built-in
//! generator ([`load`], closed loop, or open loop at `--rate`) or `wrk`, pinned to
//! `--loadgen-cpus`; server, generator and other CPU and steal from `/proc`
//! (`procstat`), with warnings when the machine was not quiet or the generator
//! saturated its core. Output: a table, `--json FILE` (`runs`, `ratios`), and
//! `--plot FILE.svg` (`plot`).
//!
//! Over TLS (`--tls`, `tls`): a test CA and certificate made for the run, quire and
//! nginx serving HTTPS with it, each server measured as several subjects in the same
//! rounds: HTTP/1.1 over TLS and, with `--http2`, HTTP/2 (both from `h2load`), and
//! new connections, a full handshake per request (`load`'s handshake client). The
//! warm-up's client speaks HTTPS and checks the certificate against the CA.

pub mod floor;
mod h2load;
pub mod load;
mod plot;
mod procstat;
mod servers;
mod settle;
mod signin;
mod summary;
mod tls;
mod urls;
mod warm;
mod wrk;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};

use load::LoadResult;
use servers::Server;
use summary::Run;
use tls::{Protocol, TestPki};
pub use urls::Order;

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
    /// With --serve: every request as a signed-in reader. quire serves a copy of
    /// VAULT (VAULT is not written) with a reader `bench-reader` added (a random
    /// password) and a session secret of its own; the harness signs in through POST
    /// /login as a browser would, checks a page names the reader, and every request of
    /// the load (built-in generator, wrk, or h2load with --tls) carries the session
    /// cookie. The report says the run was signed in and shows the Cache-Status a
    /// signed-in request got. Not with --uncached or --peer.
    // `requires` alone lets `--proxy` through (clap counts a requirement that
    // conflicts with a given argument as met), hence the conflicts too.
    #[arg(long, requires = "serve", conflicts_with_all = ["uncached", "peer", "proxy", "target"])]
    pub signed_in: bool,
    /// Paths to request, one per line (default: the server's /sitemap.xml).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Which URLs requests pick.
    #[arg(long, value_enum, default_value = "uniform")]
    pub order: Order,
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
    /// The built-in generator never sleeps: it spins its core waiting for answers,
    /// so no server pays for waking it (a remote client's machine would pay that,
    /// not the server; on loopback a server slower than the generator finds it
    /// asleep and wakes it for every few answers). Built-in generator, cleartext.
    #[arg(long, conflicts_with = "tls")]
    pub spin: bool,
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
    /// Skip the warm-up pass (and its check that every URL is a hit), and the
    /// priming run of the generator after it.
    #[arg(long)]
    pub no_warmup: bool,
    /// Start the rounds right after the warm-up, without waiting for each started
    /// server to go quiet (quire compresses the pages it just stored in the
    /// background; see `settle`).
    #[arg(long)]
    pub no_settle: bool,
    /// Seed of the request order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw latency distributions and throughput over time to FILE.svg.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Serve and measure HTTPS: a test CA and an ECDSA P-256 certificate made for the
    /// run, quire started with --tls-cert/--tls-key and nginx with the same
    /// certificate; HTTP/1.1 over TLS from h2load (Debian's nghttp2-client), and new
    /// connections (a full handshake for every request). Not with Varnish (no TLS).
    #[arg(long, conflicts_with_all = ["target", "rate"])]
    pub tls: bool,
    /// With --tls: also measure HTTP/2 (h2load, --streams per connection).
    #[arg(long, requires = "tls")]
    pub http2: bool,
    /// HTTP/2 streams in flight per connection (--http2).
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
}

/// A peer cache `quire bench http` can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    /// nginx `proxy_cache` (Debian's nginx).
    Nginx,
    /// Varnish (Debian's varnish).
    Varnish,
    /// The machine's floor: a minimal epoll server writing one prebuilt response of
    /// the corpus's mean size per request (cleartext only).
    Floor,
    /// The floor served from a current-thread tokio runtime, a task per connection:
    /// what the runtime adds before any of quire's own work (cleartext only).
    FloorTokio,
    /// The floor answering from as many distinct responses as the corpus has URLs
    /// (chosen by the request head's hash), so it copies from as much memory as a
    /// cache of the corpus does (cleartext only).
    FloorCorpus,
}

impl Peer {
    /// Whether this peer is one of the floors (started after the warm-up).
    fn is_floor(self) -> bool {
        matches!(self, Peer::Floor | Peer::FloorTokio | Peer::FloorCorpus)
    }
}

/// The load generator of `quire bench http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Loadgen {
    /// quire's own (`quire bench load`): epoll, no per-request scripting, open loop.
    Builtin,
    /// Debian's wrk, with a Lua script.
    Wrk,
}

/// The cookie of `--uncached` runs: any cookie makes quire bypass its cache.
const BYPASS_COOKIE: &str = "quire_bench=1";

/// The subject name of a `--signed-in` run's quire.
const SIGNED_IN: &str = "signed-in";

/// One thing measured: a server, whether its requests bypass the cache, and (over
/// TLS) how it is spoken to.
#[derive(Debug)]
struct Subject {
    /// The name in tables and JSON: `quire`, `uncached`, `nginx`, `varnish`; over
    /// TLS with the protocol's label (`quire/tls-h2`).
    name: String,
    /// `host:port`.
    host: String,
    /// Index into the started servers, for CPU accounting (`None`: `--target`).
    server: Option<usize>,
    /// A `Cookie` field for every request.
    cookie: Option<String>,
    /// Whether `cookie` is a signed-in reader's session (`--signed-in`); else it only
    /// makes quire bypass its cache.
    signed_in: bool,
    /// Over TLS: what is measured; `None`: cleartext HTTP/1.1.
    protocol: Option<Protocol>,
}

/// Each subject once per protocol measured over TLS (`quire` becomes
/// `quire/tls-h1`, `quire/tls-h2`, `quire/handshake`); new connections are measured
/// for the cached and the signed-in subjects, not for `--uncached`.
fn over_tls(subjects: Vec<Subject>, http2: bool) -> Vec<Subject> {
    let mut protocols = vec![Protocol::Https1];
    if http2 {
        protocols.push(Protocol::H2);
    }
    let mut out = Vec::new();
    for s in subjects {
        let handshake = (s.cookie.is_none() || s.signed_in).then_some(Protocol::Handshake);
        for p in protocols.iter().copied().chain(handshake) {
            out.push(Subject {
                name: format!("{}/{}", s.name, p.label()),
                host: s.host.clone(),
                server: s.server,
                cookie: s.cookie.clone(),
                signed_in: s.signed_in,
                protocol: Some(p),
            });
        }
    }
    out
}

/// What `--tls` needs before anything starts: no Varnish, no other generator, h2load
/// installed; then the run's certificate.
fn tls_setup(args: &BenchHttpArgs) -> anyhow::Result<Option<TestPki>> {
    if !args.tls {
        return Ok(None);
    }
    anyhow::ensure!(
        !args.peer.contains(&Peer::Varnish),
        "--tls: Varnish has no TLS (it needs a separate TLS proxy in front): drop --peer varnish"
    );
    anyhow::ensure!(
        !args.peer.iter().any(|p| p.is_floor()),
        "--tls: the floors speak cleartext HTTP/1.1 only: drop --peer floor and floor-tokio"
    );
    anyhow::ensure!(
        args.loadgen == Loadgen::Builtin,
        "--tls: the load over TLS comes from h2load; --loadgen applies to cleartext runs"
    );
    anyhow::ensure!(
        std::process::Command::new("h2load")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "--tls: h2load not found (apt-get install nghttp2-client)"
    );
    Ok(Some(TestPki::make(servers::scratch()?)?))
}

/// Runs the benchmark.
pub fn run(args: &BenchHttpArgs) -> anyhow::Result<()> {
    let duration = args.duration.0;
    anyhow::ensure!(
        duration >= Duration::from_secs(1),
        "--duration: a run lasts at least a second"
    );
    anyhow::ensure!(
        !args.signed_in || args.serve.is_some(),
        "--signed-in needs --serve VAULT (the harness adds its reader to a copy of the vault)"
    );
    if args.rate.is_some() && args.loadgen == Loadgen::Wrk {
        anyhow::bail!("--rate needs the built-in generator (wrk has no fixed-rate mode)");
    }
    if args.spin && args.loadgen == Loadgen::Wrk {
        anyhow::bail!("--spin needs the built-in generator (wrk sleeps in its waits)");
    }
    let pki = tls_setup(args)?;
    let mut started: Vec<Server> = Vec::new();
    let mut subjects = Vec::new();
    let (quire, session) = start_quire(args, pki.as_ref())?;
    let name = if args.target.is_some() {
        "target"
    } else if args.signed_in {
        SIGNED_IN
    } else {
        "quire"
    };
    let host = match (&quire, &args.target) {
        (Some(q), _) => q.host.clone(),
        (None, Some(t)) => urls::split_url(t)?.0,
        (None, None) => unreachable!("start_quire checked"),
    };
    let quire_index = quire.map(|q| {
        started.push(q);
        started.len() - 1
    });
    subjects.push(Subject {
        name: name.into(),
        host: host.clone(),
        server: quire_index,
        signed_in: session.is_some(),
        cookie: session,
        protocol: None,
    });
    if args.uncached {
        subjects.push(Subject {
            name: "uncached".into(),
            host: host.clone(),
            server: quire_index,
            cookie: Some(BYPASS_COOKIE.into()),
            signed_in: false,
            protocol: None,
        });
    }
    if args.peer.iter().any(|p| !p.is_floor()) {
        start_peers(args, &mut started, &mut subjects, pki.as_ref())?;
    }
    if args.tls {
        subjects = over_tls(subjects, args.http2);
    }
    let server_pid = if args.target.is_some() {
        args.server_pid
    } else {
        None
    };
    // The servers stop when `started` is dropped (SIGTERM, then SIGKILL).
    Bench {
        args,
        duration,
        subjects,
        started,
        target_pid: server_pid,
        client: servers::client(pki.as_ref()),
        pki: pki.as_ref(),
        floor_bytes: None,
        signed_in: None,
    }
    .measure()
}

/// The quire that `--serve` or `--proxy` asks for, started (over TLS with `pki`);
/// `None` with `--target`. With `--signed-in`, on a copy of the vault given a reader
/// of the benchmark's own, signed in: with that reader's session cookie
/// (`NAME=VALUE`).
fn start_quire(
    args: &BenchHttpArgs,
    pki: Option<&TestPki>,
) -> anyhow::Result<(Option<Server>, Option<String>)> {
    if let (true, Some(vault)) = (args.signed_in, &args.serve) {
        let (server, password) =
            servers::quire_signed_in(vault, args.quire_config.as_deref(), &args.server_cpus, pki)?;
        let cookie = signin::sign_in(&servers::client(pki), &server.host, &password)?;
        eprintln!(
            "bench http: signed in as {} (a reader of the vault's copy): every request carries its session cookie",
            signin::READER
        );
        return Ok((Some(server), Some(cookie)));
    }
    let server = match (&args.serve, &args.proxy, &args.target) {
        (Some(vault), _, _) => Some(servers::quire(
            Some(vault),
            None,
            args.quire_config.as_deref(),
            &args.server_cpus,
            pki,
        )?),
        (None, Some(origin), _) => {
            let (o, _) = urls::split_url(origin)?;
            Some(servers::quire(
                None,
                Some(&format!("http://{o}")),
                args.quire_config.as_deref(),
                &args.server_cpus,
                pki,
            )?)
        }
        (None, None, Some(_)) => None,
        (None, None, None) => anyhow::bail!("give --target URL, --serve VAULT or --proxy ORIGIN"),
    };
    Ok((server, None))
}

/// Starts the `--peer` caches in front of the origin (with `--serve`, a second quire
/// serve of the vault, started here too; always cleartext) and adds them to
/// `started` and `subjects`; they serve HTTPS with `pki`.
fn start_peers(
    args: &BenchHttpArgs,
    started: &mut Vec<Server>,
    subjects: &mut Vec<Subject>,
    pki: Option<&TestPki>,
) -> anyhow::Result<()> {
    let origin = match (&args.serve, &args.proxy) {
        (Some(vault), _) => {
            // The peers' origin: a second quire serve of the same vault, not
            // pinned (it is idle once the peers are warm).
            let o = servers::quire_origin(vault, &args.origin_cpus)?;
            let host = o.host.clone();
            started.push(o);
            host
        }
        (None, Some(origin)) => urls::split_url(origin)?.0,
        (None, None) => anyhow::bail!("--peer needs --serve VAULT or --proxy ORIGIN"),
    };
    for peer in &args.peer {
        let s = match peer {
            Peer::Nginx => servers::nginx(&origin, &args.server_cpus, pki)?,
            Peer::Varnish => servers::varnish(&origin, &args.server_cpus)?,
            // Started after the warm-up, at the size of the answers it saw.
            Peer::Floor | Peer::FloorTokio | Peer::FloorCorpus => continue,
        };
        subjects.push(Subject {
            name: s.kind.name().into(),
            host: s.host.clone(),
            server: Some(started.len()),
            cookie: None,
            signed_in: false,
            protocol: None,
        });
        started.push(s);
    }
    Ok(())
}

/// The paths to request: from `--urls`, else the server's sitemap (through `client`).
fn paths(args: &BenchHttpArgs, client: &urls::Client, host: &str) -> anyhow::Result<Vec<String>> {
    let paths: Vec<String> = match &args.urls {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("reading {}", f.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
            .map(str::to_owned)
            .collect(),
        None => {
            let url = format!("{}://{host}/sitemap.xml", client.scheme());
            let (status, _, body) = client
                .get(host, "/sitemap.xml", "identity")
                .with_context(|| format!("fetching {url} (or give --urls FILE)"))?;
            anyhow::ensure!(status == 200, "{url} answered {status}: give --urls FILE");
            urls::sitemap_paths(&String::from_utf8_lossy(&body))
        }
    };
    anyhow::ensure!(!paths.is_empty(), "no URLs to request");
    Ok(paths)
}

/// How long [`Bench::prime`] runs the generator against each subject. Without
/// it quire's first round was the one where the hit loop first saw the generator's
/// request heads: on the 2,000-page corpus at 80,000 requests/s, its core was busy
/// for the first 55–60 ms of that round (66 % after), about 15 ms of extra work for
/// 2,000 heads each answered once by the parsed path, and the backlog left a p99 of
/// 13–38 ms in that round against 2–4 ms in the others. Two seconds asks for every
/// page of such a corpus dozens of times over (a shorter round primes for its own
/// length).
const PRIME: Duration = Duration::from_secs(2);

/// One load run against subject `s`: from the cleartext generator `--loadgen`
/// chose, or over TLS from h2load or the handshake client.
fn load_run(
    args: &BenchHttpArgs,
    duration: Duration,
    s: &Subject,
    files: &RequestFiles,
) -> anyhow::Result<(LoadResult, u64)> {
    let builtin = |handshakes| load::Spec {
        host: &s.host,
        paths: &files.list,
        connections: args.connections,
        duration,
        rate: args.rate,
        accept_encoding: &args.accept_encoding,
        cookie: s.cookie.as_deref(),
        cpus: &args.loadgen_cpus,
        handshakes,
        spin: args.spin,
    };
    match (s.protocol, args.loadgen) {
        (Some(Protocol::Handshake), _) => load::run(&builtin(true)),
        (Some(protocol), _) => h2load::run(&h2load::Spec {
            host: &s.host,
            paths: &files.list,
            protocol,
            connections: args.connections,
            streams: args.streams,
            duration,
            accept_encoding: &args.accept_encoding,
            cookie: s.cookie.as_deref(),
            cpus: &args.loadgen_cpus,
            log: &files.log,
        }),
        (None, Loadgen::Builtin) => load::run(&builtin(false)),
        (None, Loadgen::Wrk) => wrk::run(
            &format!("http://{}", s.host),
            files.wrk_script(s.cookie.as_deref())?,
            args.connections,
            duration,
            &args.loadgen_cpus,
        ),
    }
}

/// The report's line for a `--signed-in` run.
fn signed_in_line(sample: &SignedInSample) -> String {
    let warm = match sample.warm_hits {
        Some((hits, urls)) => {
            format!(
                "; after the warm-up {hits}/{urls} URLs were hits on a second signed-in request"
            )
        }
        None => String::new(),
    };
    format!(
        "signed in: every request carried the session cookie of {} (a reader added to a copy of the vault); \
         Cache-Status of a signed-in request before the rounds: {}{warm}",
        signin::READER,
        sample.cache_status.as_deref().unwrap_or("(none)")
    )
}

/// What the load generators were, for the report.
fn loadgen_line(args: &BenchHttpArgs) -> String {
    if args.tls {
        let h2 = if args.http2 {
            format!(
                "; HTTP/2: {} streams in flight per connection",
                args.streams
            )
        } else {
            String::new()
        };
        return format!(
            "h2load (a thread per CPU; HTTP/1.1 over TLS: --h1, one request in flight per connection{h2}) \
             and for new connections quire bench load --handshakes (1 thread, one task per \
             connection, full TLS 1.3 handshakes without resumption)"
        );
    }
    match args.loadgen {
        Loadgen::Builtin if args.spin => {
            "quire bench load (1 thread, epoll, spinning: never asleep)".into()
        }
        Loadgen::Builtin => "quire bench load (1 thread, epoll)".into(),
        Loadgen::Wrk => "wrk (1 thread)".into(),
    }
}

/// The report's line on the load generator (and, spinning, how fast it went).
fn print_loadgen(args: &BenchHttpArgs, urls: usize, runs: &[Run]) {
    println!(
        "load generator: {}, {} connections{}, pinned to CPU {}; server CPUs {}; order {:?}; {} URLs; Accept-Encoding: {}",
        loadgen_line(args),
        args.connections,
        args.rate
            .map_or(", closed loop".into(), |r| format!(", open loop at {r:.0} requests/s")),
        args.loadgen_cpus,
        args.server_cpus,
        args.order,
        urls,
        args.accept_encoding
    );
    if args.spin && args.rate.is_none() {
        let most = runs.iter().map(|r| r.requests_per_sec).fold(0.0, f64::max);
        println!(
            "the generator spins, so its CPU cannot show whether it was the ceiling; it \
             sent {most:.0} requests/s in this run's fastest round, so a server slower than \
             that was not held back by it"
        );
    }
}

/// The request order, written once for every run: the path list the built-in
/// generator reads, and wrk's scripts (one per cookie the subjects send).
struct RequestFiles {
    /// Holds the files; removed on drop.
    _dir: tempfile::TempDir,
    list: PathBuf,
    /// The first path of the order: the first request of every run.
    first: String,
    /// `--loadgen wrk`: a script per distinct `Cookie` (or none).
    wrk: Vec<(Option<String>, PathBuf)>,
    /// Where h2load writes its per-request log.
    log: PathBuf,
}

impl RequestFiles {
    fn write(
        args: &BenchHttpArgs,
        paths: &[String],
        subjects: &[Subject],
    ) -> anyhow::Result<RequestFiles> {
        let dir = tempfile::tempdir()?;
        let list = dir.path().join("paths.txt");
        let seq = urls::sequence(paths, args.order, (paths.len() * 20).max(20_000), args.seed);
        std::fs::write(&list, seq.join("\n") + "\n")?;
        let mut wrk = Vec::new();
        if args.loadgen == Loadgen::Wrk {
            for s in subjects {
                if wrk.iter().any(|(c, _)| *c == s.cookie) {
                    continue;
                }
                let script = dir.path().join(format!("requests-{}.lua", wrk.len()));
                std::fs::write(
                    &script,
                    wrk::script(&list, s.cookie.as_deref(), &args.accept_encoding),
                )?;
                wrk.push((s.cookie.clone(), script));
            }
        }
        Ok(RequestFiles {
            log: dir.path().join("h2load.log"),
            first: seq.first().cloned().unwrap_or_else(|| "/".into()),
            _dir: dir,
            list,
            wrk,
        })
    }

    /// wrk's script for requests with `cookie`.
    fn wrk_script(&self, cookie: Option<&str>) -> anyhow::Result<&PathBuf> {
        self.wrk
            .iter()
            .find(|(c, _)| c.as_deref() == cookie)
            .map(|(_, p)| p)
            .context("no wrk script was written for this subject's cookie")
    }
}

/// One benchmark: what to measure and the servers started for it.
struct Bench<'a> {
    args: &'a BenchHttpArgs,
    duration: Duration,
    subjects: Vec<Subject>,
    /// The servers started for it, stopped when it is dropped.
    started: Vec<Server>,
    /// The `--target` server's pid, for its CPU use.
    target_pid: Option<u32>,
    /// How the harness's own requests reach the servers.
    client: urls::Client,
    /// `--tls`: the run's CA and certificate.
    pki: Option<&'a TestPki>,
    /// `--peer floor`: the size of the floor's response.
    floor_bytes: Option<usize>,
    /// `--signed-in`: what the harness saw of signed-in answers before the rounds.
    signed_in: Option<SignedInSample>,
}

/// What a `--signed-in` run saw of signed-in answers before its rounds, for the
/// report: which case the rounds measure (answers cached per reader, or rendered
/// each time).
#[derive(Debug, Default)]
struct SignedInSample {
    /// The `Cache-Status` of a signed-in request for the first URL of the load, asked
    /// just before the rounds (after the warm-up); `None` when the answer had none.
    cache_status: Option<String>,
    /// The warm-up's second signed-in pass: URLs that were hits, of how many (`None`
    /// with `--no-warmup`).
    warm_hits: Option<(usize, usize)>,
}

impl Bench<'_> {
    /// Warms every server, runs the rounds, prints the table and writes `--json` and
    /// `--plot`.
    fn measure(mut self) -> anyhow::Result<()> {
        let args = self.args;
        let paths = paths(args, &self.client, &self.subjects[0].host)?;
        eprintln!(
            "bench http: {} URLs from {}",
            paths.len(),
            args.urls
                .as_ref()
                .map_or("the sitemap".into(), |p| p.display().to_string())
        );
        let mut warnings = self.warm_up(&paths)?;
        if args.peer.iter().any(|p| p.is_floor()) {
            self.start_floors(&paths)?;
            warnings.resize(self.subjects.len(), Vec::new());
        }
        let files = RequestFiles::write(args, &paths, &self.subjects)?;
        self.sample_signed_in(&files.first)?;
        if !args.no_warmup {
            self.prime(&files)?;
        }
        let mut runs: Vec<Run> = Vec::new();
        for rep in 0..args.reps {
            for k in 0..self.subjects.len() {
                // The order rotates each round, so no server always runs first.
                let i = (k + rep) % self.subjects.len();
                runs.push(self.one_run(rep, i, &files, &warnings[i])?);
            }
        }
        runs.sort_by_key(|r| {
            let position = self.subjects.iter().position(|s| s.name == r.server);
            (position, r.round)
        });
        summary::against_floor(&mut runs);
        self.report(&paths, &runs)
    }

    /// One short run of the generator against each subject, discarded, before the
    /// measured rounds: the warm-up's client sends other request heads than the
    /// generator's, and quire's hit loop answers a head it has not seen by parsing
    /// it before it keeps a recipe for it ([`PRIME`]). Every subject is primed alike.
    fn prime(&self, files: &RequestFiles) -> anyhow::Result<()> {
        let prime = PRIME.min(self.duration);
        for s in &self.subjects {
            load_run(self.args, prime, s, files)?;
        }
        eprintln!(
            "bench http: primed each server with {:.1} s of the generator's own requests",
            prime.as_secs_f64()
        );
        Ok(())
    }

    /// Starts the floors asked for with responses of the mean size of the first
    /// subject's answers (the hits it serves after the warm-up, head and body, with
    /// the run's `Accept-Encoding`), adding each as a subject after the others (with
    /// no warnings: floors are not warmed).
    fn start_floors(&mut self, paths: &[String]) -> anyhow::Result<()> {
        let first = &self.subjects[0];
        let bytes = warm::mean_response_bytes(
            &self.client,
            &first.host,
            paths,
            &self.args.accept_encoding,
        )?;
        let first = first.name.clone();
        let peers = self.args.peer.clone();
        let kinds = [
            (Peer::Floor, servers::FloorKind::Epoll),
            (Peer::FloorTokio, servers::FloorKind::Tokio),
            (Peer::FloorCorpus, servers::FloorKind::Distinct(paths.len())),
        ];
        for (peer, how) in kinds {
            if !peers.contains(&peer) {
                continue;
            }
            let floor = servers::floor(bytes, &self.args.server_cpus, how)?;
            eprintln!(
                "bench http: {}: {bytes}-byte responses (the mean of {first}'s answers), on CPU {}",
                floor.kind.name(),
                self.args.server_cpus
            );
            self.subjects.push(Subject {
                name: floor.kind.name().into(),
                host: floor.host.clone(),
                server: Some(self.started.len()),
                cookie: None,
                signed_in: false,
                protocol: None,
            });
            self.started.push(floor);
        }
        self.floor_bytes = Some(bytes);
        Ok(())
    }

    /// Each subject's warnings before any run: a debug build, and what its warm-up
    /// found (servers are warmed and checked unless `--no-warmup`; a signed-in
    /// subject with its session, see `warm::warm_signed_in`).
    fn warm_up(&mut self, paths: &[String]) -> anyhow::Result<Vec<Vec<String>>> {
        let subjects = &self.subjects;
        let mut warnings: Vec<Vec<String>> = vec![Vec::new(); subjects.len()];
        if cfg!(debug_assertions) && subjects.iter().any(|s| s.server.is_some()) {
            // The first trap of a load test: a development build. The quire this
            // started is this very binary.
            let w = "this is a debug build of quire: the quire it started measures the debug \
                     build (run with cargo run --release)";
            eprintln!("bench http: warning: {w}");
            for list in &mut warnings {
                list.push(w.into());
            }
        }
        if self.args.no_warmup {
            return Ok(warnings);
        }
        // Over TLS a server is several subjects: warmed once, its warnings shared.
        let mut warmed: Vec<(&str, Vec<String>)> = Vec::new();
        let mut signed_warm: Option<(usize, usize)> = None;
        for (i, s) in subjects.iter().enumerate() {
            if let (true, Some(cookie)) = (s.signed_in, &s.cookie) {
                if let Some((_, w)) = warmed.iter().find(|(h, _)| *h == s.host) {
                    warnings[i].extend(w.iter().cloned());
                    continue;
                }
                let w = self.warm_signed_in(s, cookie, paths)?;
                signed_warm = Some((w.hits, w.urls));
                let w: Vec<String> = w.failures(&s.name).into_iter().collect();
                warnings[i].extend(w.iter().cloned());
                warmed.push((&s.host, w));
                continue;
            }
            if s.cookie.is_some() {
                continue;
            }
            if let Some((_, w)) = warmed.iter().find(|(h, _)| *h == s.host) {
                warnings[i].extend(w.iter().cloned());
            } else {
                let w = self.warm_one(s, paths)?;
                warnings[i].extend(w.iter().cloned());
                warmed.push((&s.host, w));
            }
            if let (Some(Protocol::H2), Some(pki)) = (s.protocol, self.pki) {
                warnings[i].extend(self.check_h2(s, pki, paths)?);
            }
        }
        if !self.args.no_settle {
            self.settle(&mut warnings);
        }
        if let Some(hits) = signed_warm {
            self.signed_in.get_or_insert_default().warm_hits = Some(hits);
        }
        Ok(warnings)
    }

    /// Warms subject `s`'s server with the session `cookie` and says how many
    /// signed-in answers were hits on their second request.
    fn warm_signed_in(
        &self,
        s: &Subject,
        cookie: &str,
        paths: &[String],
    ) -> anyhow::Result<warm::Warmth> {
        let w = warm::warm_signed_in(
            &self.client,
            &s.host,
            paths,
            &self.args.accept_encoding,
            cookie,
        )?;
        eprintln!(
            "bench http: warm-up: {}: {}/{} URLs were cache hits on their second signed-in request{}",
            s.name,
            w.hits,
            w.urls,
            if w.hits == 0 {
                " (signed-in answers are not cached: the rounds measure renders)"
            } else {
                ""
            }
        );
        Ok(w)
    }

    /// `--signed-in`: asks the first URL of the load once more with the session,
    /// just before the rounds, and keeps its `Cache-Status` for the report.
    fn sample_signed_in(&mut self, first: &str) -> anyhow::Result<()> {
        let Some(s) = self.subjects.iter().find(|s| s.signed_in) else {
            return Ok(());
        };
        let (status, head, _) = self.client.get_with_cookie(
            &s.host,
            first,
            &self.args.accept_encoding,
            s.cookie.as_deref(),
        )?;
        let cache_status = signin::cache_status(&head);
        eprintln!(
            "bench http: signed in, {first} answered {status}, Cache-Status: {}",
            cache_status.as_deref().unwrap_or("(none)")
        );
        self.signed_in.get_or_insert_default().cache_status = cache_status;
        Ok(())
    }

    /// Waits until every started server is quiet after its warm-up (see
    /// `settle`), at most 10 minutes each; a server still busy then gets a warning.
    fn settle(&self, warnings: &mut [Vec<String>]) {
        let mut done: Vec<usize> = Vec::new();
        for (i, s) in self.subjects.iter().enumerate() {
            let Some(k) = s.server.filter(|k| !done.contains(k)) else {
                continue;
            };
            done.push(k);
            let server = &self.started[k];
            match settle::until_quiet(server, Duration::from_secs(600)) {
                Some(t) => eprintln!(
                    "bench http: {} went quiet {:.0} s after its warm-up",
                    server.kind.name(),
                    t.as_secs_f64()
                ),
                None => {
                    let w = format!(
                        "{} was still busy 10 minutes after its warm-up: its rounds share the CPU with that work",
                        server.kind.name()
                    );
                    eprintln!("bench http: warning: {w}");
                    for (j, t) in self.subjects.iter().enumerate().skip(i) {
                        if t.server == Some(k) {
                            warnings[j].push(w.clone());
                        }
                    }
                }
            }
        }
    }

    /// Warms subject `s`'s server (over HTTPS/1.1 with `--tls`) and returns the
    /// check's warnings.
    fn warm_one(&self, s: &Subject, paths: &[String]) -> anyhow::Result<Vec<String>> {
        let w = warm::warm(&self.client, &s.host, paths, &self.args.accept_encoding)?;
        eprintln!(
            "bench http: warm-up: {}: {}/{} URLs were cache hits on their second request{}",
            s.name,
            w.hits,
            w.urls,
            if w.unknown > 0 {
                format!(" ({} without Cache-Status or X-Cache)", w.unknown)
            } else {
                String::new()
            }
        );
        Ok(w.warnings(&s.name))
    }

    /// Checks a sample of the URLs are hits over HTTP/2 too (curl), and returns the
    /// check's warnings.
    fn check_h2(
        &self,
        s: &Subject,
        pki: &TestPki,
        paths: &[String],
    ) -> anyhow::Result<Vec<String>> {
        let sample = &paths[..paths.len().min(warm::H2_SAMPLE)];
        let Some(w) = warm::check_h2(&pki.ca, &s.host, sample, &self.args.accept_encoding)? else {
            eprintln!(
                "bench http: warm-up: {}: curl not found, HTTP/2 hits not checked",
                s.name
            );
            return Ok(vec![format!(
                "{}: HTTP/2 hits not checked (no curl)",
                s.name
            )]);
        };
        eprintln!(
            "bench http: warm-up: {}: {}/{} URLs were cache hits over HTTP/2 (curl)",
            s.name, w.hits, w.urls
        );
        Ok(w.warnings(&s.name))
    }

    /// Round `rep` (from 0) of subject `i`: one load run, with the CPU time of the
    /// server, the generator and the machine around it.
    fn one_run(
        &self,
        rep: usize,
        i: usize,
        files: &RequestFiles,
        warnings: &[String],
    ) -> anyhow::Result<Run> {
        let args = self.args;
        let s = &self.subjects[i];
        let cpu = || match s.server {
            Some(i) => self.started[i].cpu_jiffies(),
            None => self.target_pid.and_then(procstat::process),
        };
        let before = procstat::machine().unwrap_or_default();
        let server_before = cpu();
        let (r, loadgen) = load_run(args, self.duration, s, files)?;
        let after = procstat::machine().unwrap_or_default();
        let server = match (server_before, cpu()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let secs = r.duration_us as f64 / 1e6;
        let gen = procstat::Generator {
            cores: servers::cpu_count(&args.loadgen_cpus),
            spins: args.spin,
        };
        let q = procstat::judge(before, after, server, loadgen, secs, gen);
        let mut w = warnings.to_vec();
        w.extend(q.warnings.iter().cloned());
        if let Some(p) = s.protocol {
            w.extend(summary::tls_warning(p, r.tls.as_ref()));
        }
        let mut run = Run::new(&s.name, rep + 1, &r, &q, w);
        run.protocol = s.protocol.map(|p| p.describe().to_owned());
        eprintln!(
            "bench http: round {} of {}: {}: {:.0} requests/s, p99 {:.2} ms",
            rep + 1,
            args.reps,
            s.name,
            run.requests_per_sec,
            run.p99_ms
        );
        Ok(run)
    }

    /// The table, the load generator's line and the ratios on stdout; `--json` and
    /// `--plot` written.
    fn report(&self, paths: &[String], runs: &[Run]) -> anyhow::Result<()> {
        let args = self.args;
        let names: Vec<&str> = self.subjects.iter().map(|s| s.name.as_str()).collect();
        summary::print(runs, &names);
        print_loadgen(args, paths.len(), runs);
        if let Some(line) = self.signed_in_line() {
            println!("{line}");
        }
        let ratios = summary::ratios(runs, &names);
        summary::print_ratios(runs, &names, &ratios);
        summary::print_floor(runs, &names);
        if args.tls {
            summary::print_tls(runs);
        }
        if let Some(path) = &args.json {
            let mut doc = serde_json::json!({
                "servers": names,
                "urls": paths.len(),
                "order": args.order,
                "connections": args.connections,
                "rate": args.rate,
                "spin": args.spin,
                "duration_s": self.duration.as_secs(),
                "loadgen": if args.tls {
                    "h2load".to_owned()
                } else {
                    format!("{:?}", args.loadgen).to_lowercase()
                },
                "loadgen_cpus": args.loadgen_cpus,
                "server_cpus": args.server_cpus,
                "accept_encoding": args.accept_encoding,
                "signed_in": args.signed_in,
                "machine": crate::machine::Machine::probe(),
                "runs": runs,
                "ratios": ratios,
            });
            if let Some(bytes) = self.floor_bytes {
                doc["floor"] = serde_json::json!({
                    "response_bytes": bytes,
                    "cpu_x_floor": summary::floor_multiples(runs, &names),
                });
            }
            if args.tls {
                doc["tls"] = self.tls_json();
            }
            if let Some(sample) = &self.signed_in {
                doc["signed_in_as"] = signin::READER.into();
                doc["cache_status_sample"] = sample.cache_status.clone().into();
                doc["signed_in_warm_hits"] = match sample.warm_hits {
                    Some((hits, urls)) => serde_json::json!({"hits": hits, "urls": urls}),
                    None => serde_json::Value::Null,
                };
            }
            std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &args.plot {
            let series: Vec<plot::Series> = runs.iter().map(Run::series).collect();
            let title = format!(
                "quire bench http: {} URLs, {} connections, {}",
                paths.len(),
                args.connections,
                args.rate
                    .map_or("closed loop".into(), |r| format!("open loop at {r:.0}/s"))
            );
            std::fs::write(path, plot::svg(&title, &series))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
    /// `--signed-in`: the report's line saying so, and which case was measured.
    fn signed_in_line(&self) -> Option<String> {
        let sample = self.signed_in.as_ref()?;
        Some(signed_in_line(sample))
    }

    /// `--tls`: what the clients offered and how each protocol was measured.
    fn tls_json(&self) -> serde_json::Value {
        let args = self.args;
        serde_json::json!({
            "offered": {"version": "TLSv1.3", "cipher": tls::CIPHER, "group": tls::GROUP},
            "certificate": "ECDSA P-256 for localhost and 127.0.0.1, then the CA made for the run",
            "http2": args.http2,
            "streams": args.http2.then_some(args.streams),
            "handshake": "a new connection per request: a full TLS 1.3 handshake (no resumption, \
                          the certificate not checked by the client), one GET with \
                          Connection: close, closed by the server",
            "loadgen": loadgen_line(args),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(name: &str, cookie: Option<&str>, signed_in: bool) -> Subject {
        Subject {
            name: name.into(),
            host: "127.0.0.1:9".into(),
            server: Some(0),
            cookie: cookie.map(str::to_owned),
            signed_in,
            protocol: None,
        }
    }

    #[test]
    fn a_signed_in_subject_is_measured_on_new_connections_too_over_tls() {
        let subjects = vec![
            subject(SIGNED_IN, Some("quire_session=ab.cd"), true),
            subject("uncached", Some(BYPASS_COOKIE), false),
        ];
        let names: Vec<String> = over_tls(subjects, true)
            .into_iter()
            .map(|s| {
                assert!(s.cookie.is_some(), "{}: the cookie is kept", s.name);
                s.name
            })
            .collect();
        assert_eq!(
            names,
            [
                "signed-in/tls-h1",
                "signed-in/tls-h2",
                "signed-in/handshake",
                "uncached/tls-h1",
                "uncached/tls-h2"
            ]
        );
    }

    #[test]
    fn wrk_gets_a_script_per_cookie_with_the_session_in_it() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchHttpArgs,
        }
        let args = Cli::try_parse_from(["x", "--serve", "v", "--signed-in", "--loadgen", "wrk"])
            .unwrap()
            .args;
        assert!(args.signed_in);
        let subjects = vec![subject(SIGNED_IN, Some("quire_session=ab.cd"), true)];
        let files = RequestFiles::write(&args, &["/a".into(), "/b".into()], &subjects).unwrap();
        let script =
            std::fs::read_to_string(files.wrk_script(Some("quire_session=ab.cd")).unwrap())
                .unwrap();
        assert!(
            script.contains(r#"["Cookie"] = "quire_session=ab.cd""#),
            "{script}"
        );
        assert!(files.wrk_script(None).is_err(), "no cookie-less subject");
        assert!(files.first.starts_with('/'));
        let refused = |extra: &[&str]| {
            let mut argv = vec!["x", "--signed-in"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).is_err()
        };
        assert!(refused(&[]), "--signed-in needs --serve");
        assert!(refused(&["--proxy", "http://o:1"]));
        assert!(refused(&["--target", "http://h:1"]));
        assert!(refused(&["--serve", "v", "--uncached"]));
        assert!(refused(&["--serve", "v", "--peer", "nginx"]));
        assert!(!refused(&["--serve", "v", "--tls", "--http2"]));
    }

    #[test]
    fn a_spinning_generator_is_refused_where_there_is_none() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchHttpArgs,
        }
        let parse = |extra: &[&str]| {
            let mut argv = vec!["x", "--proxy", "http://127.0.0.1:1", "--spin"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| c.args)
        };
        // Over TLS the load comes from h2load: refused while parsing.
        assert!(parse(&["--tls"]).is_err());
        // wrk sleeps in its waits: refused before any server starts.
        let wrk = parse(&["--loadgen", "wrk"]).unwrap();
        let e = run(&wrk).unwrap_err().to_string();
        assert!(e.contains("--spin"), "{e}");
        assert!(parse(&[]).unwrap().spin);
    }

    #[test]
    fn the_report_says_the_run_was_signed_in_and_what_the_cache_did() {
        let line = signed_in_line(&SignedInSample {
            cache_status: Some("quire; fwd=bypass; detail=cookie".into()),
            warm_hits: Some((0, 288)),
        });
        assert!(line.starts_with("signed in: "), "{line}");
        assert!(line.contains(signin::READER), "{line}");
        assert!(line.contains("quire; fwd=bypass; detail=cookie"), "{line}");
        assert!(line.contains("0/288 URLs were hits"), "{line}");
        let line = signed_in_line(&SignedInSample::default());
        assert!(line.ends_with("before the rounds: (none)"), "{line}");
    }
}
