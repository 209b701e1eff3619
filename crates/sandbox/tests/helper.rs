//! The helper through the crate's own `whittle-sandbox` binary: what a
//! confined command can and cannot do, without whittle around it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use whittle_sandbox::{Layout, Level, Sandbox, private_tmp, self_test};

fn confined(ws: &Path, args: &[&str], script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_whittle-sandbox"))
        .args(args)
        .args(["--", "bash", "-c", script])
        .current_dir(ws)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_workspace_is_writable_and_nothing_else_is() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    let script = format!(
        "echo ok > inside && echo x > {o}/written; cat {s}; echo tmp > /tmp/t && cat /tmp/t",
        o = outside.path().display(),
        s = secret.display()
    );
    let out = confined(ws.path(), &[], &script);
    let t = text(&out);
    assert!(ws.path().join("inside").exists(), "{t}");
    assert!(!outside.path().join("written").exists(), "{t}");
    assert!(!t.contains("s3cret"), "{t}");
    assert!(t.contains("tmp"), "the private /tmp is writable: {t}");
    let out = confined(ws.path(), &["--read-only"], "echo x > ro; echo done");
    assert!(!ws.path().join("ro").exists(), "{}", text(&out));
}

#[test]
fn exit_codes_and_signals_come_through_and_fds_do_not() {
    let ws = tempfile::tempdir().unwrap();
    assert_eq!(confined(ws.path(), &[], "exit 7").status.code(), Some(7));
    assert_eq!(
        confined(ws.path(), &[], "kill -9 $$").status.code(),
        Some(128 + 9)
    );
    let out = confined(ws.path(), &[], "ls /proc/self/fd | wc -l");
    // 0, 1, 2 and the one ls opens to list them.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "4",
        "{}",
        text(&out)
    );
}

#[test]
fn the_self_test_holds_confined_and_fails_unconfined() {
    let ws = tempfile::tempdir().unwrap();
    let tmp = private_tmp().unwrap();
    let env = |k: &str| std::env::var(k).ok();
    let policy = Layout {
        level: Level::WorkspaceWrite,
        workspace: ws.path().to_path_buf(),
        env: &env,
        writable_roots: vec![],
        read_roots: vec![],
        hidden: vec![],
        network: false,
        tmp: Some(tmp.path().to_path_buf()),
        layers: None,
    }
    .policy()
    .unwrap();
    let helper = env!("CARGO_BIN_EXE_whittle-sandbox").into();
    let sandbox = Sandbox::confined(helper, policy, vec![tmp], vec![]).unwrap();
    let findings = self_test(&sandbox, ws.path()).unwrap();
    assert_eq!(findings.len(), 3);
    assert!(
        findings.iter().all(|f| f.blocked && f.passed()),
        "{findings:?}"
    );
    let findings = self_test(&Sandbox::none(), ws.path()).unwrap();
    assert!(
        findings.iter().filter(|f| !f.passed()).count() >= 2,
        "{findings:?}"
    );
}

/// True when python3 runs here (the probes below use it for ioctl and
/// ptrace); the tests say so and stop when it does not.
fn python() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import fcntl, ctypes"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: python3 is not available");
    }
    ok
}

#[test]
fn commands_have_no_terminal_and_cannot_push_input_into_one() {
    if !python() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    // TIOCSTI on a pipe fails either way: EPERM is seccomp's answer, ENOTTY
    // the terminal layer's. High bits set must not get past the filter.
    let script = r#"
import errno, fcntl, os
for request in (0x5412, 0x100005412, 0x541C):
    try:
        fcntl.ioctl(1, request, b"x")
        print("allowed", hex(request))
    except OSError as e:
        print(errno.errorcode[e.errno], hex(request))
print("tty_nr", open("/proc/self/stat").read().rsplit(")", 1)[1].split()[4])
print("dev_tty", os.path.exists("/dev/tty"))
"#;
    let out = confined(ws.path(), &[], &format!("python3 -c '{script}' | cat"));
    let t = text(&out);
    for request in ["0x5412", "0x100005412", "0x541c"] {
        assert!(t.contains(&format!("EPERM {request}")), "{t}");
    }
    assert!(t.contains("tty_nr 0"), "no controlling terminal: {t}");
    assert!(t.contains("dev_tty False"), "{t}");
}

#[test]
fn the_first_process_cannot_be_traced() {
    if !python() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let script = "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
                  r = l.ptrace(16, 1, 0, 0); print('attach', r, ctypes.get_errno())";
    let out = confined(ws.path(), &[], &format!("python3 -c \"{script}\""));
    let t = text(&out);
    assert!(t.contains("attach -1 1"), "EPERM at once: {t}");
}

#[test]
fn package_caches_are_copy_on_write() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let registry = home.path().join(".cargo/registry");
    std::fs::create_dir_all(registry.join("src")).unwrap();
    std::fs::write(registry.join("src/lib.rs"), "original").unwrap();
    let script = format!(
        "echo planted > {r}/src/lib.rs && touch {r}/build.rs && cat {r}/src/lib.rs && rm -rf {r}/src && echo gone",
        r = registry.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_whittle-sandbox"))
        .args(["--", "bash", "-c", &script])
        .current_dir(ws.path())
        .env("HOME", home.path())
        // rustup sets CARGO_HOME for what cargo runs.
        .env("CARGO_HOME", home.path().join(".cargo"))
        .env_remove("npm_config_cache")
        .env_remove("PIP_CACHE_DIR")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(
        t.contains("planted") && t.contains("gone"),
        "writable inside: {t}"
    );
    assert_eq!(
        std::fs::read_to_string(registry.join("src/lib.rs")).unwrap(),
        "original",
        "{t}"
    );
    assert!(!registry.join("build.rs").exists(), "{t}");
    for missing in [".npm", ".cargo/git", ".cache/pip"] {
        assert!(!home.path().join(missing).exists(), "{missing} was made");
    }
}

#[test]
fn a_git_folder_cannot_be_renamed_and_git_still_works() {
    let ws = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@x"])
            .args(args)
            .current_dir(ws.path())
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !git(&["init", "-q"]) {
        println!("skipped: git is not available");
        return;
    }
    assert!(git(&["commit", "-q", "--allow-empty", "-m", "one"]));
    let script = "mv .git .git-old; echo mv=$?; \
        G='git -c user.name=t -c user.email=t@x'; \
        echo a > a && $G add a && $G commit -qm two && echo commit-ok; \
        $G checkout -qb side && echo branch-ok; \
        echo b > a && $G stash -q && $G stash pop -q && echo stash-ok; \
        $G worktree add -q wt && echo worktree-ok; \
        $G init -q fresh && echo init-ok; \
        echo x > .git/hooks/post-commit; echo hook=$?";
    let out = confined(ws.path(), &[], script);
    let t = text(&out);
    for ok in [
        "mv=1",
        "commit-ok",
        "branch-ok",
        "stash-ok",
        "worktree-ok",
        "init-ok",
        "hook=1",
    ] {
        assert!(t.contains(ok), "{ok}: {t}");
    }
    assert!(ws.path().join(".git/HEAD").exists());
}
