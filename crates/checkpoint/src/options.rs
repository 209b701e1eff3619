/// How a [`Store`](crate::Store) snapshots.
#[derive(Clone, Debug)]
pub struct Options {
    /// Files larger than this are not stored but listed as untracked: a
    /// build artefact or data file would cost more than it saves.
    pub max_file_size: u64,
    /// Watch the workspace's directories (inotify) so a snapshot after a
    /// small change stats only the directories something happened in;
    /// off, every snapshot stats every file (as `git add -A` does).
    pub watch_changes: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_file_size: 16 * 1024 * 1024,
            watch_changes: true,
        }
    }
}
