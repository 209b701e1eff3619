//! Proof that compaction lost nothing: every piece of content that ever
//! entered a history is still in it, in a transcript, or in a persisted file.
//!
//! Used by the property tests and by `whittle replay`, which reads the store
//! back rather than trusting the pipeline's reports.

use crate::history::History;
use crate::{Block, Content, Message};
use std::collections::HashSet;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use whittle_store::Store;

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Pieces (blocks, or whole string contents) checked.
    pub pieces: usize,
    /// Pieces found nowhere.
    pub lost_pieces: usize,
    /// Characters of the pieces found nowhere; must be 0.
    pub unrecoverable_chars: usize,
}

/// Checks every block of `original` (every message that was ever part of the
/// conversation) against what is left: the current history, every transcript
/// in the store, and every persisted output (by full text).
pub fn check(original: &[Message], current: &History, store: &Store) -> RecoveryReport {
    let mut kept: HashSet<u64> = HashSet::new();
    let add_message = |m: &Message, kept: &mut HashSet<u64>| {
        for piece in pieces(m) {
            kept.insert(piece.0);
        }
    };
    for m in current.messages() {
        add_message(m, &mut kept);
    }
    if let Ok(entries) = fs::read_dir(store.transcripts_dir()) {
        for entry in entries.flatten() {
            if let Ok(messages) = Store::read_transcript(&entry.path()) {
                for m in &messages {
                    add_message(m, &mut kept);
                }
            }
        }
    }
    let mut files: HashSet<u64> = HashSet::new();
    if let Ok(entries) = fs::read_dir(store.tool_results_dir()) {
        for entry in entries.flatten() {
            if let Ok(text) = fs::read_to_string(entry.path()) {
                files.insert(hash(&text));
            }
        }
    }

    let mut report = RecoveryReport::default();
    for m in original {
        for (key, chars, full_text) in pieces(m) {
            report.pieces += 1;
            let in_file = full_text.is_some_and(|t| files.contains(&t));
            if !kept.contains(&key) && !in_file {
                report.lost_pieces += 1;
                report.unrecoverable_chars += chars;
            }
        }
    }
    report
}

/// A message's pieces: (hash of its JSON, its size, hash of a tool result's full text).
fn pieces(m: &Message) -> Vec<(u64, usize, Option<u64>)> {
    match m.content() {
        Content::Text(t) => vec![(hash(&(m.role(), t)), t.chars().count(), None)],
        Content::Blocks(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let json = serde_json::to_string(b).unwrap_or_default();
                let full = match b {
                    Block::ToolResult(r) => Some(hash(&r.full_text())),
                    _ => None,
                };
                (hash(&json), m.block_chars(i).unwrap_or(0), full)
            })
            .collect(),
    }
}

fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}
