//! The readers' files written safely, in one place: the users file, the sign-out
//! table and the session secret are each written whole under a temporary name
//! beside the file (mode 0600 from its first byte), synced, then put in place, so a
//! reader of the file never sees half of it. A leaf.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path.tmp<pid>`, created mode 0600 and then given `like`'s
/// permissions when there is one, synced; returns its name. On failure nothing is
/// left behind.
fn write_temp(path: &Path, bytes: &[u8], like: Option<&Path>) -> std::io::Result<PathBuf> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let written = (|| {
        let mut f = opts.open(&tmp)?;
        if let Some(like) = like {
            f.set_permissions(std::fs::metadata(like)?.permissions())?;
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Replaces `path` with `bytes` atomically (a synced temporary file renamed into place);
/// a `private` file is made mode 0600, another keeps the old file's permissions.
pub(super) fn replace_file(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    let tmp = write_temp(path, bytes, (!private).then_some(path))?;
    let renamed = std::fs::rename(&tmp, path);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// Creates `path` holding `bytes`, mode 0600, unless it exists; returns whether this
/// call created it. The file is linked into place whole, so when two processes race
/// the first link wins for both (the loser reads the winner's file).
pub(super) fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let tmp = write_temp(path, bytes, None)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_created_once_and_never_readable_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/secret");
        assert!(create_private(&path, b"first").unwrap());
        assert!(!create_private(&path, b"second").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn a_replaced_file_keeps_its_permissions_unless_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.toml");
        replace_file(&path, b"one", true).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
            replace_file(&path, b"two", false).unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o640);
            replace_file(&path, b"three", true).unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
    }
}
