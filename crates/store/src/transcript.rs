//! The transcript: one append-only JSONL file per conversation, a message a
//! line, each archived message written once.
//!
//! Every step that takes messages out of the context appends only those not
//! archived before, so archiving costs what it removes, never the whole
//! history again: a long session's transcripts grow linearly, not
//! quadratically. A tool result whose text the store has already saved is
//! written as a marker naming that file, so the text exists once on disk.

use crate::error::{StoreError, io_err};
use crate::hash::ContentHash;
use crate::no_follow::no_follow;
use crate::placeholder::{Preview, persisted_output};
use crate::saved::SavedOutput;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use whittle_protocol::{Block, Content, Message, Redactor};

/// Characters of a saved output's preview inside a transcript line: enough
/// to say what it was; the file holds the rest.
const TRANSCRIPT_PREVIEW_CHARS: usize = 200;

/// A message's transcript line written before it is archived
/// ([`Store::transcript_line`](crate::Store::transcript_line)), with what
/// the store had saved for each of its tool results then: the line holds
/// while that is unchanged (a result saved since would be named in the line,
/// not copied).
#[derive(Clone, Debug)]
pub struct WrittenLine {
    json: String,
    seen: Vec<Option<SavedOutput>>,
}

/// What `saved` holds for each tool result of `m`, in order.
fn saved_for_results(
    m: &Message,
    saved: &HashMap<String, SavedOutput>,
) -> Vec<Option<SavedOutput>> {
    m.tool_results()
        .map(|r| saved.get(&r.tool_use_id).cloned())
        .collect()
}

/// Whether `line`, written for `m`, still holds: the store saved nothing
/// for its results since.
fn still_holds(line: &WrittenLine, m: &Message, saved: &HashMap<String, SavedOutput>) -> bool {
    let mut results = m.tool_results();
    let same = line.seen.iter().all(|seen| {
        results
            .next()
            .is_some_and(|r| saved.get(&r.tool_use_id) == seen.as_ref())
    });
    same && results.next().is_none()
}

/// `m`'s line as the transcript writes it now, unredacted.
fn line_json(m: &Message, saved: &HashMap<String, SavedOutput>) -> String {
    match naming_saved_outputs(m, saved) {
        Some(named) => whittle_protocol::message_json(&named),
        // serde_json's bytes, written faster (most of an archive's cost).
        None => whittle_protocol::message_json(m),
    }
}

/// [`line_json`], with what it depends on.
pub(super) fn written_line(m: &Message, saved: &HashMap<String, SavedOutput>) -> WrittenLine {
    WrittenLine {
        json: line_json(m, saved),
        seen: saved_for_results(m, saved),
    }
}

/// Where an archive step put its messages: lines `first_line..=last_line`
/// (1-based) of `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedSpan {
    /// The transcript.
    pub path: PathBuf,
    /// The line of the first message archived.
    pub first_line: u64,
    /// The line of the last message archived (`first_line - 1` when none was).
    pub last_line: u64,
}

#[derive(Debug)]
pub(super) struct Transcript {
    path: PathBuf,
    open: Option<OpenTranscript>,
}

#[derive(Debug)]
struct OpenTranscript {
    file: File,
    /// Lines in the file.
    lines: u64,
    /// Whether this store holds the file's shared lock: every store that
    /// has the file open does, so that one removing it empty
    /// ([`Transcript::remove_if_empty`]) can tell that none other has.
    locked: bool,
}

/// Opens of a transcript tried while another store removes it.
const OPEN_ATTEMPTS: usize = 3;

impl OpenTranscript {
    /// Opens (or creates) the file, counts its lines, and drops a last line
    /// that a crash cut short, so new lines start on a fresh one.
    fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let mut attempt = 0;
        let (mut file, locked) = loop {
            attempt += 1;
            let file = no_follow(OpenOptions::new().read(true).append(true).create(true))
                .open(path)
                .map_err(io_err(path))?;
            // Best effort: a file system without locks only keeps an
            // empty transcript that could have gone.
            let locked = file.lock_shared().is_ok();
            // Removed, empty, by another store between the open and the
            // lock: lines written to it would be lost; open it anew.
            let removed = file.metadata().is_ok_and(|m| m.nlink() == 0);
            if !removed || attempt >= OPEN_ATTEMPTS {
                break (file, locked);
            }
        };
        let mut existing = Vec::new();
        file.read_to_end(&mut existing).map_err(io_err(path))?;
        let keep = existing
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        if keep < existing.len() {
            file.set_len(keep as u64).map_err(io_err(path))?;
        }
        let lines = existing[..keep].iter().filter(|b| **b == b'\n').count() as u64;
        Ok(OpenTranscript {
            file,
            lines,
            locked,
        })
    }
}

impl Transcript {
    pub(super) fn new(path: PathBuf) -> Self {
        Transcript { path, open: None }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file if this store opened it and it is still empty: a
    /// session that never compacted leaves no transcript behind. Only when
    /// no other store has it open (the exclusive lock is free: each holds
    /// a shared one), so a session open twice never loses the other's
    /// lines to a removed file; checked through the open file, so lines
    /// another writer appended keep it.
    pub(super) fn remove_if_empty(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let empty = open.locked
            && open.lines == 0
            && open.file.try_lock().is_ok()
            && open.file.metadata().is_ok_and(|m| m.len() == 0);
        drop(open);
        if empty {
            // Best effort: an empty file left behind is only a file too many.
            let _ = fs::remove_file(&self.path);
        }
    }

    /// Opens the file now if it is not open yet.
    pub(super) fn ensure_open(&mut self) -> Result<(), StoreError> {
        self.open().map(|_| ())
    }

    /// The open file, opened on first use.
    fn open(&mut self) -> Result<&mut OpenTranscript, StoreError> {
        let open = match self.open.take() {
            Some(open) => open,
            None => OpenTranscript::open(&self.path)?,
        };
        Ok(self.open.insert(open))
    }

    /// Appends `messages`; `written[i]`, when there is one, is the line
    /// of `messages[i]` written earlier, used if it still holds.
    pub(super) fn append(
        &mut self,
        messages: &[Message],
        written: &[Option<WrittenLine>],
        saved: &HashMap<String, SavedOutput>,
        redactor: &Redactor,
    ) -> Result<ArchivedSpan, StoreError> {
        let path = self.path.clone();
        let open = self.open()?;
        let mut body = Vec::with_capacity(messages.iter().map(|m| m.chars() + 1).sum());
        for (i, m) in messages.iter().enumerate() {
            let json = match written.get(i) {
                Some(Some(line)) if still_holds(line, m, saved) => {
                    Cow::Borrowed(line.json.as_str())
                }
                _ => Cow::Owned(line_json(m, saved)),
            };
            body.extend_from_slice(redactor.redact(&json).as_bytes());
            body.push(b'\n');
        }
        // One write: a crash leaves whole lines and at most one cut one.
        open.file.write_all(&body).map_err(io_err(&path))?;
        let first_line = open.lines + 1;
        open.lines += messages.len() as u64;
        Ok(ArchivedSpan {
            path,
            first_line,
            last_line: open.lines,
        })
    }
}

/// `m` with the text of every tool result the store saved replaced by a
/// marker naming the file; `None` when nothing needed replacing.
fn naming_saved_outputs(m: &Message, saved: &HashMap<String, SavedOutput>) -> Option<Message> {
    let Content::Blocks(blocks) = m.content() else {
        return None;
    };
    // Most messages have no saved output: no list of replacements for them.
    if !m.tool_results().any(|r| saved.contains_key(&r.tool_use_id)) {
        return None;
    }
    let markers: Vec<Option<Block>> = blocks
        .iter()
        .map(|block| saved_marker(block, saved))
        .collect();
    if markers.iter().all(Option::is_none) {
        return None;
    }
    m.with_blocks_replaced(markers)
}

/// The marker that names the file `block`'s output is saved in, when it is
/// a tool result the store saved with this very text.
fn saved_marker(block: &Block, saved: &HashMap<String, SavedOutput>) -> Option<Block> {
    let Block::ToolResult(r) = block else {
        return None;
    };
    let file = saved.get(&r.tool_use_id)?;
    let text = r.full_text();
    if file.bytes != text.len() as u64 || file.hash != ContentHash::of(text.as_bytes()) {
        return None;
    }
    let marker = persisted_output(
        &file.path,
        &Preview::head(&text, TRANSCRIPT_PREVIEW_CHARS),
        None,
    );
    Some(Block::ToolResult(r.with_content(
        whittle_protocol::ToolResultContent::Text(marker),
    )))
}

/// Reads a transcript back; a last line cut by a crash is ignored.
pub(super) fn read(path: &Path) -> Result<Vec<Message>, StoreError> {
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(m) => out.push(m),
            Err(_) if i + 1 == lines.len() && !complete => break,
            Err(e) => {
                return Err(StoreError::BadTranscript {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::store::Store;
    use whittle_protocol::{Block, Message};

    #[test]
    fn appends_once_with_line_numbers_and_survives_a_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::with_transcript_name(dir.path(), "s1");
        let a = vec![Message::user("a\nb"), Message::assistant("ü")];
        let span = store.archive(&a).unwrap();
        assert_eq!((span.first_line, span.last_line), (1, 2));
        let b = vec![Message::user("c")];
        let span = store.archive(&b).unwrap();
        assert_eq!((span.first_line, span.last_line), (3, 3));
        assert_eq!(span.path, dir.path().join("transcripts/s1.jsonl"));
        // A crash cut the next line; a new store (a resumed session) heals it.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&span.path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"role\":\"us").unwrap();
        let all: Vec<Message> = a.iter().chain(&b).cloned().collect();
        assert_eq!(Store::read_transcript(&span.path).unwrap(), all);
        let resumed = Store::with_transcript_name(dir.path(), "s1");
        let span = resumed.archive(&[Message::assistant("d")]).unwrap();
        assert_eq!(span.first_line, 4);
        let read = Store::read_transcript(&span.path).unwrap();
        assert_eq!(read.len(), 4);
        assert_eq!(read[3], Message::assistant("d"));
    }

    #[test]
    fn opened_ahead_a_resumed_transcript_is_healed_and_counted_before_any_archive() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::with_transcript_name(dir.path(), "s1");
        store.open_transcript().unwrap();
        let path = dir.path().join("transcripts/s1.jsonl");
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        store
            .archive(&[Message::user("a"), Message::user("b")])
            .unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"role\":\"us").unwrap();
        let resumed = Store::with_transcript_name(dir.path(), "s1");
        resumed.open_transcript().unwrap();
        // Healed when opened, not at the first archive; opening again is a no-op.
        assert!(std::fs::read(&path).unwrap().ends_with(b"}\n"));
        resumed.open_transcript().unwrap();
        let span = resumed.archive(&[Message::assistant("c")]).unwrap();
        assert_eq!((span.first_line, span.last_line), (3, 3));
        assert_eq!(Store::read_transcript(&path).unwrap().len(), 3);
        drop(resumed);
        assert!(path.exists(), "a transcript with lines stays");
    }

    #[test]
    fn a_transcript_another_store_has_open_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::with_transcript_name(dir.path(), "s1");
        let second = Store::with_transcript_name(dir.path(), "s1");
        first.open_transcript().unwrap();
        second.open_transcript().unwrap();
        let path = first.transcript_path();
        drop(first);
        assert!(path.exists(), "the second store still holds it");
        second.archive(&[Message::user("kept")]).unwrap();
        drop(second);
        assert_eq!(Store::read_transcript(&path).unwrap().len(), 1);
    }

    #[test]
    fn a_transcript_that_is_a_link_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("bashrc");
        std::fs::write(&victim, "mine").unwrap();
        std::fs::create_dir_all(dir.path().join("transcripts")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("transcripts/s1.jsonl")).unwrap();
        let store = Store::with_transcript_name(dir.path(), "s1");
        let err = store.open_transcript().unwrap_err();
        assert!(matches!(err, crate::StoreError::Link { .. }), "{err}");
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert!(store.archive(&[Message::user("a")]).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
    }

    #[test]
    fn a_transcript_opened_and_never_written_goes_with_its_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::with_transcript_name(dir.path(), "s1");
        store.open_transcript().unwrap();
        let path = store.transcript_path();
        assert!(path.exists());
        let clone = store.clone();
        drop(store);
        assert!(path.exists(), "a clone still holds it");
        drop(clone);
        assert!(!path.exists());
    }

    #[test]
    fn saved_outputs_are_named_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let big = "x".repeat(5_000);
        let saved = store.persist_tool_result("t1", &big).unwrap();
        let m = Message::user_blocks(vec![
            Block::tool_result("t1", big.clone(), false),
            Block::tool_result("t2", "small", false),
        ]);
        let span = store.archive(std::slice::from_ref(&m)).unwrap();
        let text = std::fs::read_to_string(&span.path).unwrap();
        assert!(text.len() < 1_000, "{}", text.len());
        assert!(text.contains(&saved.path.display().to_string()));
        assert!(text.contains("small"));
        // A result whose text differs from what was saved under its id is copied.
        let other = Message::user_blocks(vec![Block::tool_result("t1", "changed", false)]);
        let span = store.archive(&[other]).unwrap();
        assert_eq!(
            Store::read_transcript(&span.path).unwrap()[1]
                .tool_results()
                .next()
                .unwrap()
                .text(),
            "changed"
        );
    }
}
