//! Confines the commands whittle runs for the model, on Linux.
//!
//! The permission parser reads a command's text and can be fooled by any
//! shell trick; this crate makes the kernel hold the boundary instead.
//! A command runs through a helper (whittle's own binary started again with
//! `__sandbox`, see [`run_helper_if_asked`]) that:
//!
//! - enters new user, mount, PID, IPC and UTS namespaces, and a network
//!   namespace of its own when the network is off;
//! - builds a fresh root holding only what the [`Policy`] names, bound
//!   read-only or writable, with settings and hooks inside the workspace
//!   read-only and secrets covered, a minimal `/dev` and a `/proc` of its
//!   own PID namespace;
//! - applies Landlock with the same lists (reads, writes, devices), scopes
//!   abstract sockets and signals to the sandbox, and drops every
//!   capability, with `no_new_privs` so set-uid programs gain nothing;
//! - runs the command as the first process's child, in a session of its
//!   own with no terminal (and `TIOCSTI` refused by seccomp), closing every
//!   file descriptor but the standard streams; the first process cannot be
//!   traced; when the command ends, or whittle dies, the whole namespace
//!   is killed.
//!
//! Nothing in the workspace widens the sandbox: `.git` files, `commondir`
//! and links only add protection inside it (see the `islands` module), the
//! package caches are seen copy-on-write, and whittle's own git
//! ([`QuietGit`]) and reads of workspace files ([`read_regular_file`]) run
//! and block on nothing the repository supplies.
//!
//! [`Layout`] turns a [`Level`] and the user's machine into a [`Policy`];
//! [`Sandbox`] is what the tools hold to build commands; [`probe`] checks
//! at start that the kernel can do all this, so whittle can fail closed.
//!
//! ```
//! use std::path::Path;
//! use whittle_sandbox::Policy;
//!
//! // What a command may touch, as the helper enforces it twice (mounts, Landlock).
//! let policy = Policy {
//!     read: vec!["/usr".into()],
//!     write: vec!["/ws".into()],
//!     read_only: vec!["/ws/.git/hooks".into()],
//!     ..Policy::default()
//! };
//! assert!(policy.allows_write(Path::new("/ws/src/main.rs")));
//! assert!(!policy.allows_write(Path::new("/ws/.git/hooks/pre-commit")));
//! assert!(!policy.allows_read(Path::new("/home/me/.ssh/id_ed25519")));
//!
//! // A file whittle reads on its own: regular, bounded, never blocking.
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("AGENTS.md"), "be brief").unwrap();
//! let text = whittle_sandbox::read_regular_file(&dir.path().join("AGENTS.md"), 1 << 20).unwrap();
//! assert_eq!(text, b"be brief");
//! ```

mod check;
mod confine;
mod error;
mod git;
mod harmless_config;
mod helper;
mod islands;
mod layout;
mod mounts;
mod new_repos;
mod policy;
mod quarantine;
mod read;
mod sandbox;
mod spawn;
mod tmp;

pub use check::{Finding, SelfTestError, self_test};
pub use error::SandboxError;
pub use git::{GIT_TIMEOUT, QuietGit};
pub use helper::{HELPER_FAILED, run_helper_if_asked};
pub use layout::{Env, Layout, Level};
pub use policy::Policy;
pub use quarantine::{Quarantined, quarantine_new_paths};
pub use read::{AtName, ReadError, open_regular_file, read_regular_file};
pub use sandbox::{ProbeError, Sandbox, SandboxState, Support, probe, probe_contain};
pub use tmp::{private_layers, private_tmp};
