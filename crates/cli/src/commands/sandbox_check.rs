//! `whittle sandbox check` and `/sandbox`: what commands may write and
//! read, whether they have the network, and a self-test that tries what
//! they must not do.

use crate::args::{AgentArgs, SandboxCheckArgs};
use crate::config::sandboxing::{confine, level_of};
use crate::config::{self, Env};
use std::path::Path;
use std::process::ExitCode;
use whittle_sandbox::{Sandbox, SandboxState, Support, self_test};

/// Runs `whittle sandbox check`.
pub fn run(args: &SandboxCheckArgs, env: Env<'_>) -> anyhow::Result<ExitCode> {
    let agent_args = AgentArgs {
        cwd: args.cwd.clone(),
        permission_mode: args.permission_mode,
        sandbox: args.sandbox,
        ..AgentArgs::default()
    };
    let settings = config::load(&agent_args, env, None)?;
    let c = confine(&settings, env, true)?;
    let level = level_of(settings.sandbox.mode, settings.permission_mode);
    println!(
        "permission mode {}, sandbox mode {} -> {}",
        settings.permission_mode,
        settings.sandbox.mode.as_str(),
        level.map_or("unconfined", |l| l.as_str())
    );
    for n in &c.notices {
        println!("{n}");
    }
    let (text, held) = report(&c.sandbox, c.support.as_ref(), &settings.workspace, env);
    print!("{text}");
    Ok(if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The report and the self-test's verdict (true when the sandbox holds).
pub fn report(
    sandbox: &Sandbox,
    support: Option<&Support>,
    workspace: &Path,
    env: Env<'_>,
) -> (String, bool) {
    let home = env("HOME").filter(|h| h.starts_with('/') && h.len() > 1);
    let show = |p: &Path| -> String {
        let text = p.display().to_string();
        match &home {
            Some(h) if text.starts_with(&format!("{h}/")) => format!("~{}", &text[h.len()..]),
            _ => text,
        }
    };
    let list = |paths: &mut dyn Iterator<Item = &Path>| -> String {
        let items: Vec<String> = paths.map(show).collect();
        if items.is_empty() {
            "nothing".into()
        } else {
            items.join(", ")
        }
    };
    let mut out = String::new();
    match sandbox.state() {
        SandboxState::Off => out.push_str("sandbox: off; commands run unconfined\n"),
        SandboxState::Contained => out.push_str(
            "sandbox: off; commands run unconfined, in a PID namespace of their own (nothing they start outlives the call)\n",
        ),
        SandboxState::Refused => out.push_str(&format!(
            "sandbox: unavailable ({}); commands are refused\n",
            sandbox.refusal().unwrap_or_default()
        )),
        SandboxState::Confined => {
            let abi = support.map_or(String::new(), |s| {
                format!(
                    " (Landlock ABI {}{})",
                    s.landlock_abi,
                    if s.fully_enforced { "" } else { ", partly" }
                )
            });
            out.push_str(&format!(
                "sandbox: on{abi}: namespaces, a root of bind mounts, Landlock\n"
            ));
        }
    }
    if let Some(p) = sandbox.policy() {
        let tmp = p
            .tmp
            .as_deref()
            .map(|t| format!("{} (TMPDIR, also /tmp)", show(t)));
        let writable: Vec<String> = p.write.iter().map(|w| show(w)).chain(tmp).collect();
        out.push_str(&format!(
            "  writable: {}\n",
            if writable.is_empty() {
                "only /dev/null and friends, and the private /tmp".into()
            } else {
                writable.join(", ")
            }
        ));
        if !p.read_only.is_empty() {
            out.push_str(&format!(
                "  read-only inside those: {}\n",
                list(&mut p.read_only.iter().map(|r| r.as_path()))
            ));
        }
        if !p.copy_on_write.is_empty() {
            out.push_str(&format!(
                "  copy-on-write (commands' changes stay private to the session): {}\n",
                list(&mut p.copy_on_write.iter().map(|r| r.as_path()))
            ));
        }
        out.push_str(&format!(
            "  readable too: {}\n",
            list(&mut p.read.iter().map(|r| r.as_path()))
        ));
        out.push_str("  hidden: everything else (the rest of your home folder and of /tmp, other users' homes)");
        if !p.hidden.is_empty() {
            out.push_str(&format!(
                "; covered inside visible folders: {}",
                list(&mut p.hidden.iter().map(|r| r.as_path()))
            ));
        }
        out.push('\n');
        out.push_str(&format!(
            "  network: {}\n",
            if p.network { "on" } else { "off" }
        ));
        out.push_str("  terminal: none (a session of its own, no /dev/tty, TIOCSTI refused)\n");
    }
    if !sandbox.hidden_env().is_empty() {
        out.push_str(&format!(
            "  not inherited: {}\n",
            sandbox.hidden_env().join(", ")
        ));
    }
    if sandbox.state() == SandboxState::Refused {
        return (out, false);
    }
    out.push_str("self-test:\n");
    let held = match self_test(sandbox, workspace) {
        Ok(findings) => {
            for f in &findings {
                let verdict = match (f.blocked, f.must_block) {
                    (true, _) => "blocked",
                    (false, false) => "allowed (the network is on by config)",
                    (false, true) => "NOT BLOCKED",
                };
                out.push_str(&format!("  {}: {verdict}\n", f.attempt));
            }
            findings.iter().all(|f| f.passed())
        }
        Err(e) => {
            out.push_str(&format!("  {e}\n"));
            false
        }
    };
    out.push_str(if held {
        "the sandbox holds\n"
    } else {
        "the sandbox does NOT hold\n"
    });
    (out, held)
}
