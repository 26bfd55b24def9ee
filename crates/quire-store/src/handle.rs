//! (in progress)
use crate::engine::{EntryRef, FileExtent};
/// A pinned hit (in progress).
#[derive(Debug)]
pub struct Handle {
    bytes: Vec<u8>,
}
impl EntryRef for Handle {
    fn meta(&self) -> &[u8] {
        &self.bytes
    }
    fn body(&self) -> &[u8] {
        &self.bytes
    }
    fn body_extent(&self) -> Option<FileExtent<'_>> {
        None
    }
}
