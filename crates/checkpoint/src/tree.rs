use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::name;
use std::path::Path;

/// The mode bits a tree keeps and a restore sets: read, write and execute
/// for owner, group and others. The setuid, setgid and sticky bits
/// (`0o7000`) are dropped, not kept as `0o7777` would: the scan never
/// records them, so only a forged tree holds them, and a restore (run as
/// the user, outside the sandbox) must not make a setuid program or a
/// setgid folder from a repository's say-so.
pub(crate) const PERMISSION_BITS: u32 = 0o777;

/// What a tree entry is; a tree stores one directory's entries, as git's
/// trees do, so an unchanged directory is the same object in every
/// checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Symlink,
    Dir,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The file name's bytes: names need not be UTF-8.
    pub name: Vec<u8>,
    pub kind: Kind,
    /// Permission bits ([`PERMISSION_BITS`]); 0 for symlinks.
    pub mode: u32,
    pub id: ObjectId,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tree {
    /// Sorted by name.
    pub entries: Vec<Entry>,
}

const MAGIC: &[u8] = b"whittle-tree-1\n";

impl Tree {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.entries.len() * 64);
        out.extend_from_slice(MAGIC);
        for e in &self.entries {
            out.push(match e.kind {
                Kind::File => b'f',
                Kind::Symlink => b'l',
                Kind::Dir => b'd',
            });
            out.extend_from_slice(&e.mode.to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
            out.extend_from_slice(&e.name);
            out.extend_from_slice(&e.id.0);
        }
        out
    }

    /// Reads the tree object `file` holds. A name that is no plain entry
    /// name ([`name::is_plain`]) is refused, as entries out of order are
    /// (the scan writes them sorted, once each; lookups rely on it), and
    /// modes keep only their [`PERMISSION_BITS`].
    pub(crate) fn decode(bytes: &[u8], file: &Path) -> Result<Tree, CheckpointError> {
        let corrupt = || {
            CheckpointError::Corrupt(format!("the tree object {} does not parse", file.display()))
        };
        let mut rest = bytes.strip_prefix(MAGIC).ok_or_else(corrupt)?;
        let mut entries = Vec::new();
        while let Some((&kind, tail)) = rest.split_first() {
            let kind = match kind {
                b'f' => Kind::File,
                b'l' => Kind::Symlink,
                b'd' => Kind::Dir,
                _ => return Err(corrupt()),
            };
            let (mode, tail) = take_u32(tail).ok_or_else(corrupt)?;
            let (len, tail) = take_u32(tail).ok_or_else(corrupt)?;
            let len = len as usize;
            if tail.len() < len + 32 {
                return Err(corrupt());
            }
            let name = tail[..len].to_vec();
            if !name::is_plain(&name) {
                return Err(unsafe_name(file, &name));
            }
            if entries.last().is_some_and(|last: &Entry| last.name >= name) {
                return Err(corrupt());
            }
            let mut id = [0u8; 32];
            id.copy_from_slice(&tail[len..len + 32]);
            entries.push(Entry {
                name,
                kind,
                mode: mode & PERMISSION_BITS,
                id: ObjectId(id),
            });
            rest = &tail[len + 32..];
        }
        Ok(Tree { entries })
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// The error for an entry `name` in the tree object `file` that no scan
/// could have recorded.
pub(crate) fn unsafe_name(file: &Path, name: &[u8]) -> CheckpointError {
    CheckpointError::UnsafeName {
        path: file.to_path_buf(),
        name: String::from_utf8_lossy(name).into_owned(),
    }
}

pub(crate) fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, tail) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &[u8], kind: Kind, mode: u32) -> Entry {
        Entry {
            name: name.to_vec(),
            kind,
            mode,
            id: ObjectId([7; 32]),
        }
    }

    fn decode(entries: Vec<Entry>) -> Result<Tree, CheckpointError> {
        Tree::decode(&Tree { entries }.encode(), Path::new("objects/ab/cd"))
    }

    #[test]
    fn a_tree_reads_back_as_written() {
        let tree = Tree {
            entries: vec![
                entry(b".whittle", Kind::Dir, 0o755),
                entry(b"a", Kind::File, 0o644),
                entry(b"b\xff", Kind::Symlink, 0),
            ],
        };
        assert_eq!(decode(tree.entries.clone()).unwrap(), tree);
    }

    #[test]
    fn names_that_leave_their_folder_are_refused_naming_the_file() {
        for bad in crate::name::UNSAFE_NAMES.iter().copied() {
            let err = decode(vec![entry(bad, Kind::File, 0o644)]).unwrap_err();
            assert!(
                matches!(&err, CheckpointError::UnsafeName { path, .. } if path == Path::new("objects/ab/cd")),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn entries_out_of_order_or_twice_are_refused() {
        for names in [[&b"b"[..], b"a"], [b"a", b"a"]] {
            let entries = names.iter().map(|n| entry(n, Kind::File, 0o644)).collect();
            assert!(matches!(decode(entries), Err(CheckpointError::Corrupt(_))));
        }
    }

    #[test]
    fn modes_keep_only_permission_bits() {
        let tree = decode(vec![
            entry(b"d", Kind::Dir, 0o3775),
            entry(b"f", Kind::File, 0o106755),
        ])
        .unwrap();
        let modes: Vec<u32> = tree.entries.iter().map(|e| e.mode).collect();
        assert_eq!(modes, [0o775, 0o755]);
    }
}
