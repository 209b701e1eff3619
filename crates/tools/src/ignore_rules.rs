//! The ignore rules `glob` and `grep` honour: `.ignore`, `.gitignore` and
//! `.git/info/exclude` in the folders searched and in the folders above
//! them, then the user's global git excludes, with ripgrep's precedence.
//!
//! whittle reads these files itself rather than leaving them to the
//! `ignore` crate's walker, which opens whatever it finds at those names,
//! outside the sandbox, and a command (or the repository) may have put
//! anything there: a FIFO blocks the open for ever, a link to `/dev/zero`
//! is read without end, a link may lead out of the workspace. Here a file
//! is read only when it is a regular file, reached through no link, of at
//! most [`MAX_IGNORE_FILE_BYTES`]. Any other is not read, and
//! [`IgnoreRules::not_read`] names it for the tool's output: its rules not
//! applied, a search shows more than it would, never less unsaid.

use std::fs;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use whittle_sandbox::{ReadError, read_regular_file};

/// Largest ignore file read.
pub(crate) const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;

/// The most ignore-file bytes one walk compiles, all folders together.
/// Compiled patterns take far more memory than their text (a 120 KB file
/// of wildcards, about 23 MB), and a command can put one in each of a
/// thousand nested folders (hard links cost no disk); past this, the rules
/// of further files are not applied, and the output says so. A real
/// repository's ignore files come to kilobytes.
pub(crate) const MAX_IGNORE_BYTES_PER_WALK: u64 = 2 << 20;

/// A folder's ignore files, relative to it, strongest first: `.ignore`
/// beats `.gitignore` at any depth, and both beat git's own exclude list.
const IGNORE_FILES: [&[&str]; 3] = [&[".ignore"], &[".gitignore"], &[".git", "info", "exclude"]];

/// Why an ignore file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotReadWhy {
    /// It, or a folder on the way to it (`.git`), is a link.
    #[error("a link")]
    Link,
    /// It is a FIFO, a device, a socket or a folder.
    #[error("not a regular file")]
    NotRegular,
    /// It is larger than [`MAX_IGNORE_FILE_BYTES`].
    #[error("larger than {} MiB", MAX_IGNORE_FILE_BYTES >> 20)]
    TooLarge,
    /// The walk already compiled [`MAX_IGNORE_BYTES_PER_WALK`].
    #[error(
        "past the {} MiB of ignore rules one search compiles",
        MAX_IGNORE_BYTES_PER_WALK >> 20
    )]
    OverBudget,
    /// It could not be opened or read.
    #[error("{0}")]
    Io(std::io::Error),
    /// Its patterns together do not compile (a line that is not a pattern
    /// is only passed over).
    #[error("its patterns do not compile: {0}")]
    Patterns(ignore::Error),
}

impl From<ReadError> for NotReadWhy {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io { source, .. } => NotReadWhy::Io(source),
            ReadError::NotRegular { .. } => NotReadWhy::NotRegular,
            ReadError::TooLarge { .. } => NotReadWhy::TooLarge,
        }
    }
}

/// An ignore file (or the `.git` on the way to one) that was not read.
#[derive(Debug)]
pub(crate) struct NotRead {
    /// Where it is.
    pub path: PathBuf,
    /// Why it was not read.
    pub why: NotReadWhy,
}

/// One folder's rules, one matcher per file of [`IGNORE_FILES`] (empty
/// when the file is absent or not read).
struct FolderRules([Gitignore; 3]);

/// The rules in force during one walk from a search root.
pub(crate) struct IgnoreRules {
    /// The search root as the walk names it.
    root: PathBuf,
    /// The search root with links resolved: the folders above it are the
    /// real ones, as git sees them.
    real_root: PathBuf,
    /// The rules of the folders above the root, nearest first; matched
    /// against paths under `real_root`.
    above: Vec<FolderRules>,
    /// The rules of the folders on the walk's current path, the root first
    /// (index = depth).
    walked: Vec<FolderRules>,
    /// The user's global git excludes (`core.excludesFile`): the user's own
    /// configuration outside any repository, read as git reads it.
    global: Gitignore,
    not_read: Vec<NotRead>,
    /// Ignore-file bytes compiled so far in this walk.
    compiled_bytes: u64,
}

impl IgnoreRules {
    /// The rules for a walk from `root`, with those of the folders above
    /// it already read. A root that is not a folder has no entries to rule
    /// on, so nothing is read for it.
    pub(crate) fn new(root: &Path) -> Self {
        let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut rules = IgnoreRules {
            root: root.to_path_buf(),
            real_root,
            above: Vec::new(),
            walked: Vec::new(),
            global: Gitignore::empty(),
            not_read: Vec::new(),
            compiled_bytes: 0,
        };
        if !fs::metadata(root).is_ok_and(|m| m.is_dir()) {
            return rules;
        }
        let parents: Vec<PathBuf> = rules
            .real_root
            .ancestors()
            .skip(1)
            .map(Path::to_path_buf)
            .collect();
        for dir in parents {
            let folder = rules.read_folder(&dir);
            rules.above.push(folder);
        }
        rules.global = GitignoreBuilder::new(&rules.real_root).build_global().0;
        rules
    }

    /// Reads the rules of the folder at `dir`, `depth` below the root, as
    /// the walk goes into it.
    pub(crate) fn enter(&mut self, dir: &Path, depth: usize) {
        self.walked.truncate(depth);
        let folder = self.read_folder(dir);
        self.walked.push(folder);
    }

    /// True when the entry at `path`, `depth` below the root, is ignored.
    /// The nearest file that has a say decides, `.ignore` files first, then
    /// `.gitignore`, then git's exclude lists, then the global excludes.
    pub(crate) fn ignores(&mut self, path: &Path, depth: usize, is_dir: bool) -> bool {
        self.walked.truncate(depth);
        let real = path
            .strip_prefix(&self.root)
            .map_or_else(|_| path.to_path_buf(), |rel| self.real_root.join(rel));
        for kind in 0..IGNORE_FILES.len() {
            let walked = self
                .walked
                .iter()
                .rev()
                .map(|f| f.0[kind].matched(path, is_dir));
            let above = self.above.iter().map(|f| f.0[kind].matched(&real, is_dir));
            if let Some(m) = walked.chain(above).find(|m| !m.is_none()) {
                return m.is_ignore();
            }
        }
        self.global.matched(&real, is_dir).is_ignore()
    }

    /// The ignore files met so far that were not read, in the order met.
    pub(crate) fn not_read(&self) -> &[NotRead] {
        &self.not_read
    }

    fn read_folder(&mut self, dir: &Path) -> FolderRules {
        FolderRules(IGNORE_FILES.map(|parts| {
            let path = parts.iter().fold(dir.to_path_buf(), |p, part| p.join(part));
            let compiled = &mut self.compiled_bytes;
            match read_ignore_file(dir, parts).and_then(|bytes| match bytes {
                None => Ok(Gitignore::empty()),
                Some(bytes) => {
                    *compiled = compiled.saturating_add(bytes.len() as u64);
                    if *compiled > MAX_IGNORE_BYTES_PER_WALK {
                        return Err(NotRead {
                            path: path.clone(),
                            why: NotReadWhy::OverBudget,
                        });
                    }
                    compile(dir, &path, &bytes)
                }
            }) {
                Ok(rules) => rules,
                Err(not_read) => {
                    self.not_read.push(not_read);
                    Gitignore::empty()
                }
            }
        }))
    }
}

/// The bytes of the ignore file at `dir/<parts>`, or `None` when there is
/// none. No part may be a link; the folders on the way must be folders (a
/// `.git` file, a worktree's or submodule's pointer, is not followed: the
/// place it names is the repository's choice); the file itself must be a
/// regular file of at most [`MAX_IGNORE_FILE_BYTES`], or it is not opened
/// at all. It is then read by an open that cannot block and a read that
/// stops at the limit, so that a FIFO or a link to a device put there since
/// it was looked at is refused all the same.
fn read_ignore_file(dir: &Path, parts: &[&str]) -> Result<Option<Vec<u8>>, NotRead> {
    let mut path = dir.to_path_buf();
    let not_read = |path: &Path, why| NotRead {
        path: path.to_path_buf(),
        why,
    };
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(not_read(&path, NotReadWhy::Io(e))),
        };
        if meta.file_type().is_symlink() {
            return Err(not_read(&path, NotReadWhy::Link));
        }
        if i + 1 < parts.len() {
            if !meta.is_dir() {
                return Ok(None);
            }
        } else if !meta.is_file() {
            return Err(not_read(&path, NotReadWhy::NotRegular));
        } else if meta.len() > MAX_IGNORE_FILE_BYTES {
            return Err(not_read(&path, NotReadWhy::TooLarge));
        }
    }
    read_regular_file(&path, MAX_IGNORE_FILE_BYTES)
        .map(Some)
        .map_err(|e| not_read(&path, e.into()))
}

/// The matcher of one ignore file's text, for paths under `dir`. Like git,
/// a line that is not UTF-8 or not a pattern is passed over.
fn compile(dir: &Path, file: &Path, bytes: &[u8]) -> Result<Gitignore, NotRead> {
    let mut builder = GitignoreBuilder::new(dir);
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(Some(file.to_path_buf()), line);
    }
    builder.build().map_err(|e| NotRead {
        path: file.to_path_buf(),
        why: NotReadWhy::Patterns(e),
    })
}
