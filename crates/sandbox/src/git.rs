//! whittle's own git (the environment block's branch and status): a cloned
//! repository is the attacker's, and git obeys its config, so `git status`
//! in it can run `core.fsmonitor`, a filter driver, a submodule's config.
//! Here git runs with no keys in its environment (only `PATH`, `HOME` and
//! git's own switches), every program-running setting blanked through
//! `GIT_CONFIG_*` (which outranks every config file, and needs no quoting),
//! submodules ignored, and — where the kernel can — inside a read-only,
//! offline sandbox as well. Opening a hostile repository runs nothing
//! from it.

use crate::sandbox::Sandbox;
use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one git call may take before it is killed and left out.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings that name a program (or a place git would run one from),
/// blanked for every git whittle runs itself.
const BLANKED: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.sshCommand", "false"),
    ("core.askPass", ""),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("core.untrackedCache", "false"),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("uploadpack.packObjectsHook", ""),
    ("protocol.allow", "never"),
];

/// Per-driver settings that run a program: blanked for every driver name
/// the repository's config declares (`filter.NAME.clean`, ...).
const DRIVER_KEYS: &[(&str, &[(&str, &str)])] = &[
    (
        "filter",
        &[
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ],
    ),
    ("diff", &[("textconv", ""), ("command", "")]),
    ("merge", &[("driver", "")]),
];

/// Runs git for whittle itself, quietly: see the module's doc.
#[derive(Clone, Debug)]
pub struct QuietGit {
    /// A read-only, offline sandbox, when the kernel can confine.
    sandbox: Option<Sandbox>,
    path: Option<OsString>,
    home: Option<OsString>,
}

impl QuietGit {
    /// git confined to `sandbox` (a read-only one) when given, with `PATH`
    /// and `HOME` of whittle's environment.
    pub fn new(sandbox: Option<Sandbox>) -> QuietGit {
        QuietGit {
            sandbox,
            path: std::env::var_os("PATH"),
            home: std::env::var_os("HOME"),
        }
    }

    /// Whether git runs confined.
    pub fn is_confined(&self) -> bool {
        self.sandbox.is_some()
    }

    /// git's standard output for `args` run in `dir`, or `None` when git is
    /// missing, fails, or takes longer than [`GIT_TIMEOUT`].
    pub fn run(&self, dir: &Path, args: &[&str]) -> Option<String> {
        let blank = self.driver_settings(dir);
        self.run_with(dir, args, &blank)
    }

    /// The `GIT_CONFIG_*` variables that blank every program-running
    /// setting of the repository at `dir` (its drivers as they are now), for
    /// commands that must run nothing the repository names: read-only mode.
    pub fn blanking_env(&self, dir: &Path) -> Vec<(String, String)> {
        config_env(&self.driver_settings(dir))
    }

    /// Blank settings for every driver the config at `dir` declares.
    fn driver_settings(&self, dir: &Path) -> Vec<(String, String)> {
        let names = self
            .run_with(dir, &["config", "--null", "--name-only", "--list"], &[])
            .unwrap_or_default();
        let drivers = driver_names(&names);
        let mut blank: Vec<(String, String)> = Vec::new();
        for (section, keys) in DRIVER_KEYS {
            for name in drivers.iter().filter(|(s, _)| s == section).map(|(_, n)| n) {
                for (key, value) in *keys {
                    blank.push((format!("{section}.{name}.{key}"), (*value).to_string()));
                }
            }
        }
        blank
    }

    fn run_with(&self, dir: &Path, args: &[&str], blank: &[(String, String)]) -> Option<String> {
        let mut cmd = match &self.sandbox {
            Some(sandbox) => sandbox.command("git", args).ok()?,
            None => {
                let mut c = Command::new("git");
                c.args(args);
                c
            }
        };
        cmd.env_clear();
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        if let Some(home) = &self.home {
            cmd.env("HOME", home);
        }
        cmd.envs(config_env(blank));
        let dot_git = dir.join(".git");
        // A work tree named by the repository's config could lie anywhere.
        if std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_dir()) {
            cmd.env("GIT_DIR", &dot_git).env("GIT_WORK_TREE", dir);
        }
        cmd.env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("LC_ALL", "C")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        output_within(cmd, GIT_TIMEOUT)
    }
}

/// `GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n` for the
/// always-blanked settings and `more`.
fn config_env(more: &[(String, String)]) -> Vec<(String, String)> {
    let settings: Vec<(String, String)> = BLANKED
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .chain(more.iter().cloned())
        .collect();
    let mut out = vec![("GIT_CONFIG_COUNT".to_string(), settings.len().to_string())];
    for (i, (key, value)) in settings.into_iter().enumerate() {
        out.push((format!("GIT_CONFIG_KEY_{i}"), key));
        out.push((format!("GIT_CONFIG_VALUE_{i}"), value));
    }
    out
}

/// (section, name) of every `filter.NAME.*`, `diff.NAME.*` and
/// `merge.NAME.*` key in `git config --null --name-only --list` output.
fn driver_names(list: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .split('\0')
        .filter_map(|key| {
            let (section, rest) = key.split_once('.')?;
            let section = section.to_ascii_lowercase();
            if !DRIVER_KEYS.iter().any(|(s, _)| *s == section) {
                return None;
            }
            let (name, _) = rest.rsplit_once('.')?;
            Some((section, name.to_string()))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The command's standard output when it succeeds within `timeout`; it is
/// killed otherwise (for a confined one, killing the helper ends the whole
/// sandbox).
fn output_within(mut cmd: Command, timeout: Duration) -> Option<String> {
    let mut child = cmd.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    // Read on a thread, so a large output cannot fill the pipe and stall git.
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let bytes = reader.join().ok()?;
    status
        .filter(|s| s.success())
        .map(|_| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_are_found_whatever_they_hold() {
        let list = "core.bare\0filter.lfs.clean\0filter.a.b=c.process\0diff.tc.textconv\0Merge.m.driver\0user.name\0";
        assert_eq!(
            driver_names(list),
            vec![
                ("diff".to_string(), "tc".to_string()),
                ("filter".to_string(), "a.b=c".to_string()),
                ("filter".to_string(), "lfs".to_string()),
                ("merge".to_string(), "m".to_string()),
            ]
        );
    }

    /// A repository whose config names a program for every setting git
    /// status could run: none of them runs, and the status is right.
    #[test]
    fn a_hostile_repository_runs_nothing() {
        if Command::new("git").arg("--version").output().is_err() {
            println!("skipped a_hostile_repository_runs_nothing: git is not available");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let canary = ws.join("canary");
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .current_dir(ws)
                .env("HOME", ws)
                .output()
                .unwrap()
        };
        git(&["init", "-q", "-b", "trunk"]);
        std::fs::write(ws.join("a.txt"), "one\n").unwrap();
        std::fs::write(ws.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
        git(&["add", "."]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@x",
            "commit",
            "-qm",
            "x",
        ]);
        let touch = format!("touch {}", canary.display());
        for (key, value) in [
            ("core.fsmonitor", touch.as_str()),
            ("filter.evil.clean", touch.as_str()),
            ("filter.evil.process", touch.as_str()),
            ("filter.evil.required", "true"),
            ("diff.evil.textconv", touch.as_str()),
            ("core.pager", touch.as_str()),
            ("core.sshCommand", touch.as_str()),
        ] {
            git(&["config", key, value]);
        }
        // Changed content with a new mtime and size: status must look.
        std::fs::write(ws.join("a.txt"), "one two\n").unwrap();
        let status = QuietGit::new(None)
            .run(ws, &["status", "--porcelain=v1", "--branch"])
            .expect("status runs");
        assert!(!canary.exists(), "a program of the repository ran");
        assert!(status.starts_with("## trunk"), "{status}");
        assert!(status.contains(" M a.txt"), "{status}");
    }
}
