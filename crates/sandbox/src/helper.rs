//! The helper process: whittle's own binary started again with
//! `__sandbox`, which confines itself and then runs the command.
//!
//! Two stages, because a new PID namespace takes effect for children only:
//!
//! 1. `__sandbox PARENT POLICY -- ARGV`: dies with whittle
//!    (`PR_SET_PDEATHSIG`), enters new user, mount, PID, IPC and UTS
//!    namespaces (and a network namespace when the network is off), maps
//!    its own ids, and starts stage 2, whose exit code it passes on.
//! 2. `__sandbox-init OUTER POLICY -- ARGV`, the first process of the new
//!    PID namespace: dies with stage 1, builds the new root (see
//!    [`crate::mounts`]), applies Landlock and drops capabilities (see
//!    [`crate::confine`]), starts the command and reaps orphans until it
//!    ends. When it exits the kernel kills whatever is left in the
//!    namespace, so background jobs end with the tool call, and `kill -9`
//!    of whittle reaches everything through the chain of death signals.
//!
//! With `--probe` instead of `-- ARGV`, stage 2 stops after confining
//! itself and prints what Landlock enforced: the start-up check that this
//! kernel can sandbox at all.
//!
//! The plan may also be to contain only (`yolo`, `--sandbox off`): a PID
//! namespace and the death signals, so nothing outlives the call or
//! whittle, but no other namespace (root needs no user namespace for it),
//! no mounts, no Landlock.

use crate::confine::{drop_capabilities, refuse_terminal_injection, restrict};
use crate::mounts::enter_new_root;
use crate::policy::Policy;
use crate::spawn::{reap_until, spawn_command};
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl::{set_dumpable, set_pdeathsig};
use nix::sys::signal::Signal;
use nix::unistd::{getgid, getppid, getuid, setsid};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;

/// argv[1] of stage 1.
pub const HELPER_ARG: &str = "__sandbox";
/// argv[1] of stage 2.
const INIT_ARG: &str = "__sandbox-init";
/// Stage 2's argument when only checking support.
pub const PROBE_ARG: &str = "--probe";
/// What the probe prints first on success.
pub const PROBE_LINE: &str = "whittle-sandbox-probe";
/// The exit code when the sandbox itself failed (as `env` and `timeout` do).
pub const HELPER_FAILED: i32 = 125;

/// What the helper does with the command.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Plan {
    /// Confine it to the policy.
    Confine(Box<Policy>),
    /// Only keep it (and all it starts) from outliving the call.
    Contain,
}

/// What the helper was asked to do, from its arguments.
struct Call {
    parent: i32,
    plan: Plan,
    policy_text: OsString,
    /// None for a probe.
    argv: Option<Vec<OsString>>,
}

fn parse(args: &[OsString]) -> Result<Call, String> {
    let [parent, policy_text, rest @ ..] = args else {
        return Err("usage: __sandbox PARENT POLICY (-- ARGV | --probe)".into());
    };
    let parent = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("the parent's process id is not a number")?;
    let plan = serde_json::from_slice(policy_text.as_bytes())
        .map_err(|e| format!("the policy is not valid: {e}"))?;
    let argv = match rest.split_first() {
        Some((flag, argv)) if flag == "--" && !argv.is_empty() => Some(argv.to_vec()),
        Some((flag, [])) if flag == PROBE_ARG => None,
        _ => return Err("expected -- ARGV or --probe after the policy".into()),
    };
    Ok(Call {
        parent,
        plan,
        policy_text: policy_text.clone(),
        argv,
    })
}

/// Runs the helper and exits when this process was started as one;
/// returns at once otherwise. Call it first thing in `main`, before any
/// thread exists: a process with threads cannot enter a user namespace.
pub fn run_helper_if_asked() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = match args.get(1).and_then(|a| a.to_str()) {
        Some(HELPER_ARG) => outer(&args[2..]),
        Some(INIT_ARG) => init(&args[2..]),
        _ => return,
    };
    std::process::exit(code);
}

fn failed(what: &str, why: impl std::fmt::Display) -> i32 {
    eprintln!("whittle sandbox: {what}: {why}");
    HELPER_FAILED
}

/// Stage 1.
fn outer(args: &[OsString]) -> i32 {
    let call = match parse(args) {
        Ok(c) => c,
        Err(e) => return failed("bad arguments", e),
    };
    if let Err(e) = set_pdeathsig(Signal::SIGKILL) {
        return failed("cannot tie the sandbox to whittle's life", e);
    }
    // whittle may have died before the line above: then nothing kills us.
    if getppid().as_raw() != call.parent {
        return failed("whittle is gone", "not starting the command");
    }
    let (uid, gid) = (getuid(), getgid());
    let flags = match &call.plan {
        Plan::Confine(policy) => {
            let mut f = CloneFlags::CLONE_NEWUSER
                | CloneFlags::CLONE_NEWNS
                | CloneFlags::CLONE_NEWPID
                | CloneFlags::CLONE_NEWIPC
                | CloneFlags::CLONE_NEWUTS;
            if !policy.network {
                f |= CloneFlags::CLONE_NEWNET;
            }
            f
        }
        // Root may have a PID namespace as it is; anyone else needs a
        // user namespace for it.
        Plan::Contain if uid.is_root() => CloneFlags::CLONE_NEWPID,
        Plan::Contain => CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID,
    };
    if let Err(e) = unshare(flags) {
        return failed(
            "cannot create namespaces (user namespaces may be disabled)",
            e,
        );
    }
    let maps = if flags.contains(CloneFlags::CLONE_NEWUSER) {
        vec![
            ("/proc/self/setgroups", "deny".to_string()),
            ("/proc/self/uid_map", format!("{uid} {uid} 1")),
            ("/proc/self/gid_map", format!("{gid} {gid} 1")),
        ]
    } else {
        Vec::new()
    };
    for (file, text) in maps {
        if let Err(e) = std::fs::write(file, text) {
            return failed(&format!("cannot write {file}"), e);
        }
    }
    let mut stage2 = std::process::Command::new("/proc/self/exe");
    stage2
        .arg(INIT_ARG)
        .arg(std::process::id().to_string())
        .arg(&call.policy_text);
    match &call.argv {
        Some(argv) => stage2.arg("--").args(argv),
        None => stage2.arg(PROBE_ARG),
    };
    match stage2.status() {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|sig| 128 + sig))
            .unwrap_or(HELPER_FAILED),
        Err(e) => failed("cannot start the sandbox's first process", e),
    }
}

/// Stage 1's pid as the machine sees it, from `/proc` (still the
/// machine's at this point); inside the new PID namespace `getppid` says 0.
fn parent_on_the_machine() -> Option<i32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Stage 2.
fn init(args: &[OsString]) -> i32 {
    let call = match parse(args) {
        Ok(c) => c,
        Err(e) => return failed("bad arguments", e),
    };
    if let Err(e) = set_pdeathsig(Signal::SIGKILL) {
        return failed("cannot tie the sandbox to whittle's life", e);
    }
    if parent_on_the_machine() != Some(call.parent) {
        return failed("whittle is gone", "not starting the command");
    }
    // No process of the sandbox may trace this one: a stopped first
    // process would hold the call until its timeout.
    if let Err(e) = set_dumpable(false) {
        return failed("cannot refuse tracing of the sandbox", e);
    }
    // A session of its own and no controlling terminal: a command cannot
    // type into the person's terminal (TIOCSTI) or read from it.
    if let Err(e) = setsid() {
        return failed("cannot leave whittle's terminal", e);
    }
    let enforced = match &call.plan {
        Plan::Confine(policy) => match confine_self(policy) {
            Ok(e) => Some(e),
            Err(code) => return code,
        },
        Plan::Contain => None,
    };
    let Some(argv) = call.argv else {
        match enforced {
            Some(e) => println!("{PROBE_LINE} abi={} full={}", e.abi, e.fully),
            None => println!("{PROBE_LINE} contain"),
        }
        return 0;
    };
    match spawn_command(&argv) {
        Ok(child) => reap_until(child),
        Err(e) => {
            eprintln!("whittle sandbox: {e}");
            127
        }
    }
}

/// The new root, Landlock, no capabilities; the exit code on failure.
fn confine_self(policy: &Policy) -> Result<crate::confine::Enforced, i32> {
    let cwd = std::env::current_dir().map_err(|e| failed("cannot read the working folder", e))?;
    enter_new_root(policy, &cwd)
        .map_err(|e| failed("cannot build the sandbox's file system", e))?;
    let enforced = restrict(policy).map_err(|e| failed("cannot confine the command", e))?;
    drop_capabilities().map_err(|e| failed("cannot confine the command", e))?;
    refuse_terminal_injection().map_err(|e| failed("cannot confine the command", e))?;
    Ok(enforced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_are_parsed_or_refused_in_one_line() {
        let call = parse(&os(&["12", "{\"confine\":{}}", "--", "bash", "-c", "true"])).unwrap();
        assert_eq!(call.parent, 12);
        assert_eq!(call.argv.unwrap(), os(&["bash", "-c", "true"]));
        assert!(
            parse(&os(&["12", "\"contain\"", "--probe"]))
                .unwrap()
                .argv
                .is_none()
        );
        for bad in [
            &["x", "{}", "--", "true"][..],
            &["12", "{", "--", "true"],
            &["12", "{}", "--"],
            &["12", "{}"],
            &["12", "{}", "true"],
        ] {
            let err = parse(&os(bad)).err().unwrap();
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
