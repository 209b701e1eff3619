//! The private temp folder of a session: commands see it as `/tmp` and
//! `TMPDIR`, and nothing else of the machine's temp folder.

use crate::error::SandboxError;
use std::os::unix::fs::PermissionsExt;

/// Creates the session's temp folder (mode 0700) in the system's temp
/// folder; it is removed when the returned value is dropped.
pub fn private_tmp() -> Result<tempfile::TempDir, SandboxError> {
    let base = std::env::temp_dir();
    let dir = tempfile::Builder::new()
        .prefix("whittle-tmp-")
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
