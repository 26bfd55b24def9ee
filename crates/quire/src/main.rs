//! The `quire` binary (in progress).
fn main() {}
