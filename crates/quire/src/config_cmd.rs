//! `quire config check --config FILE`: reads a configuration file as `quire proxy`
//! and `quire serve` would (unknown keys and bad values are errors naming the key),
//! checks the rules between settings and the TLS certificate files, and prints the
//! effective configuration — every default filled in — as TOML on standard output.
//! The admin token is never printed: a comment says whether one is set. Nothing is opened for
//! writing: the cache volume and the access log are left alone.

use anyhow::Context;

use crate::cli::ConfigCommand;

/// Runs a `quire config` command.
pub(crate) fn run(cmd: &ConfigCommand) -> anyhow::Result<()> {
    match cmd {
        ConfigCommand::Check { config } => check(config),
    }
}

fn check(path: &std::path::Path) -> anyhow::Result<()> {
    let mut cfg = crate::settings::load_config(path)?;
    cfg.validate()
        .with_context(|| format!("config {}", path.display()))?;
    if cfg.tls.cert.is_some() {
        // Loads and checks the certificate and key (names the file that fails).
        quire_server::tls::Tls::from_config(&cfg.tls)
            .with_context(|| format!("config {}", path.display()))?;
    }
    if cfg.admin_token.take().is_some() {
        println!("# admin_token is set (not shown)");
    }
    if let Some(c) = cfg.cluster.as_mut() {
        if c.session_secret.take().is_some() {
            println!("# cluster.session_secret is set (not shown)");
        }
    }
    let text = toml::to_string(&cfg).context("printing the configuration")?;
    print!("{text}");
    eprintln!("quire: config {}: ok", path.display());
    Ok(())
}
