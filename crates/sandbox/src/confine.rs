//! The second wall, inside the new root: Landlock grants reads, writes and
//! device access path by path (the same lists the mounts were built from,
//! so a mistake in one is caught by the other), scopes abstract sockets and
//! signals to the sandbox, and forbids TCP when the network is off; then
//! every capability the user namespace gave is dropped.

use crate::mounts::DEVICES;
use crate::policy::Policy;
use caps::CapSet;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::path::{Path, PathBuf};

/// The newest ABI whose rights we ask for; older kernels give what they
/// have (best effort), but never nothing.
const ABI_WANTED: ABI = ABI::V6;

/// Why the command could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// Landlock refused the ruleset.
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The kernel has no Landlock, or did not enforce it.
    #[error("Landlock is not supported by this kernel ({0})")]
    NotEnforced(String),
    /// Dropping capabilities failed.
    #[error("cannot drop capabilities: {0}")]
    Caps(#[from] caps::errors::CapsError),
    /// The seccomp filter could not be built or installed.
    #[error("seccomp: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    /// The seccomp filter could not be installed.
    #[error("seccomp: {0}")]
    SeccompInstall(#[from] seccompiler::Error),
}

/// `ioctl` requests that push input into a terminal (`TIOCSTI`) or act on
/// the console (`TIOCLINUX`); the same numbers on every architecture Linux
/// calls generic (x86_64, aarch64, riscv64).
const TERMINAL_INJECTION: &[u64] = &[0x5412, 0x541C];

/// Refuses, for this process and everything it starts, the `ioctl`s that
/// type into a terminal. The command has no terminal (a session of its
/// own, no `/dev/tty`), so this is the second wall. Needs `no_new_privs`
/// (set by [`restrict`]) or privilege.
pub fn refuse_terminal_injection() -> Result<(), ConfineError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let rules = TERMINAL_INJECTION
        .iter()
        .map(|request| {
            // The kernel reads the request as a 32-bit int: compare those
            // bits only, so high bits set by the caller change nothing.
            let cond =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *request)?;
            SeccompRule::new(vec![cond])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let filter = SeccompFilter::new(
        [(nix::libc::SYS_ioctl, rules)].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EPERM as u32),
        arch,
    )?;
    let program: seccompiler::BpfProgram = filter.try_into()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// What Landlock reported after restricting the process, for the probe.
#[derive(Debug)]
pub struct Enforced {
    /// The ABI the kernel speaks.
    pub abi: i32,
    /// Whether every right asked for is enforced (false on older kernels
    /// that lack, say, the socket scopes).
    pub fully: bool,
}

/// Restricts this process (and everything it starts) to `policy`.
pub fn restrict(policy: &Policy) -> Result<Enforced, ConfineError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let file_rw =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    if !policy.network {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mut created = ruleset.create()?;
    let mut rule = |path: &Path, access: BitFlags<AccessFs>| -> Result<(), ConfineError> {
        // A path that vanished since the policy was made grants nothing.
        if let Ok(fd) = PathFd::new(path) {
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(ABI_WANTED)
            };
            (&mut created).add_rule(PathBeneath::new(fd, access))?;
        }
        Ok(())
    };
    // Names only: `ls /` works; the mounts decide which names exist.
    rule(Path::new("/"), AccessFs::ReadDir.into())?;
    for p in policy.read.iter().chain(&policy.read_only) {
        rule(p, read)?;
    }
    for p in policy
        .writable()
        .chain(policy.copy_on_write.iter().map(PathBuf::as_path))
    {
        rule(p, all)?;
    }
    if policy.tmp.is_some() {
        rule(Path::new("/tmp"), all)?;
    }
    rule(Path::new("/proc"), read)?;
    rule(Path::new("/dev"), read)?;
    rule(Path::new("/dev/shm"), all)?;
    for name in DEVICES {
        let path = PathBuf::from("/dev").join(name);
        let access = if name.contains("random") {
            AccessFs::ReadFile.into()
        } else {
            file_rw
        };
        rule(&path, access)?;
    }
    let status = created.no_new_privs(true).restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi.unwrap_or(effective_abi as i32),
        LandlockStatus::NotEnabled => 0,
        LandlockStatus::NotImplemented => -1,
    };
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(ConfineError::NotEnforced(match abi {
            0 => "it is built in but not enabled".into(),
            -1 => "not built into the kernel".into(),
            n => format!("ABI {n}"),
        })),
        RulesetStatus::FullyEnforced => Ok(Enforced { abi, fully: true }),
        RulesetStatus::PartiallyEnforced => Ok(Enforced { abi, fully: false }),
    }
}

/// Drops every capability, the bounding set included, so that even a
/// command running as uid 0 inside the user namespace gets none back when
/// it executes a program.
pub fn drop_capabilities() -> Result<(), ConfineError> {
    caps::clear(None, CapSet::Bounding)?;
    caps::clear(None, CapSet::Ambient)?;
    caps::clear(None, CapSet::Inheritable)?;
    caps::clear(None, CapSet::Effective)?;
    caps::clear(None, CapSet::Permitted)?;
    Ok(())
}
