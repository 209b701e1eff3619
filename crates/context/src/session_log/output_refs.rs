//! Tool outputs in the session log by reference: the text is in the store
//! (written there first), the log line names the file with its size and
//! hash. One copy on disk, a log that stays small whatever the tools print,
//! and a resume that can tell when a file it needs has gone.

use crate::group_digits;
use crate::{Block, Content, Message, ToolResult, ToolResultContent};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use whittle_store::{ContentHash, SavedMismatch, SavedOutput, Store, StoreError};
use whittle_store::{Preview, persisted_output};

/// Characters of a moved output shown in the log line itself: enough to
/// recognise it when reading the log by eye.
const LOG_PREVIEW_CHARS: usize = 200;

/// A tool result whose text is in the store, not in the log line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRef {
    /// Which message of the record (always 0 in a `message` record).
    #[serde(default)]
    pub message: usize,
    /// Which block of that message.
    pub block: usize,
    /// The file, relative to the store's root when inside it.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its content hash.
    pub hash: ContentHash,
    /// True when the history held the whole text (the log line has a marker
    /// in its place, and resuming puts the text back); false when the history
    /// itself held the marker (resuming only checks the file).
    pub restore: bool,
}

/// The form in which `messages` go into the log: every tool result whose
/// text is longer than `inline_max_chars` is saved in the store (no second
/// copy when the store has it already) and replaced by a persisted-output
/// marker, and results that already are such markers are referenced as they
/// are. The store is written before the log line, so a crash between the
/// two leaves an unreferenced file, never a reference to nothing.
pub fn log_form(
    messages: &[Message],
    store: &Store,
    inline_max_chars: usize,
) -> Result<(Vec<Message>, Vec<OutputRef>), StoreError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut refs = Vec::new();
    for (mi, m) in messages.iter().enumerate() {
        let Content::Blocks(blocks) = m.content() else {
            out.push(m.clone());
            continue;
        };
        let mut changed: Option<Vec<Option<Block>>> = None;
        for (bi, block) in blocks.iter().enumerate() {
            let Block::ToolResult(r) = block else {
                continue;
            };
            if let Some(path) = store.saved_path(r) {
                let saved = store.describe_saved(&path)?;
                refs.push(reference(
                    mi,
                    bi,
                    store,
                    &saved.path,
                    saved.bytes,
                    saved.hash,
                    false,
                ));
                continue;
            }
            let Some(text) = r.content_str() else {
                continue;
            };
            if text.chars().count() <= inline_max_chars {
                continue;
            }
            let saved = store.persist_tool_result(&r.tool_use_id, text)?;
            let marker =
                persisted_output(&saved.path, &Preview::head(text, LOG_PREVIEW_CHARS), None);
            changed.get_or_insert_with(|| vec![None; blocks.len()])[bi] =
                Some(with_content(r, marker));
            refs.push(reference(
                mi,
                bi,
                store,
                &saved.path,
                saved.bytes,
                saved.hash,
                true,
            ));
        }
        // The outputs moved to the store are not copied into the log form.
        out.push(
            changed
                .and_then(|replaced| m.with_blocks_replaced(replaced))
                .unwrap_or_else(|| m.clone()),
        );
    }
    Ok((out, refs))
}

fn reference(
    message: usize,
    block: usize,
    store: &Store,
    path: &Path,
    bytes: u64,
    hash: ContentHash,
    restore: bool,
) -> OutputRef {
    let root = fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().to_path_buf());
    let path = path
        .strip_prefix(&root)
        .or_else(|_| path.strip_prefix(store.root()))
        .map_or_else(|_| path.to_path_buf(), Path::to_path_buf);
    OutputRef {
        message,
        block,
        path,
        bytes,
        hash,
        restore,
    }
}

fn with_content(r: &ToolResult, text: String) -> Block {
    Block::ToolResult(r.with_content(ToolResultContent::Text(text)))
}

/// Puts the texts of `refs` back into `messages` (read from one record),
/// resolving relative paths against `root`. A file that is missing or no
/// longer what was saved becomes a marker saying so, and one line in
/// `problems`: the history stays valid and nothing pretends to be there.
pub(super) fn restore(
    messages: &mut [Message],
    refs: &[OutputRef],
    root: &Path,
    problems: &mut Vec<String>,
) {
    for r in refs {
        let Some(message) = messages.get_mut(r.message) else {
            continue;
        };
        let Some(Block::ToolResult(result)) = message.blocks().get(r.block) else {
            continue;
        };
        let path = root.join(&r.path);
        let text = match check(&path, r) {
            Ok(text) if r.restore => text,
            Ok(_) => continue,
            Err(why) => {
                problems.push(format!(
                    "the saved tool output {} {why}; its result in the resumed conversation now says so",
                    path.display()
                ));
                let note = format!(
                    "[saved output {} {why} since it was saved ({} bytes); this result's full text is lost]",
                    path.display(),
                    group_digits(r.bytes)
                );
                match result.content_str() {
                    Some(old) if !r.restore => format!("{note}\n{old}"),
                    _ => note,
                }
            }
        };
        let block = with_content(result, text);
        message.replace_block(r.block, block);
    }
}

/// The file's text when it is still what was saved; else why not.
fn check(path: &Path, r: &OutputRef) -> Result<String, SavedMismatch> {
    let saved = SavedOutput {
        path: path.to_path_buf(),
        bytes: r.bytes,
        hash: r.hash,
    };
    let bytes = saved.read_back()?;
    if !r.restore {
        return Ok(String::new());
    }
    String::from_utf8(bytes).map_err(|_| SavedMismatch::Changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_go_to_the_store_once_and_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let long = "line\n".repeat(1_000);
        let m = Message::user_blocks(vec![
            Block::tool_result("a", long.clone(), false),
            Block::tool_result("b", "short", false),
        ]);
        let (logged, refs) = log_form(std::slice::from_ref(&m), &store, 100).unwrap();
        assert_eq!(refs.len(), 1);
        assert!(refs[0].restore);
        assert!(refs[0].path.is_relative(), "{:?}", refs[0].path);
        assert!(logged[0].chars() < 1_000);
        // Logging again writes no second file.
        let (_, again) = log_form(std::slice::from_ref(&m), &store, 100).unwrap();
        assert_eq!(again, refs);
        assert_eq!(fs::read_dir(store.tool_results_dir()).unwrap().count(), 1);

        let mut problems = Vec::new();
        let mut read = logged.clone();
        restore(&mut read, &refs, dir.path(), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read[0], m);

        // Deleted: a marker that says so, and one problem line.
        fs::remove_file(dir.path().join(&refs[0].path)).unwrap();
        let mut read = logged;
        restore(&mut read, &refs, dir.path(), &mut problems);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("is missing"), "{}", problems[0]);
        let text = read[0].tool_results().next().unwrap().text();
        assert!(
            text.contains("is missing") && text.contains("lost"),
            "{text}"
        );
    }

    #[test]
    fn markers_already_in_the_history_are_checked_not_restored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let saved = store.persist_tool_result("a", "whole output").unwrap();
        let marker = persisted_output(&saved.path, &Preview::head("whole", 5), None);
        let m = Message::user_blocks(vec![Block::tool_result("a", marker, false)]);
        let (logged, refs) = log_form(std::slice::from_ref(&m), &store, 0).unwrap();
        assert_eq!(logged[0], m);
        assert!(!refs[0].restore);
        let mut problems = Vec::new();
        let mut read = logged.clone();
        restore(&mut read, &refs, dir.path(), &mut problems);
        assert_eq!(read[0], m);
        fs::write(&saved.path, "edited").unwrap();
        restore(&mut read, &refs, dir.path(), &mut problems);
        assert!(problems[0].contains("has changed"), "{problems:?}");
        assert!(
            read[0]
                .tool_results()
                .next()
                .unwrap()
                .text()
                .starts_with("[saved output")
        );
    }
}
