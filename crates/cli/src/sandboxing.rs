//! The session's sandbox, from the settings: whether and how commands are
//! confined, which variables they do not inherit, which values are
//! redacted, and the one line said about it at start.

use crate::args::SandboxMode;
use crate::config::{Env, Settings, user_config_path};
use std::path::Path;
use whittle_context::Redactor;
use whittle_llm::KEY_VARS;
use whittle_sandbox::{Layout, Level, Sandbox, Support, private_tmp, probe, probe_contain};
use whittle_tools::PermissionMode;

/// What the session runs commands with.
pub struct Confinement {
    /// How commands run.
    pub sandbox: Sandbox,
    /// The values of the hidden variables, to redact.
    pub redactor: Redactor,
    /// What the kernel can do, when it was probed.
    pub support: Option<Support>,
    /// Said once at start, when commands are not confined as the mode
    /// promises.
    pub notice: Option<String>,
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
    let Some(level) = level_of(settings.sandbox.mode, settings.permission_mode) else {
        let why = match settings.sandbox.mode {
            SandboxMode::Auto => "in yolo mode",
            _ => "by request (--sandbox off or [sandbox] mode)",
        };
        return Ok(Confinement {
            sandbox: unconfined(&exe, hidden),
            redactor,
            support: None,
            notice: Some(format!("sandbox: off {why}; commands run unconfined")),
        });
    };
    let support = match probe(&exe) {
        Ok(s) => s,
        Err(reason) => {
            let (sandbox, then) = if refuse {
                (
                    Sandbox::refusing(reason.clone(), hidden),
                    "commands are refused; pass --sandbox off to run them unconfined",
                )
            } else {
                (unconfined(&exe, hidden), "commands run unconfined")
            };
            return Ok(Confinement {
                sandbox,
                redactor,
                support: None,
                notice: Some(format!(
                    "sandbox: the kernel cannot sandbox commands here ({reason}); {then}"
                )),
            });
        }
    };
    let tmp = private_tmp()?;
    let network = settings
        .sandbox
        .network
        .unwrap_or(level == Level::WorkspaceWrite);
    let policy = Layout {
        level,
        workspace: settings.workspace.clone(),
        env,
        writable_roots: settings.sandbox.writable_roots.clone(),
        read_roots: settings.sandbox.read_roots.clone(),
        hidden: user_config_path(env)
            .and_then(|p| p.parent().map(|d| d.to_path_buf()))
            .into_iter()
            .collect(),
        network,
        tmp: Some(tmp.path().to_path_buf()),
    }
    .policy()?;
    Ok(Confinement {
        sandbox: Sandbox::confined(exe, policy, Some(tmp), hidden)?,
        redactor,
        support: Some(support),
        notice: None,
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
