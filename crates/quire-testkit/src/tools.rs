//! Whether an external tool a test drives is installed, decided in one place for the
//! build scripts that turn it into a `cfg` (so a test whose tool is missing is
//! reported as ignored with the reason, never passed: libtest has no skip at run
//! time) and for the tests themselves. Build scripts take this file with
//! `#[path = "../quire-testkit/src/tools.rs"] mod tools;`: it uses `std` only.
//!
//! `QUIRE_TEST_HIDE_TOOLS` (names separated by commas) makes the tools it names count
//! as missing, so the ignored path can be checked on a machine that has them:
//! `QUIRE_TEST_HIDE_TOOLS=redis-server cargo test -p quire-cluster` lists the Redis
//! tests as ignored.

use std::path::Path;

/// The variable that hides installed tools from [`on_path`].
pub const HIDE_VAR: &str = "QUIRE_TEST_HIDE_TOOLS";

/// Whether an executable file named `tool` is in a directory of `PATH` (and not
/// hidden by [`HIDE_VAR`]).
pub fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let hidden = std::env::var(HIDE_VAR).unwrap_or_default();
    if hidden.split(',').any(|h| h.trim() == tool) {
        return false;
    }
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

/// Tells cargo to build again when `PATH` or [`HIDE_VAR`] changes (for build scripts).
pub fn rerun_on_env() {
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed={HIDE_VAR}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_not_found_and_sh_is() {
        assert!(on_path("sh"), "every test machine has a shell");
        assert!(!on_path("quire-no-such-tool-on-any-path"));
    }
}
