//! The store itself: where saved outputs and the transcript live, and the
//! one place that trusts a path read back out of a marker.
//!
//! Every file name derived from an id is sanitized, a path read back out of
//! a marker is trusted only if it resolves inside the store (a tool output
//! that merely *looks* like a marker cannot make us skip saving it, nor point
//! us at a file elsewhere), and each piece of content is written once:
//! outputs are saved under `tool-results/` (whole, streamed if need be, see
//! [`OutputWriter`]), and the transcript under `transcripts/` is append-only,
//! each archived message written once and naming saved outputs rather than
//! copying them (see [`Store::archive`]).

use crate::atomic::write_atomic;
use crate::error::{StoreError, io_err};
use crate::hash::ContentHash;
use crate::placeholder::saved_path_text;
use crate::saved::SavedOutput;
use crate::transcript::{self, ArchivedSpan, Transcript, WrittenLine};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use whittle_protocol::{Message, Redactor, ToolResult};

/// Longest file stem derived from an id.
pub const MAX_STEM_CHARS: usize = 120;

/// Persisted outputs under `ROOT/tool-results/`, the transcript under
/// `ROOT/transcripts/`. Cheap to clone; clones share the transcript being
/// appended to and the index of outputs saved so far, so the pipeline and
/// the tools of one conversation can hold the same store.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    shared: Arc<Mutex<Shared>>,
    /// Known secrets, replaced in everything the store writes.
    redactor: Redactor,
}

/// What the clones of one store share.
#[derive(Debug)]
struct Shared {
    /// Outputs saved through this store, by tool_use id (the newest per id):
    /// how the transcript knows it may name a file instead of copying text.
    saved: HashMap<String, SavedOutput>,
    transcript: Transcript,
    /// Paths read back out of markers that resolved to a file inside the
    /// store, by their text: canonical form and all (see
    /// [`Store::trusted_path`]). Resolving a path reads every folder on its
    /// way (a system call each), and micro_compact asks about every old
    /// result on every call that it runs.
    trusted: HashMap<String, PathBuf>,
    /// The root's canonical form, once it exists.
    canonical_root: Option<PathBuf>,
    /// Whether `tool-results/` was made: made once, not on every save.
    results_dir_made: bool,
    /// Files [`Store::save_ahead`] made that nothing has named since (no
    /// marker, transcript line or log reference), by tool_use id: removed
    /// when the last clone of the store goes, so that outputs saved for a
    /// compaction that never came leave no files behind. By id, because
    /// an archive asks about every result it writes (hashing a path walks
    /// its components).
    unnamed_ahead: HashMap<String, PathBuf>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Opened when the session started, written to by no compaction.
        self.transcript.remove_if_empty();
        if self.unnamed_ahead.is_empty() {
            return;
        }
        // Two ids whose file names collide share a file when their text is
        // the same: a file an id stands for, named, stays (an id may stand
        // for one file and have saved another ahead that nothing named).
        let standing: HashSet<&Path> = self
            .saved
            .iter()
            .filter(|(id, saved)| self.unnamed_ahead.get(*id) != Some(&saved.path))
            .map(|(_, saved)| saved.path.as_path())
            .collect();
        for path in self.unnamed_ahead.values() {
            if !standing.contains(path.as_path()) {
                // Best effort: a file left behind is only a file too many.
                let _ = fs::remove_file(path);
            }
        }
    }
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// A store rooted at `root`; nothing is created until the first write.
    /// Its transcript gets a fresh name (see [`Store::with_transcript_name`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let name = format!(
            "transcript-{}-{}-{}",
            now_ms(),
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        Self::with_transcript_name(root, &name)
    }

    /// A store rooted at `root` whose transcript is
    /// `transcripts/NAME.jsonl`: a session names it after itself, so that a
    /// resumed session appends to the same file and one file holds the
    /// whole archived conversation.
    pub fn with_transcript_name(root: impl Into<PathBuf>, name: &str) -> Self {
        let root = root.into();
        let transcript = Transcript::new(transcript_file(&root, name));
        Store {
            root,
            shared: Arc::new(Mutex::new(Shared {
                saved: HashMap::new(),
                transcript,
                trusted: HashMap::new(),
                canonical_root: None,
                results_dir_made: false,
                unnamed_ahead: HashMap::new(),
            })),
            redactor: Redactor::default(),
        }
    }

    /// Replaces `redactor`'s secrets in everything this store writes from
    /// now on: saved outputs (streamed ones too) and transcript lines.
    pub fn redacting(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// From now on this store (and its clones) appends to
    /// `transcripts/NAME.jsonl`: a harness names the transcript after its
    /// session once the session has an id.
    pub fn name_transcript(&self, name: &str) {
        let mut shared = self.lock();
        // One opened under the old name and never written to goes.
        shared.transcript.remove_if_empty();
        shared.transcript = Transcript::new(transcript_file(&self.root, name));
    }

    /// Opens this store's transcript now (creating it and its folder if
    /// need be) rather than at the first compaction. A session does so when
    /// it starts or resumes: a folder that cannot be written is found
    /// before any work is done, and the first compaction spends its time
    /// archiving, not creating a folder and a file or, resumed, reading the
    /// whole transcript back to count its lines.
    pub fn open_transcript(&self) -> Result<(), StoreError> {
        self.lock().transcript.ensure_open()
    }

    /// The directory everything is saved under, so a harness can say where
    /// a session's outputs went.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where persisted tool outputs go.
    pub fn tool_results_dir(&self) -> PathBuf {
        self.root.join("tool-results")
    }

    /// Where transcripts go.
    pub fn transcripts_dir(&self) -> PathBuf {
        self.root.join("transcripts")
    }

    /// This store's transcript (it may not exist yet).
    pub fn transcript_path(&self) -> PathBuf {
        self.lock().transcript.path().to_path_buf()
    }

    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a tool output in full and returns where it is.
    ///
    /// The same id with the same text maps to the same file (so saving twice
    /// is harmless and costs no second copy); a different text under a
    /// colliding name gets a suffix.
    pub fn persist_tool_result(
        &self,
        tool_use_id: &str,
        text: &str,
    ) -> Result<SavedOutput, StoreError> {
        let saved = self.persist(tool_use_id, text, false)?;
        let mut shared = self.lock();
        if shared.unnamed_ahead.get(tool_use_id) == Some(&saved.path) {
            shared.unnamed_ahead.remove(tool_use_id);
        }
        Ok(saved)
    }

    /// [`Store::persist_tool_result`] ahead of need: for a step that may
    /// replace the output later (and then asks for it by that function,
    /// which finds it saved). A file made here that nothing has named by
    /// the time the store goes is removed then. Only what names it through
    /// this store (or a clone) counts: another store that reuses the file
    /// (the same tool_use id and the same text) does not keep it. Ids are
    /// unique per call (whittle makes its own where a server sends none),
    /// so that takes one session open twice at the same time.
    pub fn save_ahead(&self, tool_use_id: &str, text: &str) -> Result<SavedOutput, StoreError> {
        self.persist(tool_use_id, text, true)
    }

    /// Saves `text` under `tool_use_id`; a file made `ahead` of need is
    /// recorded as not named yet.
    fn persist(
        &self,
        tool_use_id: &str,
        text: &str,
        ahead: bool,
    ) -> Result<SavedOutput, StoreError> {
        let text = &*self.redactor.redact(text);
        let hash = ContentHash::of(text.as_bytes());
        if let Some(known) = self.saved_output(tool_use_id)
            && known.hash == hash
            && known.bytes == text.len() as u64
            && known.path.is_file()
        {
            return Ok(known);
        }
        let dir = self.results_dir()?;
        let stem = sanitize_file_stem(tool_use_id);
        for n in 0..1000u32 {
            let path = dir.join(numbered_name(&stem, n, "txt"));
            match fs::read(&path) {
                Ok(existing) if existing == text.as_bytes() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    write_atomic(&path, text.as_bytes())
                        .or_else(|e| {
                            // The folder was removed since this store made it.
                            if e.kind() != io::ErrorKind::NotFound {
                                return Err(e);
                            }
                            fs::create_dir_all(&dir)?;
                            write_atomic(&path, text.as_bytes())
                        })
                        .map_err(io_err(&path))?;
                    if ahead {
                        self.lock()
                            .unnamed_ahead
                            .insert(tool_use_id.to_string(), path.clone());
                    }
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
            let saved = SavedOutput {
                path,
                bytes: text.len() as u64,
                hash,
            };
            self.remember(tool_use_id, saved.clone());
            return Ok(saved);
        }
        Err(StoreError::NameExhausted {
            dir,
            id: tool_use_id.to_string(),
        })
    }

    /// `tool-results/`, made if this store has not made it yet.
    fn results_dir(&self) -> Result<PathBuf, StoreError> {
        let dir = self.tool_results_dir();
        if !self.lock().results_dir_made {
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            self.lock().results_dir_made = true;
        }
        Ok(dir)
    }

    /// The output this store saved last for `tool_use_id`, if any.
    pub fn saved_output(&self, tool_use_id: &str) -> Option<SavedOutput> {
        self.lock().saved.get(tool_use_id).cloned()
    }

    /// What this store knows of the saved file at `path` (a canonical path
    /// inside the store, as [`Store::trusted_path`] gives): its size and
    /// hash, from memory when this store wrote it, else by reading it.
    pub fn describe_saved(&self, path: &Path) -> Result<SavedOutput, StoreError> {
        let known = self
            .lock()
            .saved
            .iter()
            .find(|(_, s)| fs::canonicalize(&s.path).is_ok_and(|p| p == path))
            .map(|(id, s)| (id.clone(), s.clone()));
        if let Some((id, known)) = known {
            // Asked about by a marker that names it: named.
            self.lock().unnamed_ahead.remove(&id);
            return Ok(known);
        }
        let bytes = fs::read(path).map_err(io_err(path))?;
        Ok(SavedOutput {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
            hash: ContentHash::of(&bytes),
        })
    }

    pub(crate) fn remember(&self, tool_use_id: &str, saved: SavedOutput) {
        self.lock().saved.insert(tool_use_id.to_string(), saved);
    }

    /// A free path for a new output file of `tool_use_id`, and the name it
    /// has while it is being written (`.partial`), so that a crash mid-write
    /// leaves a file that says it is incomplete.
    pub(crate) fn reserve_output_path(
        &self,
        tool_use_id: &str,
    ) -> Result<(PathBuf, PathBuf), StoreError> {
        let dir = self.tool_results_dir();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let stem = sanitize_file_stem(tool_use_id);
        for n in 0..1000u32 {
            let path = dir.join(numbered_name(&stem, n, "txt"));
            let partial = partial_path(&path);
            if !path.exists() && !partial.exists() {
                return Ok((path, partial));
            }
        }
        Err(StoreError::NameExhausted {
            dir,
            id: tool_use_id.to_string(),
        })
    }

    /// The output files of `tool_use_id` that a crash left half written.
    pub fn partial_outputs(&self, tool_use_id: &str) -> Vec<PathBuf> {
        let dir = self.tool_results_dir();
        let stem = sanitize_file_stem(tool_use_id);
        (0..1000u32)
            .map(|n| partial_path(&dir.join(numbered_name(&stem, n, "txt"))))
            .take_while(|p| p.exists() || p.with_extension("").exists())
            .filter(|p| p.exists())
            .collect()
    }

    /// Appends `messages` to this store's transcript, each once, and says
    /// which lines hold them. A tool result whose text this store has saved
    /// is written as a persisted-output marker naming the file, not copied.
    pub fn archive(&self, messages: &[Message]) -> Result<ArchivedSpan, StoreError> {
        self.archive_written(messages, &[])
    }

    /// The line the transcript would hold for `m` if it were archived now
    /// (before redaction, which archiving does): written while the model
    /// answers, so that the compaction that archives `m` only appends it.
    pub fn transcript_line(&self, m: &Message) -> WrittenLine {
        transcript::written_line(m, &self.lock().saved)
    }

    /// [`Store::archive`], with some lines written ahead: `written[i]`,
    /// where it is `Some`, must be [`Store::transcript_line`] of
    /// `messages[i]`. A line whose message had a result saved since is
    /// written again. What is written is what [`Store::archive`] writes.
    pub fn archive_written(
        &self,
        messages: &[Message],
        written: &[Option<WrittenLine>],
    ) -> Result<ArchivedSpan, StoreError> {
        let mut shared = self.lock();
        let Shared {
            saved,
            transcript,
            unnamed_ahead,
            ..
        } = &mut *shared;
        let span = transcript.append(messages, written, saved, &self.redactor)?;
        // The lines may name any output saved for their results (more
        // than they do, at worst: then a file is kept that could go).
        if !unnamed_ahead.is_empty() {
            for result in messages.iter().flat_map(Message::tool_results) {
                unnamed_ahead.remove(&result.tool_use_id);
            }
        }
        Ok(span)
    }

    /// Reads a transcript back. Lines are messages, except that saved
    /// outputs appear as their markers; a last line cut by a crash is
    /// ignored.
    pub fn read_transcript(path: &Path) -> Result<Vec<Message>, StoreError> {
        transcript::read(path)
    }

    /// Reads a persisted output back (the pipeline's one way to read the store).
    pub fn read_persisted(path: &Path) -> Result<String, StoreError> {
        fs::read_to_string(path).map_err(io_err(path))
    }

    /// The canonical form of `candidate` if it names an existing file inside
    /// this store; `None` for anything else, including paths that escape
    /// through `..` or symlinks.
    ///
    /// A path that resolved inside the store once is remembered with its
    /// canonical form (the folders on its way are the store's); asked
    /// again, it is trusted while that form is still a regular file, not a
    /// link: one system call, not one per folder.
    pub fn trusted_path(&self, candidate: &str) -> Option<PathBuf> {
        let known = self.lock().trusted.get(candidate).cloned();
        if let Some(path) = known {
            let regular = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
            return regular.then_some(path);
        }
        let root = self.canonical_root()?;
        let path = fs::canonicalize(candidate).ok()?;
        if !(path.starts_with(&root) && path.is_file()) {
            return None;
        }
        self.lock()
            .trusted
            .insert(candidate.to_owned(), path.clone());
        Some(path)
    }

    /// The root's canonical form (`None` while it does not exist), resolved once.
    fn canonical_root(&self) -> Option<PathBuf> {
        if let Some(root) = self.lock().canonical_root.clone() {
            return Some(root);
        }
        let root = fs::canonicalize(&self.root).ok()?;
        self.lock().canonical_root = Some(root.clone());
        Some(root)
    }

    /// The path a compaction marker in this result's content points to, if
    /// the content is such a marker *and* the path is a file inside this
    /// store. A tool output that imitates a marker gets `None`, so it is
    /// saved like any other.
    pub fn saved_path(&self, result: &ToolResult) -> Option<PathBuf> {
        self.trusted_path(saved_path_text(result.content_str()?)?)
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn transcript_file(root: &Path, name: &str) -> PathBuf {
    root.join("transcripts")
        .join(format!("{}.jsonl", sanitize_file_stem(name)))
}

/// `STEM.EXT`, then `STEM-1.EXT`, `STEM-2.EXT`, ... for colliding names.
fn numbered_name(stem: &str, n: u32, ext: &str) -> String {
    if n == 0 {
        format!("{stem}.{ext}")
    } else {
        format!("{stem}-{n}.{ext}")
    }
}

/// `x.txt` -> `x.txt.partial`.
fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".partial");
    PathBuf::from(name)
}

/// A file stem made from an id: only `[A-Za-z0-9._-]`, no leading dot, at
/// most [`MAX_STEM_CHARS`] characters. When the id had to change, a hash of
/// the original is appended so that distinct ids keep distinct names.
pub fn sanitize_file_stem(id: &str) -> String {
    let mut stem: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.starts_with('.') {
        stem.replace_range(0..1, "_");
    }
    let changed = stem != id || stem.is_empty() || stem.len() > MAX_STEM_CHARS;
    if changed {
        let hash = format!("-{:016x}", fnv1a(id.as_bytes()));
        stem.truncate(MAX_STEM_CHARS - hash.len());
        stem.push_str(&hash);
    }
    stem
}

/// 64-bit FNV-1a: stable across versions and platforms, which file names
/// derived from ids must be.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placeholder::{Preview, persisted_output, saved_placeholder};

    #[test]
    fn outputs_saved_ahead_that_nothing_named_go_with_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let clone = store.clone();
        let text = |id: &str| format!("output of {id}\n").repeat(20);
        let ahead: Vec<PathBuf> = ["unnamed", "asked", "archived", "described", "never_asked"]
            .iter()
            .map(|id| store.save_ahead(id, &text(id)).unwrap().path)
            .collect();
        // Saved before by someone else: not this store's to remove.
        let other = Store::new(dir.path());
        let theirs = other
            .persist_tool_result("theirs", &text("theirs"))
            .unwrap();
        drop(other);
        assert_eq!(store.save_ahead("theirs", &text("theirs")).unwrap(), theirs);
        // Named: by the step that asks for it, by a transcript line, by a marker.
        assert_eq!(
            store
                .persist_tool_result("asked", &text("asked"))
                .unwrap()
                .path,
            ahead[1]
        );
        let m = Message::user_blocks(vec![whittle_protocol::Block::tool_result(
            "archived",
            text("archived"),
            false,
        )]);
        let span = store.archive(&[m]).unwrap();
        store
            .describe_saved(&fs::canonicalize(&ahead[3]).unwrap())
            .unwrap();
        // Saved again ahead once asked for: still named.
        store.save_ahead("asked", &text("asked")).unwrap();
        assert!(ahead.iter().all(|p| p.is_file()));
        drop(store);
        // A clone still holds the store: nothing goes yet.
        assert!(ahead[0].is_file());
        drop(clone);
        assert!(!ahead[0].exists(), "the unnamed output stayed");
        assert!(!ahead[4].exists(), "the unnamed output stayed");
        for kept in [&ahead[1], &ahead[2], &ahead[3], &theirs.path] {
            assert!(kept.is_file(), "{kept:?} was removed");
        }
        // What the transcript names is there to read.
        let line = fs::read_to_string(&span.path).unwrap();
        assert!(line.contains(&ahead[2].display().to_string()), "{line}");
    }

    #[test]
    fn a_file_two_ids_share_stays_while_one_of_them_stands_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        // An id that is already the file name another id is given.
        let id = "tool/use";
        let twin = sanitize_file_stem(id);
        let text = "the same output\n".repeat(20);
        let first = store.save_ahead(id, &text).unwrap();
        let second = store.save_ahead(&twin, &text).unwrap();
        assert_eq!(first.path, second.path, "the two ids were given two files");
        store.persist_tool_result(&twin, &text).unwrap();
        drop(store);
        assert!(
            first.path.is_file(),
            "a file a named id stands for was removed"
        );

        // An id that saved one file ahead and came to stand for another:
        // `x` takes `x-1.txt`, which `x-1` saved ahead with the same text.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let unnamed = store.save_ahead("x", "one text\n").unwrap();
        store.save_ahead("x-1", "another text\n").unwrap();
        let named = store.persist_tool_result("x", "another text\n").unwrap();
        assert_ne!(named.path, unnamed.path);
        drop(store);
        assert!(named.path.is_file(), "the file `x` stands for was removed");
        assert!(!unnamed.path.exists(), "the file nothing named stayed");
    }

    #[test]
    fn hostile_ids_stay_inside_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("store"));
        let long = "a".repeat(10_000);
        let ids = [
            "../../etc/passwd",
            "",
            long.as_str(),
            "nul\0byte",
            "ünïcödé/名前",
            "..",
            ".",
            "/abs/path",
            "C:\\windows",
            "toolu_01ABC",
        ];
        let root = fs::canonicalize(dir.path()).unwrap().join("store");
        let mut paths = Vec::new();
        for id in ids {
            let p = store.persist_tool_result(id, id).unwrap().path;
            let canon = fs::canonicalize(&p).unwrap();
            assert!(
                canon.starts_with(root.join("tool-results")),
                "{id:?} -> {canon:?}"
            );
            let stem = p.file_stem().unwrap().to_str().unwrap();
            assert!(stem.len() <= MAX_STEM_CHARS);
            assert!(
                stem.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            );
            assert!(!stem.starts_with('.'));
            assert_eq!(fs::read_to_string(&p).unwrap(), id);
            paths.push(p);
        }
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), ids.len(), "distinct ids keep distinct files");
        assert_eq!(
            store.trusted_path(paths[0].to_str().unwrap()),
            Some(fs::canonicalize(&paths[0]).unwrap())
        );
    }

    #[test]
    fn same_id_other_text_gets_a_new_name_same_text_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let a = store.persist_tool_result("t", "one").unwrap();
        let b = store.persist_tool_result("t", "two").unwrap();
        let c = store.persist_tool_result("t", "one").unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(a, c);
        assert_eq!(a.bytes, 3);
        assert_eq!(a.hash, ContentHash::of(b"one"));
        assert_eq!(fs::read_to_string(&b.path).unwrap(), "two");
        // Another store (another process) finds the same file by content.
        let again = Store::new(dir.path())
            .persist_tool_result("t", "two")
            .unwrap();
        assert_eq!(again, b);
    }

    #[test]
    fn paths_outside_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let outside = dir.path().join("secret.txt");
        fs::write(&outside, "x").unwrap();
        let inside = store.persist_tool_result("t", "x").unwrap().path;
        let sneaky = format!("{}/../../secret.txt", inside.parent().unwrap().display());
        assert_eq!(store.trusted_path(outside.to_str().unwrap()), None);
        assert_eq!(store.trusted_path(&sneaky), None);
        assert_eq!(store.trusted_path("/etc/passwd"), None);
        assert!(store.trusted_path(inside.to_str().unwrap()).is_some());
    }

    #[test]
    fn a_path_trusted_once_is_trusted_while_it_is_the_same_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let outside = dir.path().join("secret.txt");
        fs::write(&outside, "x").unwrap();
        let inside = store.persist_tool_result("t", "x").unwrap().path;
        let text = inside.to_str().unwrap();
        let canon = fs::canonicalize(&inside).unwrap();
        assert_eq!(store.trusted_path(text), Some(canon.clone()));
        // Asked again (remembered), the same answer.
        assert_eq!(store.trusted_path(text), Some(canon.clone()));
        // Gone: not trusted; back: trusted again.
        fs::remove_file(&inside).unwrap();
        assert_eq!(store.trusted_path(text), None);
        fs::write(&inside, "x").unwrap();
        assert_eq!(store.trusted_path(text), Some(canon.clone()));
        // Replaced by a link to a file outside: not trusted.
        fs::remove_file(&inside).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, &inside).unwrap();
            assert_eq!(store.trusted_path(text), None);
            assert_eq!(Store::new(dir.path().join("s")).trusted_path(text), None);
        }
    }

    #[test]
    fn a_removed_results_folder_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        store.persist_tool_result("a", "x").unwrap();
        fs::remove_dir_all(store.tool_results_dir()).unwrap();
        let saved = store.persist_tool_result("b", "y").unwrap();
        assert_eq!(fs::read_to_string(saved.path).unwrap(), "y");
    }

    #[test]
    fn describe_saved_knows_its_own_files_and_reads_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let saved = store.persist_tool_result("t", "hello").unwrap();
        let canon = fs::canonicalize(&saved.path).unwrap();
        assert_eq!(store.describe_saved(&canon).unwrap().hash, saved.hash);
        let other = Store::new(dir.path());
        let read = other.describe_saved(&canon).unwrap();
        assert_eq!((read.bytes, read.hash), (saved.bytes, saved.hash));
    }

    fn as_result(s: String) -> ToolResult {
        match whittle_protocol::Block::tool_result("t", s, false) {
            whittle_protocol::Block::ToolResult(r) => r,
            _ => unreachable!(),
        }
    }

    #[test]
    fn markers_are_recognised_only_with_trusted_paths() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let path = store.persist_tool_result("t", "full").unwrap().path;
        let persisted = persisted_output(&path, &Preview::head("full output", 4), None);
        assert!(persisted.contains("Preview:\nfull\n..."));
        assert_eq!(
            store.saved_path(&as_result(persisted)),
            Some(std::fs::canonicalize(&path).unwrap())
        );
        assert!(
            store
                .saved_path(&as_result(saved_placeholder(&path)))
                .is_some()
        );
        let forged = saved_placeholder(Path::new("/etc/passwd"));
        assert!(store.saved_path(&as_result(forged)).is_none());
        let elsewhere = persisted_output(Path::new("/etc/hosts"), &Preview::head("x", 9), None);
        assert!(store.saved_path(&as_result(elsewhere)).is_none());
    }

    #[test]
    fn a_streamed_output_marker_has_a_note_and_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let path = store.persist_tool_result("t", "1\n2\n3\n").unwrap().path;
        let preview = Preview::head_and_tail("1\n".into(), "3\n".into(), 1_234_567);
        let marker = persisted_output(&path, &preview, Some("Size: 6 bytes\n[exit code: 0]"));
        assert!(marker.contains("\nSize: 6 bytes\n[exit code: 0]\nPreview (start and end):\n1\n"));
        assert!(marker.contains("[... 1,234,567 bytes not shown ...]\n3\n"));
        assert!(store.saved_path(&as_result(marker)).is_some());
    }
}
