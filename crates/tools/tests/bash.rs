//! The bash tool against real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use whittle_tools::{BashTool, CancellationToken, Tool, ToolContext, ToolOutput};

/// True while `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // State is the first field after the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !(state.starts_with('Z') || state.starts_with('X'))
        }
    }
}

/// Waits (bounded) for the kernel to finish tearing a killed process down.
async fn gone_soon(pid: u32) -> bool {
    for _ in 0..100 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn run(ctx: &ToolContext, input: serde_json::Value) -> ToolOutput {
    BashTool::default().run(input, ctx).await
}

fn first_pid(text: &str) -> u32 {
    text.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in output: {text}"))
}

async fn wait_for_file(path: &Path) -> String {
    for _ in 0..400 {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never appeared", path.display());
}

#[tokio::test]
async fn exit_code_and_interleaved_output() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let out = run(
        &ctx,
        json!({"command": "echo out; echo err >&2; echo out2; exit 3"}),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.content, "out\nerr\nout2\n[exit code: 3]");

    let out = run(&ctx, json!({"command": "pwd"})).await;
    assert!(!out.is_error, "{}", out.content);
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        out.content.starts_with(&format!("{}\n", cwd.display())),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("[exit code: 0]"));

    let out = run(&ctx, json!({"command": "true"})).await;
    assert_eq!(out.content, "(no output)\n[exit code: 0]");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let started = Instant::now();
    let out = run(
        &ctx,
        json!({"command": "sleep 1000 & echo $!; bash -c 'sleep 1000 & echo $!; wait' ; wait", "timeout_secs": 1}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(out.is_error);
    assert!(
        out.content.contains("[timed out after 1 s"),
        "{}",
        out.content
    );
    let pids: Vec<u32> = out
        .content
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 2, "{}", out.content);
    for pid in pids {
        assert!(
            gone_soon(pid).await,
            "background sleep {pid} survived the timeout"
        );
    }
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let token = CancellationToken::new();
    let ctx = ToolContext::new(dir.path()).with_cancel(token.clone());
    let pidfile = dir.path().join("pid");
    let task = tokio::spawn(async move {
        BashTool::default()
            .run(json!({"command": "sleep 1000 & echo $! > pid; wait"}), &ctx)
            .await
    });
    let pid = first_pid(&wait_for_file(&pidfile).await);
    assert!(alive(pid));
    token.cancel();
    let out = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("cancel did not stop the command")
        .unwrap();
    assert!(out.is_error);
    assert!(out.content.contains("[cancelled"), "{}", out.content);
    assert!(
        gone_soon(pid).await,
        "background sleep {pid} survived cancellation"
    );
}

#[tokio::test]
async fn dropping_the_run_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let pidfile = dir.path().join("pid");
    let tool = BashTool::default();
    let fut = tool.run(json!({"command": "sleep 1000 & echo $! > pid; wait"}), &ctx);
    let give_up = async {
        let pid = first_pid(&wait_for_file(&pidfile).await);
        assert!(alive(pid));
        pid
    };
    let pid = tokio::select! {
        _ = fut => panic!("the command finished on its own"),
        pid = give_up => pid,
    };
    assert!(
        gone_soon(pid).await,
        "background sleep {pid} survived the dropped run"
    );
}

#[tokio::test]
async fn a_big_output_is_saved_whole_and_previewed_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path()).with_call_id("toolu_seq");
    let out = run(&ctx, json!({"command": "seq 1 200000"})).await;
    assert!(!out.is_error, "{}", out.content);
    let full: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    // One marker: the file's path, the size, the exit code, both ends.
    assert!(
        out.content.starts_with("<persisted-output>\nFull output: "),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("</persisted-output>"));
    assert!(
        out.content
            .contains("Size: 1,288,895 bytes, 200,000 lines."),
        "{}",
        out.content
    );
    assert!(out.content.contains("[exit code: 0]"));
    assert!(out.content.contains("Preview (start and end):\n1\n2\n3\n"));
    assert!(out.content.contains("199999\n200000\n"));
    assert!(out.content.len() < 3_000, "{}", out.content.len());
    // Every line is in the saved file, which the marker names.
    let path = out
        .content
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("Full output: ")
        .unwrap();
    assert!(path.contains("toolu_seq"), "{path}");
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    assert!(
        ctx.store().trusted_path(path).is_some(),
        "the file is inside the store"
    );
}

#[tokio::test]
async fn outputs_under_the_limit_come_back_whole_and_the_cap_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let limits = whittle_tools::OutputLimits {
        inline_max_bytes: 10,
        preview_chars: 8,
        cap_bytes: 20,
    };
    let ctx = ToolContext::new(dir.path()).with_output_limits(limits);
    let out = run(&ctx, json!({"command": "printf 'abcdefghi'"})).await;
    assert_eq!(out.content, "abcdefghi\n[exit code: 0]");
    let out = run(
        &ctx,
        json!({"command": "printf 'abcdefghijklmnopqrstuvwxyz'"}),
    )
    .await;
    assert!(
        out.content.contains(
            "[only the first 20 bytes were saved (the per-output limit); the last 6 bytes were not"
        ),
        "{}",
        out.content
    );
    assert!(out.content.contains("\nab\n"), "{}", out.content);
    assert!(
        out.content.contains("uvwxyz"),
        "the end is shown: {}",
        out.content
    );
    let path = out
        .content
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("Full output: ")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "abcdefghijklmnopqrst"
    );
}

#[tokio::test]
async fn a_child_holding_the_pipe_does_not_hang_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let started = Instant::now();
    let out = run(&ctx, json!({"command": "sleep 30 & echo $!; echo done"})).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "hung on the open pipe"
    );
    let pid = first_pid(&out.content);
    assert!(out.content.contains("done\n"));
    assert!(
        out.content.contains("still holds its output open"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("[exit code: 0]"));
    // A background process that the shell left running is not killed.
    assert!(alive(pid));
    std::process::Command::new("kill")
        .arg(pid.to_string())
        .status()
        .unwrap();
}

#[tokio::test]
async fn invalid_output_is_decoded_lossily_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let out = run(&ctx, json!({"command": "printf 'a\\377b'"})).await;
    assert!(out.content.starts_with("a\u{FFFD}b\n"), "{}", out.content);
    assert!(out.content.contains("not valid UTF-8"));
}

#[tokio::test]
async fn bad_inputs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    for (input, needle) in [
        (json!({}), "missing field `command`"),
        (json!({"command": ""}), "`command` is empty"),
        (
            json!({"command": "true", "timeout_secs": -1}),
            "positive number",
        ),
        (
            json!({"command": "true", "timeout_secs": "10"}),
            "invalid input for bash",
        ),
        (json!("ls"), "expected a JSON object"),
    ] {
        let out = run(&ctx, input).await;
        assert!(out.is_error);
        assert!(
            out.content.contains(needle),
            "{} lacks {needle}",
            out.content
        );
    }
    let missing = ToolContext::new(dir.path().join("nope"));
    let out = run(&missing, json!({"command": "true"})).await;
    assert!(out.is_error);
    assert!(out.content.contains("cannot start"), "{}", out.content);
}

#[tokio::test]
async fn hidden_variables_are_not_inherited() {
    let dir = tempfile::tempdir().unwrap();
    // A variable every test process has: PATH stays, HOME is hidden.
    let ctx =
        ToolContext::new(dir.path()).with_sandbox(whittle_tools::Sandbox::off(vec!["HOME".into()]));
    let out = run(
        &ctx,
        json!({"command": "echo \"home=${HOME-unset} path=${PATH:+set}\""}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("home=unset path=set"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_refusing_sandbox_runs_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let ctx = ToolContext::new(dir.path()).with_sandbox(whittle_tools::Sandbox::refusing(
        "Landlock is not supported by this kernel",
        vec![],
    ));
    let out = run(
        &ctx,
        json!({"command": format!("touch {}", marker.display())}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("Landlock is not supported"),
        "{}",
        out.content
    );
    assert!(out.content.contains("--sandbox off"), "{}", out.content);
    assert!(!marker.exists());
}
