//! Whole-file writes that readers see all or nothing of.

use std::ffi::{OsStr, OsString};
use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Temporary names tried before a write gives up: each is fresh and hard
/// to guess, so only names planted on purpose are ever taken.
const ATTEMPTS: usize = 16;

/// Writes `bytes` to `path` so that readers see the old file or the new one,
/// never a partial write: a temporary file in the same directory, then rename.
///
/// The temporary file is created new, never opened: a link planted at its
/// name (a repository can ship one beside any file the agent writes, and
/// the agent writes outside the sandbox) is not followed, so the write
/// cannot land outside the folder. If a name is taken, another is tried.
///
/// Tools and sessions write through it too; only the checkpoint store has
/// its own (also `create_new`), to depend on no other crate of whittle.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with_permissions(path, bytes, None)
}

/// [`write_atomic`], giving the new file `permissions` before any byte is
/// written: replacing a `0600` file never leaves its new content readable
/// by others, even for a moment, and nothing is changed through the path
/// after the rename.
pub fn write_atomic_with_permissions(
    path: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let names = (0..ATTEMPTS).map(|_| temp_name(name));
    write_atomic_via(path, bytes, permissions, names)
}

/// Temporary files made so far by this process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// This process's id, asked of the system once (a system call each time
/// otherwise, and a temporary file name needs it on every save).
fn process_id() -> u32 {
    static ID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ID.get_or_init(std::process::id)
}

/// `.NAME.tmp-PID-SEQ-NANOS`: hidden, beside the file, unique in this
/// process and hard to guess from outside it.
fn temp_name(name: &OsStr) -> OsString {
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".tmp-{}-{seq}-{nanos:x}", process_id()));
    tmp
}

/// [`write_atomic`] through the first of `names` that is free.
fn write_atomic_via(
    path: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
    names: impl IntoIterator<Item = OsString>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut taken = None;
    for name in names {
        let tmp = dir.join(name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        if let Some(p) = &permissions {
            // Created with them (less what the umask takes), never wider.
            options.mode(p.mode());
        }
        let mut file = match options.open(&tmp) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                taken = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let result = permissions
            .map_or(Ok(()), |p| file.set_permissions(p))
            .and_then(|()| file.write_all(bytes))
            .and_then(|()| file.flush())
            .and_then(|()| {
                drop(file);
                fs::rename(&tmp, path)
            });
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        return result;
    }
    Err(taken
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_whole_files_and_replaces_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        // Nothing else is left in the folder.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_permissions_given_are_the_new_files_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let private = Permissions::from_mode(0o600);
        write_atomic_with_permissions(&path, b"KEY=1", Some(private)).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(fs::read(&path).unwrap(), b"KEY=1");
    }

    /// A folder with a link at `.file.planted` to a file outside holding
    /// "mine": the folder, the outside one, the victim, and `file` to write.
    fn planted() -> (
        tempfile::TempDir,
        tempfile::TempDir,
        std::path::PathBuf,
        std::path::PathBuf,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("bashrc");
        fs::write(&victim, "mine").unwrap();
        symlink(&victim, dir.path().join(".file.planted")).unwrap();
        let path = dir.path().join("file");
        (dir, outside, victim, path)
    }

    #[test]
    fn a_link_planted_at_the_temporary_name_is_not_followed() {
        let (dir, _outside, victim, path) = planted();
        let names = [".file.planted", ".file.fresh"].map(OsString::from);
        write_atomic_via(&path, b"new", None, names).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"mine");
        assert_eq!(fs::read(&path).unwrap(), b"new");
        let planted = fs::symlink_metadata(dir.path().join(".file.planted")).unwrap();
        assert!(planted.file_type().is_symlink());
    }

    #[test]
    fn every_name_taken_is_an_error_that_writes_nothing() {
        let (_dir, _outside, victim, path) = planted();
        let err =
            write_atomic_via(&path, b"new", None, [OsString::from(".file.planted")]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&victim).unwrap(), b"mine");
        assert!(!path.exists());
    }
}
