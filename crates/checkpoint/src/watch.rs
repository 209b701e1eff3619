//! Which directories changed since the last snapshot, as the kernel tells
//! it (inotify), so a snapshot of a big tree after a small change stats
//! only the directories something happened in, as git's fsmonitor lets
//! `git status` do. Whatever the watcher cannot vouch for (a directory it
//! could not watch, an overflowed queue, a changed `.gitignore`) is
//! scanned in full, so the result is always what a full scan would give.

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::path::Path;

/// What happened since the last look.
#[derive(Debug)]
pub(crate) struct Changes {
    /// Nothing can be vouched for: scan everything.
    pub all: bool,
    /// Directories (relative, as bytes) with a change in them.
    pub dirs: HashSet<Vec<u8>>,
}

impl Changes {
    /// Nothing vouched for: every directory is scanned.
    pub(crate) fn everything() -> Changes {
        Changes {
            all: true,
            dirs: HashSet::new(),
        }
    }
}

/// An inotify instance watching the workspace's directories.
pub(crate) struct Watcher {
    fd: OwnedFd,
    /// Watch descriptor to the directory it watches.
    dirs: HashMap<i32, Vec<u8>>,
    /// A watch could not be added since the last look (a limit reached).
    failed: bool,
}

/// Every change to a directory's entries or its files' content or mode.
fn watch_flags() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

impl Watcher {
    /// A watcher, or `None` when the kernel will not give one (every
    /// snapshot then scans in full).
    pub(crate) fn new() -> Option<Watcher> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Watcher {
            fd,
            dirs: HashMap::new(),
            failed: false,
        })
    }

    /// Watches directory `abs` (`rel` in the workspace) before it is read,
    /// so a change made while or after it is read shows up next time.
    /// False when it cannot be watched: its scan must not be reused. Asked
    /// of every directory scanned in full: the kernel gives the same
    /// descriptor for a directory already watched, a new one for a new
    /// directory at the same path.
    pub(crate) fn watch(&mut self, abs: &Path, rel: &[u8]) -> bool {
        match inotify::add_watch(&self.fd, abs, watch_flags()) {
            Ok(wd) => {
                self.dirs.insert(wd, rel.to_vec());
                true
            }
            Err(_) => {
                self.failed = true;
                false
            }
        }
    }

    /// Reads every event waiting, without blocking.
    pub(crate) fn changes(&mut self) -> Changes {
        let mut changes = Changes {
            all: std::mem::take(&mut self.failed),
            dirs: HashSet::new(),
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    changes.all = true;
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                changes.all = true;
                continue;
            }
            let Some(dir) = self.dirs.get(&event.wd()).cloned() else {
                continue;
            };
            if flags.intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
            {
                // The directory went (or moved): its parent saw that too.
                self.dirs.remove(&event.wd());
                changes.dirs.insert(dir);
                continue;
            }
            if event
                .file_name()
                .is_some_and(|name| name.to_bytes() == b".gitignore")
            {
                // What is ignored below may have changed anywhere below.
                changes.all = true;
            }
            changes.dirs.insert(dir);
        }
        changes
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("watched", &self.dirs.len())
            .finish_non_exhaustive()
    }
}
