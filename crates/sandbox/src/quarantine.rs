//! What a command created where the kernel could not stop it: paths that
//! did not exist when its policy was made ([`Policy::absent`]: a new
//! `.git/commondir` that would move git's config elsewhere, a `.vscode`
//! folder whose tasks an editor runs). When the command has ended, and with
//! it every process of its sandbox, they are moved to the workspace's
//! `.whittle/quarantine/`, which commands cannot write: nothing is deleted,
//! and nothing there is run by anyone.

use crate::policy::Policy;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// One path moved aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// Where the command created it.
    pub from: PathBuf,
    /// Where it is now; `None` when it could not be moved (then it is
    /// still where it was, and the reason is in `error`).
    pub to: Option<PathBuf>,
    /// Why it could not be moved.
    pub error: Option<String>,
}

impl Quarantined {
    /// One line for the model and the person.
    pub fn describe(&self, workspace: &Path) -> String {
        let workspace = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let shown = |p: &Path| {
            p.strip_prefix(&workspace)
                .map(|r| r.display().to_string())
                .unwrap_or_else(|_| p.display().to_string())
        };
        match (&self.to, &self.error) {
            (Some(to), _) => format!(
                "[whittle moved {} to {}: a command may not create it, since it would make git or an editor run code outside the sandbox; write it with write_file or edit_file, which ask]",
                shown(&self.from),
                shown(to)
            ),
            (None, error) => format!(
                "[whittle could not move {} aside ({}): it would make git or an editor run code outside the sandbox; remove it before running git here]",
                shown(&self.from),
                error.as_deref().unwrap_or("unknown error")
            ),
        }
    }
}

/// Moves what a command created at `policy.absent` paths to
/// `policy.quarantine`. Call it after the command and its sandbox ended.
pub fn quarantine_new_paths(policy: &Policy) -> Vec<Quarantined> {
    let created: Vec<&PathBuf> = policy
        .absent
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    if created.is_empty() {
        return Vec::new();
    }
    let Some(base) = &policy.quarantine else {
        return created
            .into_iter()
            .map(|p| Quarantined {
                from: p.clone(),
                to: None,
                error: Some("no quarantine folder".into()),
            })
            .collect();
    };
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let dir = base.join(format!("{stamp}-{}", std::process::id()));
    created
        .into_iter()
        .enumerate()
        .map(|(i, from)| {
            // The quarantine folder is WORKSPACE/.whittle/quarantine.
            let workspace = base.parent().and_then(Path::parent);
            let rel = workspace
                .and_then(|w| from.strip_prefix(w).ok())
                .unwrap_or(from);
            let name = rel.to_string_lossy().replace('/', "__");
            let to = dir.join(format!("{i}-{name}"));
            match std::fs::create_dir_all(&dir).and_then(|()| std::fs::rename(from, &to)) {
                Ok(()) => Quarantined {
                    from: from.clone(),
                    to: Some(to),
                    error: None,
                },
                Err(e) => Quarantined {
                    from: from.clone(),
                    to: None,
                    error: Some(e.to_string()),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_paths_are_moved_and_absent_ones_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join(".vscode/tasks.json"), "{}").unwrap();
        std::fs::write(ws.join(".git/commondir"), "../evil").unwrap();
        let policy = Policy {
            absent: vec![
                ws.join(".vscode"),
                ws.join(".git/commondir"),
                ws.join(".idea"),
            ],
            quarantine: Some(ws.join(".whittle/quarantine")),
            ..Policy::default()
        };
        let moved = quarantine_new_paths(&policy);
        assert_eq!(moved.len(), 2, "{moved:?}");
        assert!(!ws.join(".vscode").exists() && !ws.join(".git/commondir").exists());
        for m in &moved {
            let to = m.to.as_ref().unwrap();
            assert!(to.starts_with(ws.join(".whittle/quarantine")), "{to:?}");
            assert!(to.exists());
            assert!(
                m.describe(ws).starts_with("[whittle moved "),
                "{}",
                m.describe(ws)
            );
        }
        assert!(quarantine_new_paths(&policy).is_empty(), "nothing new");
    }
}
