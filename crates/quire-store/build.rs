//! Decides at build time whether the tests that need a small tmpfs can make one, so
//! such a test is reported as ignored with the reason instead of passing without
//! running (libtest has no skip at run time). Emits `cfg(can_mount_tmpfs)` when
//! `mount` and `umount` are on `PATH` and this process may mount (`CAP_SYS_ADMIN` in
//! its effective capabilities, as root on a host or in a privileged container has).
//!
//! Reruns when `PATH` changes; the build and the tests are assumed to run as the same
//! user in the same container.

use std::path::Path;

/// `CAP_SYS_ADMIN`'s bit in the capability sets (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(can_mount_tmpfs)");
    println!("cargo::rerun-if-env-changed=PATH");
    if on_path("mount") && on_path("umount") && may_mount() {
        println!("cargo::rustc-cfg=can_mount_tmpfs");
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
