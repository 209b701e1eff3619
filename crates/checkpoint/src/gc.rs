use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What [`Store::gc`](crate::Store::gc) keeps. The newest checkpoint is
/// always kept, whatever the limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcLimits {
    /// Prune the oldest checkpoints until the objects the rest need take
    /// at most this many bytes.
    pub max_bytes: Option<u64>,
    /// Prune checkpoints older than this.
    pub max_age: Option<Duration>,
}

/// What a collection removed and what is left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// Checkpoints pruned.
    pub checkpoints_removed: u64,
    /// Checkpoints left.
    pub checkpoints_kept: u64,
    /// Objects no kept checkpoint needed, removed.
    pub objects_removed: u64,
    /// Bytes those objects took.
    pub bytes_removed: u64,
    /// Bytes the kept checkpoints' objects take.
    pub bytes_kept: u64,
}
