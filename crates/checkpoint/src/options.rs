/// How a [`Store`](crate::Store) snapshots.
#[derive(Clone, Debug)]
pub struct Options {
    /// Files larger than this are not stored but listed as untracked: a
    /// build artefact or data file would cost more than it saves.
    pub max_file_size: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_file_size: 16 * 1024 * 1024,
        }
    }
}
