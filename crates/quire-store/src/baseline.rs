//! (in progress) The file-per-entry baseline.
/// Options of the baseline (in progress).
#[derive(Debug, Clone, Default)]
pub struct FileOptions {}
/// The file-per-entry baseline (in progress).
#[derive(Debug)]
pub struct FileStore {}
