//! Writes a store's files the way a hostile repository could ship them:
//! objects, trees and checkpoint records in the crate's own on-disk format,
//! but with whatever content, names and modes the test wants.

use std::fs;
use std::path::Path;
use whittle_checkpoint::CheckpointId;

/// A tree entry as a forger writes it: kind (`b'f'`, `b'l'`, `b'd'`),
/// mode, name and the object's hex id.
pub type Entry<'a> = (u8, u32, &'a [u8], String);

/// The blake3 name of `bytes`, as the store names objects.
pub fn hex_of(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Puts `content` at the object name `hex` (not necessarily its hash).
pub fn put_object_as(store: &Path, hex: &str, content: &[u8]) {
    let dir = store.join("objects").join(&hex[..2]);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(&hex[2..]), content).unwrap();
}

/// Stores `content` under its own hash; returns the hash.
pub fn put_object(store: &Path, content: &[u8]) -> String {
    let hex = hex_of(content);
    put_object_as(store, &hex, content);
    hex
}

/// Where the object `hex` lives.
pub fn object_path(store: &Path, hex: &str) -> std::path::PathBuf {
    store.join("objects").join(&hex[..2]).join(&hex[2..])
}

/// A tree object's bytes (`whittle-tree-1`), entries in the order given.
pub fn tree_bytes(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = b"whittle-tree-1\n".to_vec();
    for (kind, mode, name, hex) in entries {
        out.push(*kind);
        out.extend_from_slice(&mode.to_le_bytes());
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name);
        let id = blake3::Hash::from_hex(hex).unwrap();
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// Stores a tree; returns its hash.
pub fn put_tree(store: &Path, entries: &[Entry<'_>]) -> String {
    put_object(store, &tree_bytes(entries))
}

/// Writes a checkpoint record named `id` whose root is `root`, copying the
/// rest (untracked list, stats) from the real record `like`.
pub fn put_checkpoint(store: &Path, like: &CheckpointId, id: &str, root: &str) -> CheckpointId {
    let records = store.join("checkpoints");
    let real = fs::read(records.join(format!("{like}.json"))).unwrap();
    let mut record: serde_json::Value = serde_json::from_slice(&real).unwrap();
    record["id"] = id.into();
    record["root"] = root.into();
    record["parent"] = serde_json::Value::Null;
    fs::write(
        records.join(format!("{id}.json")),
        serde_json::to_vec(&record).unwrap(),
    )
    .unwrap();
    id.parse().unwrap()
}
