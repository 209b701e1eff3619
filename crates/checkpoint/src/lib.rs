//! Snapshots of a workspace's files, so whatever a tool call wrote (a bash
//! command included) can be undone with `/rewind`.
//!
//! The agent calls [`Store::snapshot`] after each tool call that may
//! write, records the returned [`Checkpoint`]'s id and [`DiffStat`] in its
//! session log, and calls [`Store::restore`] on rewind. The workspace need
//! not be a git repository, and a user's `.git` (at any depth) is never
//! read or written: checkpoints live in a store folder of their own.
//!
//! - Content-addressed and Merkle-shaped, as git's objects: one blake3-named
//!   object per file content, symlink target and directory, so an
//!   unchanged directory is the same object in every checkpoint.
//! - Incremental: a stat cache (size, mtime, ctime, inode, mode per path,
//!   kept in memory and in the store) means a snapshot after a small change
//!   reads only the changed files; racily clean entries are read again.
//! - `.gitignore` is honoured (also outside a git repository), `.whittle/`
//!   at the root is skipped; ignored paths, files over
//!   [`Options::max_file_size`] and FIFOs, sockets and devices are listed
//!   as [`Untracked`] and left alone by a restore.
//! - Restore writes only what differs, never through a symlink, files by
//!   temp + rename; it first saves the current state, so it can be undone.
//! - Several processes may share one store: each operation takes its lock.
//!
//! ```
//! use whittle_checkpoint::{Options, Store};
//!
//! let ws = tempfile::tempdir().unwrap();
//! std::fs::write(ws.path().join("notes.txt"), "one\n").unwrap();
//! let mut store = Store::open(
//!     ws.path(),
//!     &ws.path().join(".whittle/checkpoints"),
//!     Options::default(),
//! )
//! .unwrap();
//! let first = store.snapshot(Some("call_1")).unwrap();
//! assert_eq!(first.stat.files_changed, 1);
//!
//! // A tool call edits the file and adds another.
//! std::fs::write(ws.path().join("notes.txt"), "one\ntwo\n").unwrap();
//! std::fs::write(ws.path().join("new.txt"), "x\n").unwrap();
//! let second = store.snapshot(Some("call_2")).unwrap();
//! assert_eq!((second.stat.files_changed, second.stat.insertions), (2, 2));
//!
//! // Rewind to before it.
//! let report = store.restore(&first.id).unwrap();
//! assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "one\n");
//! assert!(!ws.path().join("new.txt").exists());
//! assert_eq!(report.removed.len(), 1);
//! ```

mod cache;
mod capped;
mod checkpoint;
mod diff;
mod error;
mod gc;
mod hash;
mod ignore_file;
mod lock;
mod name;
mod objects;
mod options;
mod restore;
mod scan;
mod store;
mod tree;
mod untracked;
mod watch;

pub use checkpoint::{Checkpoint, CheckpointId};
pub use diff::DiffStat;
pub use error::CheckpointError;
pub use gc::{GcLimits, GcReport};
pub use hash::ObjectId;
pub use options::Options;
pub use restore::RestoreReport;
pub use scan::ScanStats;
pub use store::Store;
pub use untracked::{Untracked, UntrackedReason};
