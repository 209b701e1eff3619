//! `whittle sandbox check` and `/sandbox`: the report and the self-test.

use crate::{Harness, stdout};
use std::process::Command;

fn check(h: &Harness, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    cmd.args(["sandbox", "check", "--cwd"])
        .arg(h.ws())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn check_reports_the_policy_and_the_self_test_holds() {
    let h = Harness::new();
    let out = check(&h, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let ws = h.ws().canonicalize().unwrap();
    let writable = text.lines().find(|l| l.contains("writable:")).unwrap();
    assert!(writable.contains(&ws.display().to_string()), "{text}");
    assert!(writable.contains("TMPDIR"), "{text}");
    assert!(
        text.contains("read-only inside those:") && text.contains(".whittle"),
        "{text}"
    );
    assert!(text.contains("network: on"), "{text}");
    assert!(text.contains("not inherited: ANTHROPIC_API_KEY"), "{text}");
    assert_eq!(text.matches(": blocked").count(), 2, "{text}");
    assert!(
        text.contains("allowed (the network is on by config)"),
        "{text}"
    );
    assert!(text.contains("the sandbox holds"), "{text}");

    let out = check(&h, &["--permission-mode", "read-only"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("network: off"), "{text}");
    assert_eq!(text.matches(": blocked").count(), 3, "{text}");

    // Unconfined, the self-test says so and the check fails.
    let out = check(&h, &["--sandbox", "off"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("NOT BLOCKED") && text.contains("does NOT hold"),
        "{text}"
    );
}

#[test]
fn the_repl_shows_the_sandbox() {
    let h = Harness::new();
    let out = h.run_with_stdin(&["--permission-mode", "read-only"], "/sandbox\n");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("sandbox: on"), "{text}");
    assert!(text.contains("network: off"), "{text}");
    assert!(text.contains("the sandbox holds"), "{text}");
}
