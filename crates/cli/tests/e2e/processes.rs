//! Nothing a command starts outlives its tool call or whittle: not a
//! background job, not after Ctrl-C, a timeout or `kill -9` of whittle.
//! Each command starts marker processes (`exec -a MARKER sleep 300`, some
//! in a new session, some double-forked); the test looks for the markers
//! in /proc.

use crate::{Harness, assert_success, stderr, tool_result};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};
use testkit::{Reply, content_text};

/// Background processes three ways, then a wait for `stop` (which never
/// comes): the usual way a tool call hangs.
fn spawner(marker: &str) -> String {
    format!(
        "(exec -a {marker}-a sleep 300) & \
         setsid bash -c 'exec -a {marker}-b sleep 300' & \
         ( ( exec -a {marker}-c sleep 300 & ) & ) ; \
         while [ ! -e stop ]; do sleep 0.05; done"
    )
}

fn marker_pids(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        // The markers are argv[0] of the sleeps, not the shell that named them.
        if cmdline.starts_with(marker.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills what a failed test left, so that it does not outlive the test
/// either.
struct Reaper(String);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in marker_pids(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn marker(tag: &str) -> (String, Reaper) {
    let m = format!("wproc{}{tag}", std::process::id());
    (m.clone(), Reaper(m))
}

/// Confined, and unconfined (yolo): both contain what commands start.
const MODES: [&[&str]; 2] = [
    &["--permission-mode", "default", "--allow", "bash(*)"],
    &["--permission-mode", "yolo"],
];

#[test]
fn background_jobs_end_with_the_call() {
    for (i, mode) in MODES.iter().enumerate() {
        background_jobs_end_with_the_call_in(mode, i);
    }
}

fn background_jobs_end_with_the_call_in(mode: &[&str], i: usize) {
    let h = Harness::new();
    let (m, _reaper) = marker(&format!("bg{i}"));
    let cmd = format!(
        "(exec -a {m}-a sleep 300) & setsid bash -c 'exec -a {m}-b sleep 300' & sleep 0.3; echo started"
    );
    h.server
        .push(Reply::tool_use("bg", "bash", json!({ "command": cmd })));
    h.server.push(Reply::text("done"));
    let mut args = mode.to_vec();
    args.extend(["-p", "start things"]);
    let out = h.run(&args);
    assert_success(&out);
    let block = tool_result(&h.requests()[1].body, "bg");
    assert!(content_text(&block).contains("started"), "{block}");
    wait_until("the background jobs are gone", || {
        marker_pids(&m).is_empty()
    });
}

#[test]
fn ctrl_c_leaves_no_process() {
    for (i, mode) in MODES.iter().enumerate() {
        ctrl_c_leaves_no_process_in(mode, i);
    }
}

fn ctrl_c_leaves_no_process_in(mode: &[&str], i: usize) {
    let h = Harness::new();
    let (m, _reaper) = marker(&format!("int{i}"));
    h.server.push(Reply::tool_use(
        "wait",
        "bash",
        json!({ "command": spawner(&m) }),
    ));
    let mut args = mode.to_vec();
    args.extend(["-p", "wait"]);
    let child = h
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the markers run", || marker_pids(&m).len() == 3);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    wait_until("the markers are gone", || marker_pids(&m).is_empty());
}

#[test]
fn a_timeout_leaves_no_process() {
    for (i, mode) in MODES.iter().enumerate() {
        a_timeout_leaves_no_process_in(mode, i);
    }
}

fn a_timeout_leaves_no_process_in(mode: &[&str], i: usize) {
    let h = Harness::new();
    let (m, _reaper) = marker(&format!("tmo{i}"));
    h.server.push(Reply::tool_use(
        "slow",
        "bash",
        json!({ "command": spawner(&m), "timeout_secs": 1 }),
    ));
    h.server.push(Reply::text("it timed out"));
    let mut args = mode.to_vec();
    args.extend(["-p", "wait"]);
    let out = h.run(&args);
    assert_success(&out);
    let block = tool_result(&h.requests()[1].body, "slow");
    assert!(content_text(&block).contains("timed out"), "{block}");
    wait_until("the markers are gone", || marker_pids(&m).is_empty());
}

#[test]
fn kill_9_of_whittle_leaves_no_process() {
    for (i, mode) in MODES.iter().enumerate() {
        kill_9_of_whittle_leaves_no_process_in(mode, i);
    }
}

fn kill_9_of_whittle_leaves_no_process_in(mode: &[&str], i: usize) {
    let h = Harness::new();
    let (m, _reaper) = marker(&format!("k9{i}"));
    h.server.push(Reply::tool_use(
        "wait",
        "bash",
        json!({ "command": spawner(&m) }),
    ));
    let mut args = mode.to_vec();
    args.extend(["-p", "wait"]);
    let mut child = h
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the markers run", || marker_pids(&m).len() == 3);
    child.kill().unwrap(); // SIGKILL: whittle cleans nothing up itself
    child.wait().unwrap();
    wait_until("the markers are gone", || marker_pids(&m).is_empty());
}
