//! [`Sandbox`]: what the tools hold to start a command, confined or not.

use crate::error::SandboxError;
use crate::helper::{HELPER_ARG, PROBE_ARG, PROBE_LINE, Plan};
use crate::islands::{RepoScan, with_current_repos};
use crate::new_repos::{pointers_to_unchecked_folders, risky_in_new_repos};
use crate::policy::Policy;
use crate::quarantine::{Quarantined, created_at_absent_paths, move_to_quarantine};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// How the commands of a session run. Cheap to clone; the private temp
/// folder is removed when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    mode: Mode,
    /// Variables the command must not inherit (provider keys).
    hidden_env: Vec<String>,
    /// Variables every command gets (read-only mode's blanked git
    /// settings).
    set_env: Vec<(String, String)>,
    /// The policy the last command was started with, for
    /// [`Sandbox::after_command`].
    last: Mutex<Option<Policy>>,
    /// The workspace's folders as last scanned for repositories.
    scan: Mutex<RepoScan>,
}

#[derive(Debug)]
enum Mode {
    Off,
    Contained {
        helper: PathBuf,
    },
    Confined {
        helper: PathBuf,
        policy: Box<Policy>,
        policy_text: String,
        _keep: Vec<tempfile::TempDir>,
    },
    Refused {
        reason: String,
    },
}

/// What a sandbox does, for `/sandbox` and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxState {
    /// Commands run as they are.
    Off,
    /// Commands run unconfined, but in a PID namespace of their own: what
    /// they start ends with them, and with whittle.
    Contained,
    /// Commands run confined.
    Confined,
    /// Commands are refused: the kernel cannot confine them.
    Refused,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::none()
    }
}

impl Sandbox {
    /// No confinement and no hidden variables: commands run exactly as
    /// whittle would run them without a sandbox (tests, library use).
    pub fn none() -> Sandbox {
        Sandbox::off(Vec::new())
    }

    /// No confinement, but the command does not inherit `hidden_env`.
    pub fn off(hidden_env: Vec<String>) -> Sandbox {
        Sandbox::with(Mode::Off, hidden_env)
    }

    /// Commands run through `helper` (an executable that calls
    /// [`crate::run_helper_if_asked`] first thing, e.g. whittle itself),
    /// confined to `policy`. `keep` holds the private folders the policy
    /// names (temp folder, cache layers), removed with the sandbox.
    pub fn confined(
        helper: PathBuf,
        policy: Policy,
        keep: Vec<tempfile::TempDir>,
        hidden_env: Vec<String>,
    ) -> Result<Sandbox, SandboxError> {
        let policy_text = serde_json::to_string(&Plan::Confine(Box::new(policy.clone())))?;
        Ok(Sandbox::with(
            Mode::Confined {
                helper,
                policy: Box::new(policy),
                policy_text,
                _keep: keep,
            },
            hidden_env,
        ))
    }

    /// No confinement, but commands run through `helper` in a PID
    /// namespace of their own, so nothing they start outlives the call or
    /// whittle; they do not inherit `hidden_env`.
    pub fn contained(helper: PathBuf, hidden_env: Vec<String>) -> Sandbox {
        Sandbox::with(Mode::Contained { helper }, hidden_env)
    }

    /// Every command is refused with `reason` (the kernel cannot confine).
    pub fn refusing(reason: impl Into<String>, hidden_env: Vec<String>) -> Sandbox {
        Sandbox::with(
            Mode::Refused {
                reason: reason.into(),
            },
            hidden_env,
        )
    }

    fn with(mode: Mode, hidden_env: Vec<String>) -> Sandbox {
        Sandbox {
            inner: Arc::new(Inner {
                mode,
                hidden_env,
                set_env: Vec::new(),
                last: Mutex::new(None),
                scan: Mutex::new(RepoScan::default()),
            }),
        }
    }

    /// This sandbox, with `vars` set for every command. Call it before the
    /// sandbox is cloned: a shared one is returned unchanged.
    pub fn with_env(self, vars: Vec<(String, String)>) -> Sandbox {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                inner.set_env = vars;
                Sandbox {
                    inner: Arc::new(inner),
                }
            }
            Err(inner) => Sandbox { inner },
        }
    }

    /// Whether commands are confined, refused or run as they are.
    pub fn state(&self) -> SandboxState {
        match self.inner.mode {
            Mode::Off => SandboxState::Off,
            Mode::Contained { .. } => SandboxState::Contained,
            Mode::Confined { .. } => SandboxState::Confined,
            Mode::Refused { .. } => SandboxState::Refused,
        }
    }

    /// The policy commands are confined to, when they are.
    pub fn policy(&self) -> Option<&Policy> {
        match &self.inner.mode {
            Mode::Confined { policy, .. } => Some(policy),
            Mode::Off | Mode::Contained { .. } | Mode::Refused { .. } => None,
        }
    }

    /// Why commands are refused, when they are.
    pub fn refusal(&self) -> Option<&str> {
        match &self.inner.mode {
            Mode::Refused { reason } => Some(reason),
            Mode::Off | Mode::Contained { .. } | Mode::Confined { .. } => None,
        }
    }

    /// The variables commands do not inherit.
    pub fn hidden_env(&self) -> &[String] {
        &self.inner.hidden_env
    }

    /// A command that runs `program` with `args`, confined when this
    /// sandbox confines. The caller sets the working folder (inside the
    /// policy's folders), standard streams and process group as for any
    /// command; the confined one's exit code is the program's, or 128 + the
    /// signal that killed it, or 125 when the sandbox itself failed (its
    /// reason is then on standard error).
    pub fn command<S: AsRef<OsStr>>(
        &self,
        program: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = S>,
    ) -> Result<Command, SandboxError> {
        let mut cmd = match &self.inner.mode {
            Mode::Off => {
                let mut c = Command::new(program);
                c.args(args);
                c
            }
            Mode::Contained { helper } => {
                let mut c = Command::new(helper);
                c.arg(HELPER_ARG)
                    .arg(std::process::id().to_string())
                    .arg(CONTAIN_TEXT)
                    .arg("--")
                    .arg(program)
                    .args(args);
                c
            }
            Mode::Confined {
                helper,
                policy,
                policy_text,
                ..
            } => {
                // A repository created by the last command is protected now.
                let fresh = (!policy.repo_roots.is_empty()).then(|| match self.inner.scan.lock() {
                    Ok(mut scan) => with_current_repos(policy, &mut scan),
                    Err(_) => with_current_repos(policy, &mut RepoScan::default()),
                });
                let fresh_text = fresh
                    .as_ref()
                    .map(|p| serde_json::to_string(&Plan::Confine(Box::new(p.clone()))))
                    .transpose()?;
                if let Ok(mut last) = self.inner.last.lock() {
                    *last = Some(fresh.unwrap_or_else(|| (**policy).clone()));
                }
                let mut c = Command::new(helper);
                c.arg(HELPER_ARG)
                    .arg(std::process::id().to_string())
                    .arg(fresh_text.as_deref().unwrap_or(policy_text))
                    .arg("--")
                    .arg(program)
                    .args(args);
                if let Some(tmp) = &policy.tmp {
                    for var in ["TMPDIR", "TMP", "TEMP"] {
                        c.env(var, tmp);
                    }
                }
                c
            }
            Mode::Refused { reason } => {
                return Err(SandboxError::Unavailable {
                    reason: reason.clone(),
                });
            }
        };
        for var in &self.inner.hidden_env {
            cmd.env_remove(var);
        }
        cmd.envs(self.inner.set_env.iter().map(|(k, v)| (k, v)));
        Ok(cmd)
    }
}

impl Sandbox {
    /// Call when a command from [`Sandbox::command`] has ended: moves what
    /// it created where the kernel could not stop it (a new
    /// `.git/commondir`, `.vscode`, the config and hooks of a repository it
    /// made) to the quarantine folder, and says so.
    pub fn after_command(&self) -> Vec<Quarantined> {
        let last = self.inner.last.lock().ok().and_then(|mut l| l.take());
        let Some(policy) = last else {
            return Vec::new();
        };
        let now = self.repos_now(&policy);
        let created = created_at_absent_paths(&policy)
            .chain(risky_in_new_repos(&policy, &now.git_dirs))
            .chain(pointers_to_unchecked_folders(&policy, &now));
        move_to_quarantine(&policy, created)
    }

    /// The git folders, `.git` files and links under `policy`'s repository
    /// roots as they are now, reading only the folders that changed since
    /// the last look.
    fn repos_now(&self, policy: &Policy) -> Policy {
        if policy.repo_roots.is_empty() {
            return Policy::default();
        }
        match self.inner.scan.lock() {
            Ok(mut scan) => with_current_repos(policy, &mut scan),
            Err(_) => with_current_repos(policy, &mut RepoScan::default()),
        }
    }
}

/// [`Plan::Contain`] as the helper reads it.
const CONTAIN_TEXT: &str = "\"contain\"";

/// What the kernel can do, found by confining a helper process for real.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI the kernel speaks.
    pub landlock_abi: i32,
    /// False when an older kernel lacks some of the rights asked for (the
    /// mounts still hold the boundary).
    pub fully_enforced: bool,
}

/// Checks once whether commands can be confined here, by running the
/// helper through every step but the command itself: namespaces, mounts,
/// Landlock, dropping capabilities. The error is one line saying why not.
pub fn probe(helper: &Path) -> Result<Support, ProbeError> {
    let policy = Policy {
        read: ["/usr", "/etc"]
            .iter()
            .filter_map(|p| Path::new(p).canonicalize().ok())
            .collect(),
        ..Policy::default()
    };
    let text = serde_json::to_string(&Plan::Confine(Box::new(policy)))
        .map_err(|e| ProbeError::Refused(e.to_string()))?;
    run_probe(helper, &text)
}

/// Checks whether commands can at least be contained (a PID namespace of
/// their own) when they are not confined.
pub fn probe_contain(helper: &Path) -> Result<(), ProbeError> {
    run_probe(helper, CONTAIN_TEXT).map(|_| ())
}

fn run_probe(helper: &Path, text: &str) -> Result<Support, ProbeError> {
    let out = Command::new(helper)
        .arg(HELPER_ARG)
        .arg(std::process::id().to_string())
        .arg(text)
        .arg(PROBE_ARG)
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| ProbeError::Start {
            helper: helper.to_path_buf(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(PROBE_LINE));
    match line {
        Some(rest) if out.status.success() => {
            let field = |name: &str| {
                rest.split_whitespace()
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            };
            Ok(Support {
                landlock_abi: field("abi").and_then(|a| a.parse().ok()).unwrap_or(0),
                fully_enforced: field("full") == Some("true"),
            })
        }
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let reason = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().trim_start_matches("whittle sandbox: ").to_string())
                .unwrap_or_else(|| format!("the helper exited with {}", out.status));
            Err(ProbeError::Refused(reason))
        }
    }
}

/// Why the kernel cannot confine (or contain) commands here.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The helper could not be started at all.
    #[error("cannot start {helper}: {source}")]
    Start {
        /// whittle's own binary.
        helper: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The helper ran and a step failed: its one line, as it said it.
    #[error("{0}")]
    Refused(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn what_a_command_wrote_into_a_repository_it_made_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        git(&ws, &["init", "-q"]);
        let mut policy = Policy {
            write: vec![ws.clone()],
            repo_roots: vec![ws.clone()],
            quarantine: Some(ws.join(".whittle/quarantine")),
            ..Policy::default()
        };
        crate::islands::add_git_islands(&mut policy, &ws);
        let sandbox =
            Sandbox::confined("/nonexistent".into(), policy, Vec::new(), Vec::new()).unwrap();
        // What the command does, here without a sandbox: a repository with
        // a config that runs a program, one with only what git writes.
        sandbox.command("true", ["x"]).unwrap();
        git(&ws, &["init", "-q", "sub"]);
        git(
            &ws.join("sub"),
            &["config", "core.fsmonitor", "/tmp/evil.sh"],
        );
        git(&ws, &["init", "-q", "plain"]);
        git(&ws.join("plain"), &["config", "user.email", "a@b"]);
        let moved = sandbox.after_command();
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!(moved[0].from, ws.join("sub/.git/config"));
        let to = moved[0].to.as_ref().unwrap();
        assert!(to.starts_with(ws.join(".whittle/quarantine")));
        assert!(std::fs::read_to_string(to).unwrap().contains("fsmonitor"));
        // What in it runs nothing is written back: git still reads the
        // repository's format and settings there, and nothing else.
        assert!(moved[0].rewritten);
        let kept = std::fs::read_to_string(ws.join("sub/.git/config")).unwrap();
        assert!(kept.contains("repositoryformatversion") && !kept.contains("fsmonitor"));
        let value = Command::new("git")
            .args(["config", "--get", "core.fsmonitor"])
            .current_dir(ws.join("sub"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(value.stdout.is_empty(), "{value:?}");
        git(&ws.join("sub"), &["status", "-s"]);
        assert!(ws.join("plain/.git/config").exists());
        // Known from the next command on: its hooks are the kernel's to
        // keep read-only, and not looked at again.
        sandbox.command("true", ["x"]).unwrap();
        std::fs::write(ws.join("sub/.git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        assert!(sandbox.after_command().is_empty());
    }
}
