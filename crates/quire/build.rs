//! Looks for the tools some of the binary's tests drive, so a test whose tool is
//! missing is reported as ignored with the reason instead of passing without running
//! (libtest has no skip at run time). Emits `cfg(has_redis)` when `redis-server` and
//! `redis-cli` are on `PATH` (the cluster tests) and `cfg(has_systemd_analyze)` when
//! `systemd-analyze` is (the check of the example units).
//!
//! Reruns when `PATH` or `QUIRE_TEST_HIDE_TOOLS` changes (see
//! `quire-testkit/src/tools.rs`, which decides what is installed).

#[path = "../quire-testkit/src/tools.rs"]
pub mod tools;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_redis)");
    println!("cargo::rustc-check-cfg=cfg(has_systemd_analyze)");
    tools::rerun_on_env();
    if tools::on_path("redis-server") && tools::on_path("redis-cli") {
        println!("cargo::rustc-cfg=has_redis");
    }
    if tools::on_path("systemd-analyze") {
        println!("cargo::rustc-cfg=has_systemd_analyze");
    }
}
