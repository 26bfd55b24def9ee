//! Looks for the external tools some tests drive, so a test whose tool is missing is
//! reported as ignored with the reason instead of passing without running (libtest has
//! no skip at run time). Emits `cfg(has_curl)` when `curl` is on `PATH` (the
//! real-client tests carry `#[cfg_attr(not(has_curl), ignore = "curl not found on
//! PATH")]`) and `cfg(has_pebble)` when Let's Encrypt's test CA `pebble` and its
//! `pebble-challtestsrv` are (the ACME tests).
//!
//! Reruns when `PATH` changes. Installing a tool into a directory already on `PATH` is
//! not seen until then (or until `cargo clean -p quire-server`): CI installs them before
//! the first build.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_curl)");
    println!("cargo::rustc-check-cfg=cfg(has_pebble)");
    println!("cargo::rerun-if-env-changed=PATH");
    if on_path("curl") {
        println!("cargo::rustc-cfg=has_curl");
    }
    if on_path("pebble") && on_path("pebble-challtestsrv") {
        println!("cargo::rustc-cfg=has_pebble");
    }
}

/// Whether an executable file named `tool` is in a directory of `PATH`.
fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        Path::new(&dir)
            .join(tool)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
