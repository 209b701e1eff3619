//! Saving a tool output while it is produced, so that memory stays bounded
//! whatever its size and nothing of it is lost.
//!
//! Small outputs stay in memory and come back whole; the first byte past
//! the inline limit moves everything to a file (`.partial` until the output
//! ends, so a crash leaves a file that says it is incomplete). Only the head
//! and tail are kept in memory, for the preview the model sees.

use crate::error::{StoreError, io_err};
use crate::hash::StreamingHash;
use crate::no_follow::no_follow;
use crate::placeholder::{Preview, persisted_output};
use crate::saved::SavedOutput;
use crate::store::Store;
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::path::PathBuf;
use whittle_protocol::{RedactStream, Redactor, group_digits};

impl Store {
    /// Starts saving a tool output as it is produced; see [`OutputWriter`].
    /// Nothing touches the disk until more than `inline_max_bytes` have
    /// come; at most `cap_bytes` are saved.
    pub fn output_writer(
        &self,
        tool_use_id: &str,
        inline_max_bytes: usize,
        cap_bytes: u64,
    ) -> OutputWriter {
        OutputWriter::new(self.clone(), tool_use_id, inline_max_bytes, cap_bytes)
            .redacting(self.redactor())
    }
}

/// Bytes of the start and of the end of a saved output kept for its
/// preview: enough for previews of several thousand characters.
const PREVIEW_BYTES: usize = 32 * 1024;

/// What a finished [`OutputWriter`] holds.
#[derive(Debug)]
pub enum CapturedOutput {
    /// The output was small: all of it, nothing written to disk.
    Inline(Vec<u8>),
    /// The output is in a file of the store.
    Saved {
        /// The file. Its `bytes` is less than `total_bytes` when the cap
        /// stopped the saving.
        saved: SavedOutput,
        /// The first bytes, for the preview.
        head: Vec<u8>,
        /// The last bytes received (saved or not), for the preview.
        tail: Vec<u8>,
        /// Every byte the output had.
        total_bytes: u64,
        /// Line breaks among them.
        lines: u64,
    },
    /// Writing the file failed part way (a full disk): only the head and
    /// tail survive, and the error says why.
    Unsaved {
        /// What went wrong.
        error: StoreError,
        /// The first bytes.
        head: Vec<u8>,
        /// The last bytes.
        tail: Vec<u8>,
        /// Every byte the output had.
        total_bytes: u64,
    },
}

impl CapturedOutput {
    /// What a model is shown of a finished output, `notes` (exit status and
    /// the like) after it: the whole text when it was small; else the one
    /// persisted-output marker, with the size, the notes and both ends, and
    /// the way to read the rest. Every tool that streams its output into the
    /// store shows it this way.
    pub fn into_text(self, notes: &[String], preview_chars: usize) -> String {
        match self {
            Self::Inline(bytes) => {
                let mut text = match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(e) => {
                        let mut text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                        if !text.ends_with('\n') {
                            text.push('\n');
                        }
                        text.push_str(NOT_UTF8);
                        text
                    }
                };
                if text.is_empty() {
                    text.push_str("(no output)");
                }
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&notes.join("\n"));
                text
            }
            Self::Saved {
                saved,
                head,
                tail,
                total_bytes,
                lines,
            } => {
                let mut note = format!(
                    "Size: {} bytes, {} lines. Read parts with read_file (offset/limit) or search it with grep.",
                    group_digits(total_bytes),
                    group_digits(lines)
                );
                if saved.bytes < total_bytes {
                    note.push_str(&format!(
                        "\n[only the first {} bytes were saved (the per-output limit); the last {} bytes were not, except the end shown below]",
                        group_digits(saved.bytes),
                        group_digits(total_bytes - saved.bytes)
                    ));
                }
                if std::str::from_utf8(&head).is_err() || std::str::from_utf8(&tail).is_err() {
                    note.push('\n');
                    note.push_str(NOT_UTF8);
                }
                for n in notes {
                    note.push('\n');
                    note.push_str(n);
                }
                let preview = Preview::of_ends(&head, &tail, total_bytes, preview_chars);
                persisted_output(&saved.path, &preview, Some(&note))
            }
            Self::Unsaved {
                error,
                head,
                tail,
                total_bytes,
            } => {
                let preview = Preview::of_ends(&head, &tail, total_bytes, preview_chars);
                let shown = persisted_output(Path::new("(not saved)"), &preview, None);
                format!(
                    "[the output ({} bytes) could not be saved: {error}; only its start and end are kept]\n{shown}\n{}",
                    group_digits(total_bytes),
                    notes.join("\n")
                )
            }
        }
    }
}

/// Said when an output held bytes that are not UTF-8.
const NOT_UTF8: &str = "[note: the output was not valid UTF-8; invalid bytes are shown as U+FFFD]";

/// A tool output being saved as it streams; see the module documentation.
#[derive(Debug)]
pub struct OutputWriter {
    store: Store,
    tool_use_id: String,
    inline_max: usize,
    cap: u64,
    /// Everything so far, while it fits the inline limit.
    buffer: Vec<u8>,
    spill: Spill,
    total: u64,
    lines: u64,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Known secrets, replaced before a byte is kept anywhere.
    redact: Option<RedactStream>,
}

#[derive(Debug)]
enum Spill {
    /// Still in memory.
    None,
    /// Streaming to a file (boxed: the hash state is large).
    File(Box<FileSpill>),
    /// Writing failed; the rest is only counted.
    Failed(StoreError),
}

/// An output streaming to `partial`, renamed to `path` when done.
#[derive(Debug)]
struct FileSpill {
    out: BufWriter<File>,
    path: PathBuf,
    partial: PathBuf,
    written: u64,
    hash: StreamingHash,
}

impl OutputWriter {
    fn new(store: Store, tool_use_id: &str, inline_max: usize, cap: u64) -> Self {
        OutputWriter {
            store,
            tool_use_id: tool_use_id.to_string(),
            inline_max,
            cap,
            buffer: Vec::new(),
            spill: Spill::None,
            total: 0,
            lines: 0,
            head: Vec::new(),
            tail: VecDeque::new(),
            redact: None,
        }
    }

    /// Replaces `redactor`'s secrets in the output before it is kept in
    /// memory or written to disk: a key a command prints never lands in
    /// the store.
    pub(super) fn redacting(mut self, redactor: &Redactor) -> Self {
        if !redactor.is_empty() {
            self.redact = Some(redactor.stream());
        }
        self
    }

    /// Bytes received so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Takes the next bytes of the output. Never fails: a write error is
    /// kept and reported by [`OutputWriter::finish`], and the bytes are
    /// still counted and kept for the preview.
    pub fn write(&mut self, bytes: &[u8]) {
        match self.redact.as_mut() {
            Some(stream) => {
                let clean = stream.push(bytes);
                self.keep(&clean);
            }
            None => self.keep(bytes),
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total += bytes.len() as u64;
        self.lines += bytes.iter().filter(|b| **b == b'\n').count() as u64;
        let room = PREVIEW_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        let keep = bytes.len().min(PREVIEW_BYTES);
        self.tail.extend(&bytes[bytes.len() - keep..]);
        let excess = self.tail.len().saturating_sub(PREVIEW_BYTES);
        self.tail.drain(..excess);

        if let Spill::None = self.spill {
            if self.buffer.len() + bytes.len() <= self.inline_max {
                self.buffer.extend_from_slice(bytes);
                return;
            }
            self.spill = match self.start_file() {
                Ok(spill) => spill,
                Err(e) => Spill::Failed(e),
            };
            let held = std::mem::take(&mut self.buffer);
            self.write_to_file(&held);
        }
        self.write_to_file(bytes);
    }

    fn start_file(&self) -> Result<Spill, StoreError> {
        let (path, partial) = self.store.reserve_output_path(&self.tool_use_id)?;
        let file = no_follow(OpenOptions::new().write(true).create(true).truncate(true))
            .open(&partial)
            .map_err(io_err(&partial))?;
        Ok(Spill::File(Box::new(FileSpill {
            out: BufWriter::with_capacity(64 * 1024, file),
            path,
            partial,
            written: 0,
            hash: StreamingHash::default(),
        })))
    }

    fn write_to_file(&mut self, bytes: &[u8]) {
        let Spill::File(spill) = &mut self.spill else {
            return;
        };
        let FileSpill {
            out,
            partial,
            written,
            hash,
            ..
        } = &mut **spill;
        let room = self.cap.saturating_sub(*written);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
        if take == 0 {
            return;
        }
        let part = &bytes[..take];
        if let Err(e) = out.write_all(part) {
            let error = io_err(partial)(e);
            self.spill = Spill::Failed(error);
            return;
        }
        hash.update(part);
        *written += take as u64;
    }

    /// Ends the output: small ones come back whole, big ones as their
    /// saved file (renamed from `.partial`) with head and tail.
    pub fn finish(mut self) -> CapturedOutput {
        if let Some(stream) = self.redact.take() {
            let rest = stream.finish();
            self.keep(&rest);
        }
        let head = self.head;
        let tail: Vec<u8> = self.tail.into();
        let total_bytes = self.total;
        let lines = self.lines;
        match self.spill {
            Spill::None => CapturedOutput::Inline(self.buffer),
            Spill::Failed(error) => CapturedOutput::Unsaved {
                error,
                head,
                tail,
                total_bytes,
            },
            Spill::File(spill) => {
                let FileSpill {
                    out,
                    path,
                    partial,
                    written,
                    hash,
                } = *spill;
                let done = out
                    .into_inner()
                    .map_err(|e| io_err(&partial)(e.into_error()))
                    .and_then(|file| file.sync_data().map_err(io_err(&partial)))
                    .and_then(|()| fs::rename(&partial, &path).map_err(io_err(&path)));
                if let Err(error) = done {
                    return CapturedOutput::Unsaved {
                        error,
                        head,
                        tail,
                        total_bytes,
                    };
                }
                let saved = SavedOutput {
                    path,
                    bytes: written,
                    hash: hash.finish(),
                };
                self.store.remember(&self.tool_use_id, saved.clone());
                CapturedOutput::Saved {
                    saved,
                    head,
                    tail,
                    total_bytes,
                    lines,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::ContentHash;

    #[test]
    fn small_outputs_stay_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut w = store.output_writer("t", 10, 1000);
        w.write(b"hello");
        w.write(b"12345");
        let CapturedOutput::Inline(bytes) = w.finish() else {
            panic!("expected inline")
        };
        assert_eq!(bytes, b"hello12345");
        assert!(!store.tool_results_dir().exists());
    }

    #[test]
    fn big_outputs_are_saved_whole_with_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut w = store.output_writer("t", 100, u64::MAX);
        let mut all = Vec::new();
        for i in 0..20_000 {
            let line = format!("{i}\n");
            all.extend_from_slice(line.as_bytes());
            w.write(line.as_bytes());
        }
        let CapturedOutput::Saved {
            saved,
            head,
            tail,
            total_bytes,
            lines,
        } = w.finish()
        else {
            panic!("expected saved")
        };
        assert_eq!(fs::read(&saved.path).unwrap(), all);
        assert_eq!(saved.bytes, all.len() as u64);
        assert_eq!(total_bytes, all.len() as u64);
        assert_eq!(lines, 20_000);
        assert_eq!(saved.hash, ContentHash::of(&all));
        assert!(head.starts_with(b"0\n1\n"));
        assert!(tail.ends_with(b"19999\n"));
        assert_eq!(store.saved_output("t"), Some(saved.clone()));
        assert!(store.partial_outputs("t").is_empty());
    }

    #[test]
    fn the_cap_is_the_only_cut_and_the_tail_is_still_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut w = store.output_writer("t", 10, 50);
        for _ in 0..10 {
            w.write(&[b'a'; 20]);
        }
        w.write(b"THE END");
        let CapturedOutput::Saved {
            saved,
            tail,
            total_bytes,
            ..
        } = w.finish()
        else {
            panic!("expected saved")
        };
        assert_eq!(saved.bytes, 50);
        assert_eq!(fs::read(&saved.path).unwrap().len(), 50);
        assert_eq!(total_bytes, 207);
        assert!(tail.ends_with(b"THE END"));
    }

    #[test]
    fn secrets_never_reach_memory_or_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let redactor = Redactor::new(["sk-live-0123456789"]);
        assert!(!redactor.is_empty());
        let store = store.redacting(redactor);
        let mut w = store.output_writer("t", 8, u64::MAX);
        w.write(b"key=sk-live-01234");
        w.write(b"56789 and more\n");
        let CapturedOutput::Saved { saved, head, .. } = w.finish() else {
            panic!("expected saved")
        };
        assert_eq!(fs::read(&saved.path).unwrap(), b"key=[REDACTED] and more\n");
        assert!(!String::from_utf8_lossy(&head).contains("sk-live"));
    }

    #[test]
    fn an_unfinished_output_is_left_as_partial() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut w = store.output_writer("t/1", 4, u64::MAX);
        w.write(b"0123456789");
        drop(w);
        let partial = store.partial_outputs("t/1");
        assert_eq!(partial.len(), 1);
        assert!(partial[0].to_string_lossy().ends_with(".txt.partial"));
        // The next output of the same id does not clobber it.
        let mut w = store.output_writer("t/1", 4, u64::MAX);
        w.write(b"abcdefghij");
        let CapturedOutput::Saved { saved, .. } = w.finish() else {
            panic!("expected saved")
        };
        assert_ne!(saved.path.with_extension("txt.partial"), partial[0]);
        assert_eq!(fs::read(&partial[0]).unwrap(), b"0123456789");
    }
}
