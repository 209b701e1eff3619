//! The private temp folder of a session: commands see it as `/tmp` and
//! `TMPDIR`, and nothing else of the machine's temp folder.

use crate::error::SandboxError;
use std::os::unix::fs::PermissionsExt;

/// What the folders' names start with; the owner's pid follows.
const PREFIX: &str = "whittle-tmp-";

/// Creates the session's temp folder (mode 0700) in the system's temp
/// folder; it is removed when the returned value is dropped. Folders left
/// by sessions that were killed (their pid is gone) are removed first.
pub fn private_tmp() -> Result<tempfile::TempDir, SandboxError> {
    private_folder("")
}

/// Creates the session's folder for the upper layers of the package caches
/// (see [`crate::Policy::copy_on_write`]), like [`private_tmp`]; commands
/// never see it.
pub fn private_layers() -> Result<tempfile::TempDir, SandboxError> {
    private_folder("layers-")
}

fn private_folder(tag: &str) -> Result<tempfile::TempDir, SandboxError> {
    let base = std::env::temp_dir();
    remove_stale(&base);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-{tag}", std::process::id()))
        .tempdir_in(&base)
        .map_err(|source| SandboxError::Create {
            path: base.clone(),
            source,
        })?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(
        |source| SandboxError::Create {
            path: dir.path().to_path_buf(),
            source,
        },
    )?;
    Ok(dir)
}

/// Removes the private temp folders of whittle processes that are gone
/// (`kill -9` leaves no chance to clean up). A folder whose pid runs some
/// other program now stays: it is only left for longer.
fn remove_stale(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let mine = e.metadata().is_ok_and(|m| {
            std::os::unix::fs::MetadataExt::uid(&m) == nix::unistd::getuid().as_raw()
        });
        if mine && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_sessions_folder_is_removed_and_a_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // No process has pid 0 in /proc; this one is alive.
        let dead = base.path().join(format!("{PREFIX}0-abc"));
        let live = base
            .path()
            .join(format!("{PREFIX}{}-abc", std::process::id()));
        let other = base.path().join("whittle-tmp-notapid");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("inner")).unwrap();
        }
        remove_stale(base.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}
