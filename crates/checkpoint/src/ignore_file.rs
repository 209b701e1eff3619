//! Reading a `.gitignore` (or `.git/info/exclude`) for a snapshot.
//!
//! The snapshot runs as the person, outside the sandbox, over files a
//! command may have just made: a `.gitignore` can be a FIFO (an open
//! blocks for ever), a link to `/dev/zero`, or a sparse file of terabytes
//! (read whole, it exhausts memory). It is read only as a regular file not
//! reached through a link at its name, opened without blocking, of at most
//! [`MAX_IGNORE_FILE_BYTES`]; any other is skipped, and the files it would
//! have ignored are kept like the rest (under the size cap).

use crate::capped::{Capped, read_capped};
use ignore::gitignore::GitignoreBuilder;
use rustix::fs::{Mode, OFlags};
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest ignore file read.
pub(crate) const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;

/// The most ignore-file bytes one snapshot compiles, all folders together.
/// Compiled patterns take far more memory than their text, and a command
/// can hard-link one file into a thousand nested folders; past this, the
/// rules of further files are not applied (what they would have ignored is
/// kept, under the size cap). A real repository's come to kilobytes.
pub(crate) const MAX_IGNORE_BYTES_PER_SCAN: u64 = 2 << 20;

/// Adds the rules of the ignore file at `path` to `builder`, counting its
/// bytes in `compiled`; false when it was not read (absent, not a regular
/// file, too large, unreadable, or past [`MAX_IGNORE_BYTES_PER_SCAN`]).
/// Like git, a line that is not UTF-8 or not a pattern is passed over.
pub(crate) fn add_ignore_file(
    builder: &mut GitignoreBuilder,
    path: &Path,
    compiled: &AtomicU64,
) -> bool {
    let Some(bytes) = read_ignore_file(path) else {
        return false;
    };
    let len = bytes.len() as u64;
    if compiled
        .fetch_add(len, Ordering::Relaxed)
        .saturating_add(len)
        > MAX_IGNORE_BYTES_PER_SCAN
    {
        return false;
    }
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(Some(path.to_path_buf()), line);
    }
    true
}

fn read_ignore_file(path: &Path) -> Option<Vec<u8>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let file = File::from(fd);
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_IGNORE_FILE_BYTES {
        return None;
    }
    match read_capped(&file, meta.len(), MAX_IGNORE_FILE_BYTES).ok()? {
        Capped::Content(bytes) => Some(bytes),
        Capped::TooLarge => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(path: &Path) -> Option<ignore::gitignore::Gitignore> {
        let mut builder = GitignoreBuilder::new(path.parent().unwrap());
        add_ignore_file(&mut builder, path, &AtomicU64::new(0)).then(|| builder.build().unwrap())
    }

    #[test]
    fn only_a_small_regular_file_not_behind_a_link_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let plain = d.join("plain");
        std::fs::write(&plain, "\u{feff}target/\r\n*.log\n\u{ff}bad\n").unwrap();
        let g = rules(&plain).unwrap();
        assert!(g.matched(d.join("target"), true).is_ignore());
        assert!(g.matched(d.join("x.log"), false).is_ignore());
        assert!(!g.matched(d.join("x.rs"), false).is_ignore());

        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(rules(&fifo).is_none(), "a FIFO is not opened for reading");
        let zero = d.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(rules(&zero).is_none());
        let link = d.join("link");
        std::os::unix::fs::symlink(&plain, &link).unwrap();
        assert!(rules(&link).is_none());
        let sparse = d.join("sparse");
        File::create(&sparse).unwrap().set_len(1 << 40).unwrap();
        assert!(rules(&sparse).is_none(), "a terabyte is not read");
        assert!(rules(&d.join("absent")).is_none());
    }

    #[test]
    fn one_scan_compiles_a_bounded_amount_of_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gitignore");
        std::fs::write(&path, format!("*.log\n{}\n", "#".repeat(300_000))).unwrap();
        let compiled = AtomicU64::new(0);
        let read = (0..12)
            .filter(|_| add_ignore_file(&mut GitignoreBuilder::new(dir.path()), &path, &compiled))
            .count();
        assert_eq!(read, 6, "six 300 KB files fit in 2 MiB");
    }
}
