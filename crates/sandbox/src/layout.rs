//! From a level and the user's machine to a [`Policy`]: which system and
//! toolchain folders commands read, which folders they change, and which
//! paths stay read-only or hidden inside those.

use crate::error::SandboxError;
use crate::islands::{add_git_islands, add_workspace_islands};
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How much a confined command may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Nothing but device files like `/dev/null` and the private temp folder.
    ReadOnly,
    /// The workspace (less its settings and hooks), the private temp folder,
    /// the package managers' caches and configured extra roots.
    WorkspaceWrite,
}

impl Level {
    /// The name used in config files and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::ReadOnly => "read-only",
            Level::WorkspaceWrite => "workspace-write",
        }
    }
}

/// Looks up an environment variable of whittle's own environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Folders of the system every command may read.
const SYSTEM_ROOTS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
];

/// Toolchain folders in the home folder (read and execute only), each with
/// the variable that moves it elsewhere.
const HOME_TOOLCHAINS: &[(&str, Option<&str>)] = &[
    (".cargo", Some("CARGO_HOME")),
    (".rustup", Some("RUSTUP_HOME")),
    (".pyenv", Some("PYENV_ROOT")),
    (".nvm", Some("NVM_DIR")),
    (".volta", Some("VOLTA_HOME")),
    (".bun", Some("BUN_INSTALL")),
    (".deno", Some("DENO_INSTALL")),
    (".local/bin", None),
    (".local/lib", None),
    // git's identity, so `git commit` works.
    (".gitconfig", None),
    (".config/git", None),
];

/// Folder names of toolchains whose root a `PATH` entry inside them needs.
const TOOLCHAIN_NAMES: &[&str] = &[
    ".cargo", ".rustup", ".pyenv", ".nvm", ".volta", ".bun", ".deno", ".rbenv", ".goenv",
];

/// Secrets hidden even when a visible folder holds them (the workspace may
/// be the home folder): relative to the home folder.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".docker",
    ".kube",
    ".git-credentials",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".password-store",
    ".local/share/keyrings",
];

/// Secrets of the system, readable by root, hidden from commands.
const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
];

/// Everything a sandbox is built from.
pub struct Layout<'a> {
    /// How much commands may change.
    pub level: Level,
    /// The folder the agent works in (absolute).
    pub workspace: PathBuf,
    /// whittle's environment: `HOME`, `PATH` and the toolchain variables.
    pub env: Env<'a>,
    /// `[sandbox] writable_roots`.
    pub writable_roots: Vec<PathBuf>,
    /// `[sandbox] read_roots`.
    pub read_roots: Vec<PathBuf>,
    /// More paths to hide if a visible folder holds them (whittle's own
    /// user config folder).
    pub hidden: Vec<PathBuf>,
    /// Whether commands share the machine's network.
    pub network: bool,
    /// The private temp folder.
    pub tmp: Option<PathBuf>,
    /// A private folder, outside every folder commands see, for the upper
    /// layers of the package caches; without one the caches are read-only.
    pub layers: Option<PathBuf>,
}

impl Layout<'_> {
    /// The policy for this layout. Only the level, the config and the
    /// machine decide what is granted; the workspace's content (`.git`
    /// files, `commondir`, links) only adds protection inside it. Creates
    /// nothing outside the workspace: the workspace's `.whittle/` (so a
    /// command cannot create it with its own config) and missing `hooks/`
    /// and `info/` folders of its repositories.
    pub fn policy(&self) -> Result<Policy, SandboxError> {
        let home = (self.env)("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        let workspace = real(&self.workspace).unwrap_or_else(|| self.workspace.clone());
        let mut p = Policy {
            network: self.network,
            tmp: self.tmp.as_deref().and_then(real),
            ..Policy::default()
        };
        for root in SYSTEM_ROOTS {
            add_following_link(&mut p, Path::new(root));
        }
        if let Ok(resolv) = Path::new("/etc/resolv.conf").canonicalize() {
            p.read.push(resolv);
        }
        for dir in self.toolchains(home.as_deref()) {
            if let Some(dir) = real(&dir) {
                p.read.push(dir);
            }
        }
        for dir in self.path_dirs(home.as_deref(), &workspace) {
            p.read.push(dir);
        }
        p.read
            .extend(self.read_roots.iter().filter_map(|r| real(r)));
        match self.level {
            Level::ReadOnly => p.read.push(workspace.clone()),
            Level::WorkspaceWrite => {
                p.write.push(workspace.clone());
                let layers = self.layers.as_deref().and_then(real);
                // Only caches that exist: whittle makes none of them.
                for cache in self.caches(home.as_deref()).iter().filter_map(|c| real(c)) {
                    if layers.is_some() {
                        p.copy_on_write.push(cache);
                    } else {
                        p.read.push(cache);
                    }
                }
                p.layers = layers;
                let configured: Vec<PathBuf> =
                    self.writable_roots.iter().filter_map(|r| real(r)).collect();
                p.write.extend(configured.iter().cloned());
                create_dir(&workspace.join(".whittle"))?;
                ignore_in_git(&workspace.join(".whittle"));
                add_workspace_islands(&mut p, &workspace);
                p.repo_roots = std::iter::once(workspace.clone())
                    .chain(configured)
                    .collect();
                p.quarantine = Some(workspace.join(".whittle").join("quarantine"));
                for root in p.repo_roots.clone() {
                    add_git_islands(&mut p, &root);
                }
            }
        }
        p.hidden = self.secrets(home.as_deref());
        p.tidy();
        Ok(p)
    }

    /// The toolchain folders of the home folder, or where their variables
    /// point.
    fn toolchains(&self, home: Option<&Path>) -> Vec<PathBuf> {
        HOME_TOOLCHAINS
            .iter()
            .filter_map(|(rel, var)| {
                var.and_then(|v| (self.env)(v))
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .or_else(|| home.map(|h| h.join(rel)))
            })
            .collect()
    }

    /// `PATH`'s folders themselves (their parents are not: `~/.local/bin`
    /// does not open `~/.local/share`), plus the root of a known toolchain
    /// one lies in,
    /// less those that would open up too much: the root, the home folder or
    /// a parent of it, the system temp folder, a parent of the workspace.
    fn path_dirs(&self, home: Option<&Path>, workspace: &Path) -> Vec<PathBuf> {
        let temp = real(&std::env::temp_dir());
        let path = (self.env)("PATH").unwrap_or_default();
        let acceptable = |d: &Path| {
            d.parent().is_some()
                && !home.is_some_and(|h| h.starts_with(d))
                && temp.as_deref().is_none_or(|t| !d.starts_with(t))
                && !workspace.starts_with(d)
        };
        let mut out = Vec::new();
        for dir in std::env::split_paths(&path).filter(|d| d.is_absolute()) {
            let Some(dir) = real(&dir) else { continue };
            // A shim or bin folder of a known toolchain needs its root
            // (`~/.pyenv/shims` runs `~/.pyenv/libexec/pyenv`), wherever
            // that toolchain lives.
            let root = dir
                .ancestors()
                .find(|a| {
                    a.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| TOOLCHAIN_NAMES.contains(&n))
                })
                .map(Path::to_path_buf);
            out.extend(std::iter::once(dir).chain(root).filter(|d| acceptable(d)));
        }
        out
    }

    /// The package managers' caches: cargo's registry and git folders,
    /// npm's and pip's caches.
    fn caches(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let var = |name: &str| {
            (self.env)(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let mut out = Vec::new();
        if let Some(cargo) = var("CARGO_HOME").or_else(|| home.map(|h| h.join(".cargo"))) {
            out.push(cargo.join("registry"));
            out.push(cargo.join("git"));
        }
        out.extend(var("npm_config_cache").or_else(|| home.map(|h| h.join(".npm"))));
        out.extend(
            var("PIP_CACHE_DIR")
                .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("pip")))
                .or_else(|| home.map(|h| h.join(".cache").join("pip"))),
        );
        out
    }

    /// Secrets that exist, resolved.
    fn secrets(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
        if let Some(h) = home {
            out.extend(HOME_SECRETS.iter().map(|s| h.join(s)));
        }
        let cargo = (self.env)("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".cargo")));
        if let Some(c) = cargo {
            out.push(c.join("credentials"));
            out.push(c.join("credentials.toml"));
        }
        out.extend(self.hidden.iter().cloned());
        out.iter().filter_map(|s| real(s)).collect()
    }
}

/// Adds a system root, recreating it as a link when it is one (`/bin ->
/// usr/bin` on merged systems) and adding what it points to.
fn add_following_link(p: &mut Policy, root: &Path) {
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.file_type().is_symlink() => {
            if let (Ok(target), Some(resolved)) = (std::fs::read_link(root), real(root)) {
                p.links.push((root.to_path_buf(), target));
                p.read.push(resolved);
            }
        }
        Ok(_) => p.read.extend(real(root)),
        Err(_) => {}
    }
}

/// `path` with symlinks and `..` resolved, when it exists.
fn real(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

/// A `.gitignore` of `*` in whittle's folder, so git leaves it alone:
/// `git status` does not list it and `git stash -u` or `git clean` do not
/// try to remove what commands cannot change.
fn ignore_in_git(dir: &Path) {
    let file = dir.join(".gitignore");
    if std::fs::symlink_metadata(&file).is_err() {
        let _ = std::fs::write(file, "*\n");
    }
}

fn create_dir(path: &Path) -> Result<(), SandboxError> {
    std::fs::create_dir_all(path).map_err(|source| SandboxError::Create {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Machine {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    impl Machine {
        fn new() -> Machine {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            for d in [
                "home/.ssh",
                "home/.cargo/bin",
                "home/.rustup",
                "home/.config/whittle",
                "ws/.git/hooks",
                "ws/sub/.git/hooks",
                "ws/node_modules/.bin",
            ] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            std::fs::write(root.join("home/.cargo/credentials.toml"), "token").unwrap();
            std::fs::write(root.join("ws/.git/config"), "").unwrap();
            std::fs::write(root.join("home/.gitconfig"), "").unwrap();
            Machine { _dir: dir, root }
        }

        fn policy(&self, level: Level, vars: &[(&str, String)]) -> Policy {
            let vars: HashMap<String, String> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .chain([("HOME".to_string(), self.p("home").display().to_string())])
                .collect();
            let env = move |k: &str| vars.get(k).cloned();
            Layout {
                level,
                workspace: self.p("ws"),
                env: &env,
                writable_roots: vec![],
                read_roots: vec![],
                hidden: vec![self.p("home/.config/whittle")],
                network: false,
                tmp: None,
                layers: None,
            }
            .policy()
            .unwrap()
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }
    }

    #[test]
    fn the_workspace_is_writable_less_its_settings_and_hooks() {
        let m = Machine::new();
        let p = m.policy(Level::WorkspaceWrite, &[]);
        assert!(p.allows_write(&m.p("ws/src/lib.rs")));
        std::fs::remove_dir(m.p("ws/sub/.git/hooks")).unwrap();
        let p = m.policy(Level::WorkspaceWrite, &[]);
        for island in [".whittle", ".git/hooks", ".git/config", "sub/.git/hooks"] {
            assert!(
                !p.allows_write(&m.p(&format!("ws/{island}/x"))),
                "{island} is read-only: {p:?}"
            );
        }
        assert!(p.pinned.contains(&m.p("ws/.git")), "{p:?}");
        assert!(p.absent.contains(&m.p("ws/.vscode")), "{p:?}");
        assert!(m.p("ws/.whittle").is_dir(), ".whittle is made beforehand");
        assert!(!p.allows_write(&m.p("home/.cargo/bin/cargo")));
        assert!(p.allows_read(&m.p("home/.cargo/bin/cargo")));
        assert!(p.allows_read(&m.p("home/.gitconfig")));
        assert!(!p.allows_read(&m.p("home/.cargo/credentials.toml")));
        assert!(!p.allows_read(&m.p("home/.ssh/id_ed25519")));
        assert!(!p.allows_read(&m.p("home/.bashrc")));
        assert!(!p.allows_read(&m.p("home/.config/whittle/config.toml")));
        for cache in [".npm", ".cargo/registry", ".cargo/git", ".cache/pip"] {
            assert!(!m.p("home").join(cache).exists(), "{cache} is not made");
        }
    }

    #[test]
    fn existing_caches_are_copy_on_write_when_there_is_a_layer_folder() {
        let m = Machine::new();
        std::fs::create_dir_all(m.p("home/.cargo/registry")).unwrap();
        std::fs::create_dir_all(m.p("layers")).unwrap();
        let vars: HashMap<&str, PathBuf> = [("HOME", m.p("home"))].into();
        let env = |k: &str| vars.get(k).map(|p| p.display().to_string());
        let layout = |layers: Option<PathBuf>| Layout {
            level: Level::WorkspaceWrite,
            workspace: m.p("ws"),
            env: &env,
            writable_roots: vec![],
            read_roots: vec![],
            hidden: vec![],
            network: true,
            tmp: None,
            layers,
        };
        let p = layout(Some(m.p("layers"))).policy().unwrap();
        assert_eq!(p.copy_on_write, vec![m.p("home/.cargo/registry")]);
        assert_eq!(p.layers, Some(m.p("layers")));
        assert!(!p.allows_write(&m.p("home/.cargo/registry/src/x/build.rs")));
        let p = layout(None).policy().unwrap();
        assert!(p.copy_on_write.is_empty());
        assert!(p.allows_read(&m.p("home/.cargo/registry/x")));
        assert!(!p.allows_write(&m.p("home/.cargo/registry/x")));
    }

    #[test]
    fn read_only_leaves_nothing_writable_and_path_dirs_in_the_workspace_alone() {
        let m = Machine::new();
        let path = format!(
            "{}:{}:/usr/bin",
            m.p("ws/node_modules/.bin").display(),
            m.p("home").display()
        );
        let p = m.policy(Level::ReadOnly, &[("PATH", path)]);
        assert_eq!(p.writable().count(), 0, "{p:?}");
        assert!(p.allows_read(&m.p("ws/src/lib.rs")));
        assert!(
            !p.read.contains(&m.p("home")),
            "the home folder on PATH is not opened up"
        );
        assert!(!p.allows_read(&m.p("home/.bashrc")));
        let p = m.policy(
            Level::WorkspaceWrite,
            &[("PATH", m.p("ws/node_modules/.bin").display().to_string())],
        );
        assert!(
            p.allows_write(&m.p("ws/node_modules/.bin/x")),
            "a PATH folder inside the workspace does not become read-only"
        );
    }

    #[test]
    fn a_home_that_is_the_workspace_still_hides_its_secrets() {
        let m = Machine::new();
        let vars: HashMap<&str, PathBuf> = [("HOME", m.p("home"))].into();
        let env = |k: &str| vars.get(k).map(|p| p.display().to_string());
        let p = Layout {
            level: Level::WorkspaceWrite,
            workspace: m.p("home"),
            env: &env,
            writable_roots: vec![],
            read_roots: vec![],
            hidden: vec![m.p("home/.config/whittle")],
            network: true,
            tmp: None,
            layers: None,
        }
        .policy()
        .unwrap();
        assert!(p.allows_write(&m.p("home/notes.txt")));
        assert!(!p.allows_read(&m.p("home/.ssh/id_ed25519")));
        assert!(!p.allows_write(&m.p("home/.config/whittle/config.toml")));
        assert!(p.hidden.contains(&m.p("home/.ssh")));
    }

    #[test]
    fn a_git_file_in_the_workspace_never_widens_the_sandbox() {
        let m = Machine::new();
        let common = m.p("main/.git");
        let gitdir = common.join("worktrees/wt");
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(m.p("ws/wt")).unwrap();
        std::fs::write(m.p("ws/wt/.git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        std::fs::write(m.p("ws/sub/.git/commondir"), "../../../home\n").unwrap();
        std::fs::write(m.p("ws/.git/x"), "").unwrap();
        let p = m.policy(Level::WorkspaceWrite, &[]);
        for outside in [&common, &gitdir, &m.p("home"), &m.p("main")] {
            assert!(!p.allows_write(&outside.join("x")), "{outside:?}: {p:?}");
            assert!(!p.allows_read(&outside.join("x")), "{outside:?}: {p:?}");
        }
        assert!(
            !p.allows_write(&m.p("ws/wt/.git")),
            "the .git file is read-only"
        );
        assert!(!p.allows_write(&m.p("ws/sub/.git/commondir")));
        assert!(p.allows_write(&m.p("ws/.git/objects/ab")));
        assert!(p.allows_write(&m.p("ws/.git/index")));
        assert!(
            !p.allows_write(&m.p("main/.git/hooks")),
            "nothing made outside"
        );
        assert!(!common.join("hooks").exists(), "nothing made outside");
    }

    #[test]
    fn path_folders_expose_only_themselves() {
        let m = Machine::new();
        std::fs::create_dir_all(m.p("home/.local/bin")).unwrap();
        std::fs::create_dir_all(m.p("home/.local/share/app")).unwrap();
        std::fs::create_dir_all(m.p("opt/tool/bin")).unwrap();
        let path = format!(
            "{}:{}",
            m.p("home/.local/bin").display(),
            m.p("opt/tool/bin").display()
        );
        let p = m.policy(Level::WorkspaceWrite, &[("PATH", path)]);
        assert!(p.allows_read(&m.p("home/.local/bin/x")));
        assert!(!p.allows_read(&m.p("home/.local/share/app/x")), "{p:?}");
        assert!(!p.allows_read(&m.p("opt/tool/secret")), "{p:?}");
    }
}
