//! Normal work still works inside the sandbox: building a crate with
//! cargo, committing with git, installing a local package with npm,
//! making a Python virtual environment, all in the workspace.

use crate::{Harness, assert_success, tool_result};
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;
use testkit::{Reply, content_text};

/// Runs `commands` as bash calls in one sandboxed session (accept-edits,
/// every command allowed by the parser, the kernel's sandbox on) and
/// returns their results.
fn run_in_sandbox(h: &Harness, commands: &[&str], extra_env: &[(&str, PathBuf)]) -> Vec<String> {
    for (i, c) in commands.iter().enumerate() {
        h.server.push(Reply::tool_use(
            format!("c{i}"),
            "bash",
            json!({"command": c, "timeout_secs": 300}),
        ));
    }
    h.server.push(Reply::text("done"));
    let mut cmd = h.command(&[
        "--permission-mode",
        "accept-edits",
        "--allow",
        "bash(*)",
        "-p",
        "work",
    ]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_success(&out);
    let requests = h.requests();
    (0..commands.len())
        .map(|i| {
            let body = &requests[i + 1].body;
            let block = tool_result(body, &format!("c{i}"));
            let text = content_text(&block);
            assert_ne!(block["is_error"], true, "{}: {text}", commands[i]);
            text
        })
        .collect()
}

fn available(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The real toolchain folders (the harness's home is a temp folder).
fn toolchain_env() -> Vec<(&'static str, PathBuf)> {
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_default());
    ["CARGO_HOME", "RUSTUP_HOME"]
        .into_iter()
        .zip([".cargo", ".rustup"])
        .map(|(var, dir)| {
            let path = std::env::var_os(var)
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(dir));
            (var, path)
        })
        .collect()
}

#[test]
fn cargo_builds_a_crate_in_the_workspace() {
    let h = Harness::new();
    let ws = h.ws();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("src/main.rs"),
        "fn main() { println!(\"tiny works\"); }\n",
    )
    .unwrap();
    let out = run_in_sandbox(
        &h,
        &["cargo build --offline --quiet && ./target/debug/tiny"],
        &toolchain_env(),
    );
    assert!(out[0].contains("tiny works"), "{}", out[0]);
    assert!(ws.join("target/debug/tiny").exists());
}

#[test]
fn git_commits_and_hooks_stay_read_only() {
    let h = Harness::new();
    std::fs::write(
        h.home.path().join(".gitconfig"),
        "[user]\n\tname = Sandboxed\n\temail = s@example.com\n",
    )
    .unwrap();
    std::fs::write(h.ws().join("a.txt"), "a\n").unwrap();
    let out = run_in_sandbox(
        &h,
        &[
            "git init -q && git add a.txt && git commit -qm first && git log --format=%an:%s",
            "echo b > b.txt && git add b.txt && git commit -qm second && git log --format=%s | head -1",
            "echo 'touch pwned' > .git/hooks/pre-commit 2>&1 || echo hooks are read-only",
        ],
        &[],
    );
    assert!(out[0].contains("Sandboxed:first"), "{}", out[0]);
    assert!(out[1].contains("second"), "{}", out[1]);
    assert!(out[2].contains("hooks are read-only"), "{}", out[2]);
    assert!(!h.ws().join(".git/hooks/pre-commit").exists());
}

#[test]
fn npm_installs_a_local_package_into_the_workspace() {
    if !available("npm") {
        eprintln!("skipped: npm is not installed");
        return;
    }
    let h = Harness::new();
    let pkg = h.ws().join("localpkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name": "localpkg", "version": "1.0.0", "main": "index.js"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 'local works';\n").unwrap();
    std::fs::create_dir_all(h.ws().join("app")).unwrap();
    std::fs::write(
        h.ws().join("app/package.json"),
        r#"{"name": "app", "version": "1.0.0"}"#,
    )
    .unwrap();
    let out = run_in_sandbox(
        &h,
        &[
            "cd localpkg && npm pack --silent",
            "cd app && npm install --offline --no-audit --no-fund ../localpkg/localpkg-1.0.0.tgz 2>&1 && node -e \"console.log(require('localpkg'))\"",
        ],
        &[],
    );
    assert!(out[1].contains("local works"), "{}", out[1]);
    assert!(h.ws().join("app/node_modules/localpkg/index.js").exists());
}

#[test]
fn python_makes_a_venv_in_the_workspace() {
    let h = Harness::new();
    let out = run_in_sandbox(
        &h,
        &[
            "python3 -m venv .venv && .venv/bin/python -c 'import sys; print(sys.prefix)' && .venv/bin/pip --version",
        ],
        &[],
    );
    assert!(out[0].contains(".venv"), "{}", out[0]);
    assert!(out[0].contains("pip "), "{}", out[0]);
    assert!(h.ws().join(".venv/bin/python").exists());
}
