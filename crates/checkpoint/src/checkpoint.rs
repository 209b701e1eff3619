use crate::diff::DiffStat;
use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::scan::ScanStats;
use crate::untracked::Untracked;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

/// A checkpoint's name: 16 hex digits, the first 11 the creation time in
/// milliseconds, so ids sort by time and stay short enough to type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CheckpointId(String);

impl CheckpointId {
    pub(crate) fn new(unix_ms: u64) -> CheckpointId {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut h = blake3::Hasher::new();
        h.update(&crate::scan::now_ns().to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        h.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        h.update(format!("{:?}", std::thread::current().id()).as_bytes());
        let r = h.finalize();
        let bytes = r.as_bytes();
        let random = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], 0]) & 0xf_ffff;
        CheckpointId(format!("{:011x}{random:05x}", unix_ms & 0xfff_ffff_ffff))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CheckpointId {
    type Err = CheckpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(CheckpointId(s.to_string()))
        } else {
            Err(CheckpointError::InvalidId(s.to_string()))
        }
    }
}

impl TryFrom<String> for CheckpointId {
    type Error = CheckpointError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<CheckpointId> for String {
    fn from(id: CheckpointId) -> String {
        id.0
    }
}

/// One saved state of the workspace, as the session log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Unique, sortable by time.
    pub id: CheckpointId,
    /// When it was made, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// What the caller said it was for (e.g. a tool call id).
    pub label: Option<String>,
    /// The checkpoint the diff stat is against, when there was one.
    pub parent: Option<CheckpointId>,
    /// The workspace's root tree.
    pub root: ObjectId,
    /// What the checkpoint does not hold, so a restore leaves it alone.
    pub untracked: Vec<Untracked>,
    /// Change against `parent` (against an empty tree for the first).
    pub stat: DiffStat,
    /// What making it cost.
    pub scan: ScanStats,
}

/// The on-disk record, `checkpoints/<id>.json`; the untracked list is an
/// object because paths need not be UTF-8.
#[derive(Serialize, Deserialize)]
pub(crate) struct Record {
    pub id: CheckpointId,
    pub unix_ms: u64,
    pub label: Option<String>,
    pub parent: Option<CheckpointId>,
    pub root: String,
    pub untracked: String,
    pub stat: DiffStat,
    pub scan: ScanStats,
}

impl Record {
    pub(crate) fn root(&self) -> Result<ObjectId, CheckpointError> {
        parse_id(&self.root)
    }

    pub(crate) fn untracked(&self) -> Result<ObjectId, CheckpointError> {
        parse_id(&self.untracked)
    }
}

fn parse_id(hex: &str) -> Result<ObjectId, CheckpointError> {
    ObjectId::from_hex(hex)
        .ok_or_else(|| CheckpointError::Corrupt(format!("{hex:?} is not an object id")))
}
