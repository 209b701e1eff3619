//! Starting the confined command from the sandbox's first process, and
//! waiting for it while reaping every orphan that the namespace hands over.

use nix::errno::Errno;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawnp};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitStatus, wait};
use nix::unistd::Pid;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Signals set back to their default action in the command: Rust ignores
/// SIGPIPE in its own processes, and `yes | head` must still end.
const DEFAULT_SIGNALS: &[Signal] = &[
    Signal::SIGPIPE,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGCHLD,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
];

/// Why the command did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// An argument or variable holds a NUL byte.
    #[error("an argument or environment variable holds a NUL byte")]
    Nul,
    /// No command was given.
    #[error("no command to run")]
    Empty,
    /// The system refused.
    #[error("cannot run {program}: {errno}")]
    Spawn {
        /// argv[0].
        program: String,
        /// Why.
        errno: Errno,
    },
}

fn c_string(bytes: &[u8]) -> Result<CString, SpawnError> {
    CString::new(bytes).map_err(|_| SpawnError::Nul)
}

/// Starts `argv` (looked up on `PATH`) with this process's environment,
/// its standard streams and no other file descriptor: whatever whittle's
/// own parent leaked into it stays outside.
pub fn spawn_command(argv: &[OsString]) -> Result<Pid, SpawnError> {
    let program = argv.first().ok_or(SpawnError::Empty)?;
    let args = argv
        .iter()
        .map(|a| c_string(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let env = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c_string(&kv)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let fail = |errno| SpawnError::Spawn {
        program: program.to_string_lossy().into_owned(),
        errno,
    };
    let mut actions = PosixSpawnFileActions::init().map_err(fail)?;
    for fd in open_fds() {
        actions.add_close(fd).map_err(fail)?;
    }
    let mut attr = PosixSpawnAttr::init().map_err(fail)?;
    let mut defaults = SigSet::empty();
    for s in DEFAULT_SIGNALS {
        defaults.add(*s);
    }
    attr.set_sigdefault(&defaults).map_err(fail)?;
    attr.set_sigmask(&SigSet::empty()).map_err(fail)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK,
    )
    .map_err(fail)?;
    posix_spawnp(&args[0], &actions, &attr, &args, &env).map_err(fail)
}

/// This process's file descriptors above standard error.
fn open_fds() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|fd| *fd > 2)
        .collect()
}

/// Waits for `child`, reaping every other process that ends meanwhile (the
/// first process of a PID namespace inherits its orphans); returns the
/// child's exit code, or 128 + the signal that killed it, as shells do.
pub fn reap_until(child: Pid) -> i32 {
    loop {
        match wait() {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => return 128 + signal as i32,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return 125,
        }
    }
}
