//! Test fixtures shared by the crate's unit tests.

use crate::vault::Vault;

/// A vault written to a temporary folder from `(path, text)` pairs, loaded.
pub(crate) fn vault(files: &[(&str, &str)]) -> (tempfile::TempDir, Vault) {
    let dir = tempfile::tempdir().unwrap();
    for (p, text) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let v = Vault::load(dir.path()).unwrap();
    (dir, v)
}
