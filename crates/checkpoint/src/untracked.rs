use crate::error::CheckpointError;
use crate::tree::take_u32;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A path a checkpoint does not hold. A restore leaves it alone, and the
/// caller can say so ("target/ was not restored: ignored").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Untracked {
    /// Relative to the workspace. An ignored directory is listed once,
    /// not file by file.
    pub path: PathBuf,
    /// Why it is not held.
    pub reason: UntrackedReason,
}

/// Why a path is not in a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UntrackedReason {
    /// Matched by a `.gitignore` (or `.git/info/exclude`).
    Ignored,
    /// A regular file over the size cap (or too large to hold in memory).
    TooLarge,
    /// A FIFO, socket or device: never opened.
    Special,
    /// Could not be read (permission denied, vanished while read).
    Unreadable,
}

const MAGIC: &[u8] = b"whittle-untracked-1\n";

pub(crate) fn encode(list: &[Untracked]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for u in list {
        out.push(match u.reason {
            UntrackedReason::Ignored => b'i',
            UntrackedReason::TooLarge => b'l',
            UntrackedReason::Special => b's',
            UntrackedReason::Unreadable => b'u',
        });
        let bytes = u.path.as_os_str().as_bytes();
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<Untracked>, CheckpointError> {
    let corrupt = || CheckpointError::Corrupt("an untracked list does not parse".into());
    let mut rest = bytes.strip_prefix(MAGIC).ok_or_else(corrupt)?;
    let mut out = Vec::new();
    while let Some((&reason, tail)) = rest.split_first() {
        let reason = match reason {
            b'i' => UntrackedReason::Ignored,
            b'l' => UntrackedReason::TooLarge,
            b's' => UntrackedReason::Special,
            b'u' => UntrackedReason::Unreadable,
            _ => return Err(corrupt()),
        };
        let (len, tail) = take_u32(tail).ok_or_else(corrupt)?;
        let len = len as usize;
        let path = tail.get(..len).ok_or_else(corrupt)?;
        out.push(Untracked {
            path: PathBuf::from(OsStr::from_bytes(path)),
            reason,
        });
        rest = &tail[len..];
    }
    Ok(out)
}
