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
    }
    .policy()
    .unwrap();
    let helper = env!("CARGO_BIN_EXE_whittle-sandbox").into();
    let sandbox = Sandbox::confined(helper, policy, Some(tmp), vec![]).unwrap();
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
