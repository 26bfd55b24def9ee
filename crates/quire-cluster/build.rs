//! Looks for `redis-server` and `redis-cli`, which the cluster tests drive, so a test
//! that needs them is reported as ignored with the reason when they are missing
//! instead of passing without running (libtest has no skip at run time). Emits
//! `cfg(has_redis)` when both are on `PATH`; the tests carry
//! `#[cfg_attr(not(has_redis), ignore = "...")]`.
//!
//! Reruns when `PATH` or `QUIRE_TEST_HIDE_TOOLS` changes (see
//! `quire-testkit/src/tools.rs`, which decides what is installed).

#[path = "../quire-testkit/src/tools.rs"]
pub mod tools;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_redis)");
    tools::rerun_on_env();
    if tools::on_path("redis-server") && tools::on_path("redis-cli") {
        println!("cargo::rustc-cfg=has_redis");
    }
}
