//! The session's sandbox, from the settings: whether and how commands are
//! confined, which variables they do not inherit, which values are
//! redacted, and the one line said about it at start.

use crate::args::SandboxMode;
use crate::config::{Env, Settings, user_config_path};
use std::path::Path;
use whittle_llm::KEY_VARS;
use whittle_protocol::Redactor;
use whittle_sandbox::{
    Layout, Level, QuietGit, Sandbox, Support, private_layers, private_tmp, probe, probe_contain,
};
use whittle_tools::PermissionMode;

/// What the session runs commands with.
pub struct Confinement {
    /// How commands run.
    pub sandbox: Sandbox,
    /// The values of the hidden variables, to redact.
    pub redactor: Redactor,
    /// What the kernel can do, when it was probed.
    pub support: Option<Support>,
    /// Said once at start: when commands are not confined as the mode
    /// promises, or something in the workspace will not work confined.
    pub notices: Vec<String>,
    /// whittle's own git (the environment block), confined read-only and
    /// offline whenever the kernel can, whatever the mode.
    pub git: QuietGit,
}

/// The level `mode` asks for under `permission`; `None` runs commands
/// unconfined.
pub fn level_of(mode: SandboxMode, permission: PermissionMode) -> Option<Level> {
    match mode {
        SandboxMode::Off => None,
        SandboxMode::ReadOnly => Some(Level::ReadOnly),
        SandboxMode::WorkspaceWrite => Some(Level::WorkspaceWrite),
        SandboxMode::Auto => match permission {
            PermissionMode::Yolo => None,
            PermissionMode::ReadOnly => Some(Level::ReadOnly),
            PermissionMode::Default | PermissionMode::AcceptEdits => Some(Level::WorkspaceWrite),
        },
    }
}

/// Builds the sandbox for `settings`. When the kernel cannot confine,
/// `refuse` (non-interactive runs) makes every command an error instead of
/// running it unconfined: fail closed.
pub fn confine(settings: &Settings, env: Env<'_>, refuse: bool) -> anyhow::Result<Confinement> {
    let mut hidden: Vec<String> = KEY_VARS.iter().map(|v| v.to_string()).collect();
    hidden.extend(settings.sandbox.hide_env.iter().cloned());
    hidden.dedup();
    let redactor = Redactor::new(hidden.iter().filter_map(|v| env(v)));
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find whittle's own binary for the sandbox: {e}"))?;
    let user_config_dir: Vec<std::path::PathBuf> = user_config_path(env)
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .into_iter()
        .collect();
    let layout = |level: Level, network: bool| Layout {
        level,
        workspace: settings.workspace.clone(),
        env,
        writable_roots: settings.sandbox.writable_roots.clone(),
        read_roots: settings.sandbox.read_roots.clone(),
        hidden: user_config_dir.clone(),
        network,
        tmp: None,
        layers: None,
    };
    let probed = probe(&exe);
    // whittle's own git runs read-only and offline in every mode the
    // kernel allows, yolo included: opening a repository runs nothing of it.
    // It reads the repository the workspace lies in, when that is above it.
    let git = match &probed {
        Ok(_) => {
            let mut inspect = layout(Level::ReadOnly, false);
            inspect
                .read_roots
                .extend(enclosing_repository(&settings.workspace, env));
            QuietGit::new(Some(Sandbox::confined(
                exe.clone(),
                inspect.policy()?,
                Vec::new(),
                hidden.clone(),
            )?))
        }
        Err(_) => QuietGit::new(None),
    };
    let mut notices = Vec::new();
    let Some(level) = level_of(settings.sandbox.mode, settings.permission_mode) else {
        let why = match settings.sandbox.mode {
            SandboxMode::Auto => "in yolo mode",
            _ => "by request (--sandbox off or [sandbox] mode)",
        };
        notices.push(format!("sandbox: off {why}; commands run unconfined"));
        return Ok(Confinement {
            sandbox: unconfined(&exe, hidden),
            redactor,
            support: None,
            notices,
            git,
        });
    };
    let support = match probed {
        Ok(s) => s,
        Err(reason) => {
            let (sandbox, then) = if refuse {
                (
                    Sandbox::refusing(reason.to_string(), hidden),
                    "commands are refused; pass --sandbox off to run them unconfined",
                )
            } else {
                (unconfined(&exe, hidden), "commands run unconfined")
            };
            notices.push(format!(
                "sandbox: the kernel cannot sandbox commands here ({reason}); {then}"
            ));
            return Ok(Confinement {
                sandbox,
                redactor,
                support: None,
                notices,
                git,
            });
        }
    };
    let tmp = private_tmp()?;
    let layers = private_layers()?;
    let network = settings
        .sandbox
        .network
        .unwrap_or(level == Level::WorkspaceWrite);
    let policy = Layout {
        tmp: Some(tmp.path().to_path_buf()),
        layers: Some(layers.path().to_path_buf()),
        ..layout(level, network)
    }
    .policy()?;
    if level == Level::WorkspaceWrite {
        notices.extend(linked_worktree_notice(&settings.workspace));
    }
    let mut sandbox = Sandbox::confined(exe, policy, vec![tmp, layers], hidden)?;
    if level == Level::ReadOnly {
        // Read-only runs nothing the repository names: not its pager,
        // fsmonitor, hooks, external diff or drivers. (Its config cannot
        // change in this mode, so it is read once.)
        sandbox = sandbox.with_env(git.blanking_env(&settings.workspace));
    }
    Ok(Confinement {
        sandbox,
        redactor,
        support: Some(support),
        notices,
        git,
    })
}

/// The repository a workspace below its top lies in (the nearest folder
/// above holding a `.git`), unless that is the home folder or above it:
/// git reads it to show the branch, and nothing else needs it.
fn enclosing_repository(workspace: &Path, env: Env<'_>) -> Option<std::path::PathBuf> {
    let home = env("HOME").map(std::path::PathBuf::from);
    let top = workspace
        .ancestors()
        .skip(1)
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())?;
    let too_wide = top.parent().is_none() || home.as_deref().is_some_and(|h| h.starts_with(top));
    (!too_wide).then(|| top.to_path_buf())
}

/// A linked worktree's (or a submodule's) repository lies elsewhere, named
/// by its `.git` file; the sandbox never follows that name, so commands
/// cannot commit there unless the person grants the folder.
fn linked_worktree_notice(workspace: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(workspace.join(".git")).ok()?;
    meta.is_file().then(|| {
        "sandbox: this workspace's .git is a file (a linked worktree or a submodule): commands \
         cannot write its repository, which lies elsewhere; to let `git commit` work, add that \
         repository's .git folder to [sandbox] writable_roots"
            .to_string()
    })
}

/// Unconfined, but contained in a PID namespace of their own when the
/// kernel allows it, so that nothing they start outlives the call.
fn unconfined(exe: &Path, hidden: Vec<String>) -> Sandbox {
    match probe_contain(exe) {
        Ok(()) => Sandbox::contained(exe.to_path_buf(), hidden),
        Err(_) => Sandbox::off(hidden),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_follows_the_permission_mode_unless_set() {
        use PermissionMode::*;
        let auto = SandboxMode::Auto;
        assert_eq!(level_of(auto, Yolo), None);
        assert_eq!(level_of(auto, ReadOnly), Some(Level::ReadOnly));
        assert_eq!(level_of(auto, Default), Some(Level::WorkspaceWrite));
        assert_eq!(level_of(auto, AcceptEdits), Some(Level::WorkspaceWrite));
        assert_eq!(level_of(SandboxMode::Off, ReadOnly), None);
        assert_eq!(level_of(SandboxMode::ReadOnly, Yolo), Some(Level::ReadOnly));
        assert_eq!(
            level_of(SandboxMode::WorkspaceWrite, Yolo),
            Some(Level::WorkspaceWrite)
        );
    }
}
