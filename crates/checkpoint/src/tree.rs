use crate::error::CheckpointError;
use crate::hash::ObjectId;

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
    /// Permission bits (`0o777`); 0 for symlinks.
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

    pub(crate) fn decode(bytes: &[u8]) -> Result<Tree, CheckpointError> {
        let corrupt = || CheckpointError::Corrupt("a tree object does not parse".into());
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
            let mut id = [0u8; 32];
            id.copy_from_slice(&tail[len..len + 32]);
            entries.push(Entry {
                name,
                kind,
                mode,
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

pub(crate) fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, tail) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), tail))
}
