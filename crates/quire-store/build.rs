//! Decides at build time whether the tests that need a small tmpfs can make one, so
//! such a test is reported as ignored with the reason instead of passing without
//! running (libtest has no skip at run time). Emits `cfg(can_mount_tmpfs)` when
//! `mount` and `umount` are on `PATH` and this process may mount (`CAP_SYS_ADMIN` in
//! its effective capabilities, as root on a host or in a privileged container has).
//!
//! Reruns when `PATH` (or `QUIRE_TEST_HIDE_TOOLS`, see `quire-testkit/src/tools.rs`) changes; the build and the tests are assumed to run as the same
//! user in the same container.

#[path = "../quire-testkit/src/tools.rs"]
pub mod tools;

use tools::on_path;

/// `CAP_SYS_ADMIN`'s bit in the capability sets (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(can_mount_tmpfs)");
    tools::rerun_on_env();
    if on_path("mount") && on_path("umount") && may_mount() {
        println!("cargo::rustc-cfg=can_mount_tmpfs");
    }
}

/// Whether `CAP_SYS_ADMIN` is in this process's effective set (`CapEff` in
/// `/proc/self/status`, a hex mask).
fn may_mount() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}
