//! The model file mapped read-only into memory: the one place in the workspace that
//! allows `unsafe` (an architecture test holds it to this module).
//!
//! A map rather than a buffer because the weights are used as stored (the kernels read
//! Q4_0/Q4_1/Q8_0/Q4_K/Q6_K blocks in place, see `quant.rs`): loading copies nothing, and
//! the pages belong to the page cache, so only the pages touched count as resident, every
//! whittle process on the same model shares one copy, and under memory pressure the
//! kernel drops the clean pages and reads them again instead of swapping a private copy.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;

/// The whole of one file, read-only, for as long as this value lives.
pub(crate) struct FileMap(memmap2::Mmap);

impl FileMap {
    /// Maps all of `file` (opened for reading).
    pub(crate) fn new(file: &File) -> io::Result<Self> {
        // SAFETY: `Mmap::map` is unsafe because the bytes behind the returned slice can
        // change, or vanish (SIGBUS on truncation), if another process writes to the file
        // while it is mapped. The default model is whittle's own file in its cache,
        // extracted once from a SHA-256-checked wheel into a temporary file that is then
        // renamed into place (see `download.rs`); it is never written in place afterwards,
        // and a later pull renames a new inode over the name, which leaves this mapping
        // on the old one. Nothing in whittle writes to a model file it has mapped. A file
        // the user names and then modifies while whittle runs is outside that guarantee,
        // as with llama.cpp, which maps model files the same way by default.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        Ok(FileMap(map))
    }
}

impl Deref for FileMap {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}
