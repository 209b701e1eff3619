//! Fail closed: on a kernel that cannot sandbox, `whittle -p` says so in
//! one line at start and refuses commands, unless `--sandbox off`.
//!
//! The kernel without Landlock (or without user namespaces) is simulated
//! for real: this test binary starts itself again with `--exec-whittle`,
//! installs a seccomp filter that makes `landlock_create_ruleset` fail with
//! ENOSYS (or `unshare` with EPERM), and executes whittle, which inherits
//! the filter. A plain `main` (no libtest harness), so the filter is
//! installed while the process has one thread.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use serde_json::json;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use testkit::{Reply, TestServer, content_text};

const KEY: &str = "sk-ant-fail-closed-0123456789";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--exec-whittle") {
        exec_whittle_without(&args[2], &args[3..]);
    }
    let mut passed = 0;
    for (name, test) in [
        (
            "a kernel that cannot sandbox: -p refuses commands",
            refuses_commands as fn(&str),
        ),
        (
            "a kernel that cannot sandbox: --sandbox off runs them",
            runs_them_when_off,
        ),
        (
            "a kernel that cannot sandbox: sandbox check fails",
            check_says_unavailable,
        ),
    ] {
        for missing in ["landlock", "userns"] {
            test(missing);
            println!("test {name} ({missing} missing) ... ok");
            passed += 1;
        }
    }
    println!("fail_closed: {passed} passed, 0 failed");
}

/// Installs the filter and becomes whittle.
fn exec_whittle_without(missing: &str, args: &[String]) -> ! {
    let (syscall, errno) = match missing {
        "landlock" => (libc::SYS_landlock_create_ruleset, libc::ENOSYS),
        _ => (libc::SYS_unshare, libc::EPERM),
    };
    let filter = SeccompFilter::new(
        BTreeMap::from([(syscall, vec![])]),
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        TargetArch::x86_64,
    )
    .unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&program).unwrap();
    let err = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(args)
        .exec();
    panic!("cannot execute whittle: {err}");
}

struct Setup {
    server: TestServer,
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            server: TestServer::start_blocking(),
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        }
    }

    fn whittle(&self, missing: &str, args: &[&str]) -> Output {
        Command::new(std::env::current_exe().unwrap())
            .arg("--exec-whittle")
            .arg(missing)
            .arg("--cwd")
            .arg(self.ws.path())
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("ANTHROPIC_BASE_URL", self.server.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .envs(std::env::var_os("WHITTLE_TEST_RUN").map(|v| ("WHITTLE_TEST_RUN", v)))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn touch_call(&self) {
        self.server.push(Reply::tool_use(
            "t",
            "bash",
            json!({"command": "touch ran.txt"}),
        ));
        self.server.push(Reply::text("done"));
    }

    fn result(&self) -> (String, bool) {
        let body = &self.server.requests()[1].body;
        let last = body["messages"].as_array().unwrap().last().unwrap();
        let block = last["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_result")
            .unwrap()
            .clone();
        (content_text(&block), block["is_error"] == true)
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refuses_commands(missing: &str) {
    let s = Setup::new();
    s.touch_call();
    let out = s.whittle(missing, &["--allow", "bash(*)", "-p", "touch a file"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let notices: Vec<&str> = err.lines().filter(|l| l.starts_with("sandbox:")).collect();
    assert_eq!(notices.len(), 1, "one line at start: {err}");
    let why = if missing == "landlock" {
        "Landlock"
    } else {
        "namespaces"
    };
    assert!(notices[0].contains(why), "{err}");
    let (text, is_error) = s.result();
    assert!(is_error, "{text}");
    assert!(
        text.contains("refused") && text.contains("--sandbox off"),
        "{text}"
    );
    assert!(!s.ws.path().join("ran.txt").exists(), "the command ran");
}

fn runs_them_when_off(missing: &str) {
    let s = Setup::new();
    s.touch_call();
    let out = s.whittle(
        missing,
        &[
            "--sandbox",
            "off",
            "--allow",
            "bash(*)",
            "-p",
            "touch a file",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sandbox: off by request"),
        "{}",
        stderr(&out)
    );
    let (text, is_error) = s.result();
    assert!(!is_error, "{text}");
    assert!(s.ws.path().join("ran.txt").exists());
}

fn check_says_unavailable(missing: &str) {
    let s = Setup::new();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exec-whittle", missing, "sandbox", "check", "--cwd"])
        .arg(s.ws.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", s.home.path())
        .env("XDG_CONFIG_HOME", s.home.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("unavailable"), "{text}");
    assert!(!text.contains("the sandbox holds"), "{text}");
}
