//! Nothing lost at the source: big outputs saved whole as they stream, one
//! copy on disk, and resuming when a saved file is gone or half written.

use crate::{Harness, assert_success, stderr, tool_result, walk};
use serde_json::json;
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::{Reply, Step, content_text};

/// `Full output: PATH` of a persisted-output marker.
fn full_output_path(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .unwrap_or_else(|| panic!("no path in {text}"))
        .to_string()
}

/// Bytes of tool outputs, logs and transcripts under `.whittle`. The
/// checkpoint store and the log's checkpoint records (one short line per
/// tool call that may write) are about the workspace's files, not the
/// outputs, and are left out; the store is bounded by its own collection.
fn state_bytes(h: &Harness) -> u64 {
    let checkpoints = h.state().join("checkpoints");
    let records: u64 = walk(&h.state().join("sessions"))
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.starts_with("{\"type\":\"checkpoint\""))
                .map(|l| l.len() as u64 + 1)
                .collect::<Vec<_>>()
        })
        .sum();
    walk(&h.state())
        .iter()
        .filter(|p| !p.starts_with(&checkpoints))
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum::<u64>()
        - records
}

#[test]
fn a_big_command_output_is_kept_whole_once_and_the_model_sees_a_preview() {
    let h = Harness::new();
    h.server.push(Reply::tool_use(
        "seq",
        "bash",
        json!({"command": "seq 1 200000"}),
    ));
    h.server.push(Reply::text("Counted to 200,000."));
    let out = h.run(&["--permission-mode", "yolo", "-p", "count to 200000"]);
    assert_success(&out);

    let full: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full.len(), 1_288_895);
    let result = content_text(&tool_result(&h.requests()[1].body, "seq"));
    assert!(result.starts_with("<persisted-output>\n"), "{result}");
    assert!(result.contains("Size: 1,288,895 bytes, 200,000 lines."));
    assert!(result.contains("\n199999\n200000\n"), "the end is shown");
    assert!(result.len() < 4_000, "{}", result.len());
    // Every line is in the file the model was shown.
    let path = full_output_path(&result);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
    assert!(path.starts_with(h.state().join("tool-results").to_str().unwrap()));
    // One copy: the session log holds a reference, not the text.
    let total = state_bytes(&h);
    assert!(
        total <= full.len() as u64 * 11 / 10 + 64 * 1024,
        "{total} bytes under .whittle for a {} byte output",
        full.len()
    );
    h.assert_clean();
}

#[test]
fn outputs_saved_while_the_model_answered_leave_no_file_that_nothing_names() {
    let h = Harness::new();
    // Longer than a placeholder (saved while the model answers), shorter
    // than what the session log keeps in a file of its own.
    std::fs::write(h.ws().join("notes.txt"), "a note line\n".repeat(30)).unwrap();
    h.server.push(Reply::tool_use(
        "cat1",
        "bash",
        json!({"command": "cat notes.txt"}),
    ));
    h.server.push(Reply::tool_use(
        "cat2",
        "bash",
        json!({"command": "cat notes.txt && seq 1 20000"}),
    ));
    h.server.push(Reply::text("Read it twice."));
    let out = h.run(&["--permission-mode", "yolo", "-p", "read the notes twice"]);
    assert_success(&out);
    // The second output is big: the log names its file, which stays.
    let logged: String = walk(&h.state().join("sessions"))
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let files = walk(&h.state().join("tool-results"));
    assert!(
        files.iter().any(|f| f.to_string_lossy().contains("cat2")),
        "{files:?}"
    );
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(logged.contains(&name), "{name} is named nowhere");
    }
    assert!(
        !files.iter().any(|f| f.to_string_lossy().contains("cat1")),
        "the first output, saved ahead and never named, stayed: {files:?}"
    );
    h.assert_clean();
}

#[test]
fn resuming_after_saved_outputs_were_deleted_says_so_in_one_line_each() {
    let h = Harness::new();
    std::fs::write(h.ws().join("notes.txt"), "a note line\n".repeat(500)).unwrap();
    h.server.push(Reply::tool_uses([
        ("cat", "bash", json!({"command": "cat notes.txt"})),
        ("seq", "bash", json!({"command": "seq 1 100000"})),
    ]));
    h.server.push(Reply::text("Read both."));
    let out = h.run(&[
        "--permission-mode",
        "yolo",
        "-p",
        "read the notes and count",
    ]);
    assert_success(&out);
    let first = h.requests()[1].body.clone();
    assert_eq!(
        content_text(&tool_result(&first, "cat")),
        format!("{}[exit code: 0]", "a note line\n".repeat(500))
    );
    // The log refers to both outputs by file; delete the files.
    let files = walk(&h.state().join("tool-results"));
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        std::fs::remove_file(f).unwrap();
    }

    h.server.push(Reply::text("Some outputs are gone."));
    let out = h.run(&["--continue", "-p", "go on"]);
    assert_success(&out);
    let err = stderr(&out);
    let missing: Vec<&str> = err.lines().filter(|l| l.contains("is missing")).collect();
    assert_eq!(missing.len(), 2, "{err}");
    for f in &files {
        assert!(err.contains(&f.display().to_string()), "{err}");
    }
    // The history stays valid (checked by assert_clean) and says what is lost.
    let body = &h.requests()[2].body;
    for id in ["cat", "seq"] {
        let text = content_text(&tool_result(body, id));
        assert!(text.contains("is missing"), "{text}");
    }
    h.assert_clean();
}

#[test]
fn killed_while_a_big_output_streams_the_session_resumes_with_the_partial_file() {
    let h = Harness::new();
    // About 100 MB, slowly enough to be killed part way; it stops by itself
    // once nobody reads its output.
    let command = "for i in $(seq 1 1000); do head -c 100000 /dev/zero | tr '\\0' x || exit 1; sleep 0.01; done";
    h.server
        .push(Reply::tool_use("big", "bash", json!({"command": command})));
    let mut child = h
        .command(&["--permission-mode", "yolo", "-p", "make a big file"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let results = h.state().join("tool-results");
    let deadline = Instant::now() + Duration::from_secs(60);
    let partial = loop {
        let found = walk(&results).into_iter().find(|p| {
            p.to_string_lossy().ends_with(".partial")
                && std::fs::metadata(p).is_ok_and(|m| m.len() > 1_000_000)
        });
        if let Some(p) = found {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the output never reached the store"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL, mid-write
    child.wait().unwrap();

    h.server.push(Reply::text("It was interrupted."));
    let out = h.run(&["--continue", "-p", "what happened?"]);
    assert_success(&out);
    let text = content_text(&tool_result(&h.requests()[1].body, "big"));
    assert!(text.contains("interrupted"), "{text}");
    assert!(text.contains(&partial.display().to_string()), "{text}");
    assert!(text.contains("(incomplete)"), "{text}");
    // The file says it is partial and holds what was written.
    assert!(partial.exists());
    let bytes = std::fs::read(&partial).unwrap();
    assert!(bytes.iter().all(|b| *b == b'x'));
    h.assert_clean();
}

#[test]
fn a_long_session_keeps_one_copy_of_its_tool_outputs() {
    // Forty outputs of mixed sizes, as in recorded sessions (mostly small,
    // some large), under the teaching limits so that results are persisted,
    // snipped and summarized along the way.
    let h = Harness::new();
    let sizes = [
        180, 2_400, 650, 14_000, 90, 5_200, 31_000, 1_100, 420, 8_800, 60_000, 2_000, 300, 12_500,
        700, 45_000, 3_300, 150, 9_900, 1_600,
    ];
    let mut total = 0u64;
    let mut script = VecDeque::new();
    for round in 0..2 {
        for (i, size) in sizes.iter().enumerate() {
            let name = format!("out{round}_{i}.txt");
            let line = format!("{name} {}\n", "y".repeat(60));
            let text: String = line.repeat(size / line.len() + 1);
            std::fs::write(h.ws().join(&name), &text).unwrap();
            total += text.len() as u64;
            script.push_back(Reply::tool_use(
                format!("c{round}_{i}"),
                "bash",
                json!({"command": format!("cat {name}")}),
            ));
        }
    }
    script.push_back(Reply::text("Read them all."));
    // Summary requests come in between; they get a stand-in summary and
    // leave the script where it was.
    let script = Arc::new(Mutex::new(script));
    for _ in 0..120 {
        let script = script.clone();
        h.server.push_fn(move |r| {
            let body = r.body.to_string();
            if body.contains("Summary request from the harness")
                || body.contains("factual state summaries")
            {
                return Step::Reply(Reply::text("Summary: files read so far; keep reading."));
            }
            let next = script.lock().unwrap().pop_front();
            Step::Reply(next.unwrap_or_else(|| Reply::text("Nothing left.")))
        });
    }
    let out = h.run(&[
        "--preset",
        "teaching",
        "--permission-mode",
        "yolo",
        "-p",
        "read every file",
    ]);
    assert_success(&out);
    let under = state_bytes(&h);
    for p in walk(&h.state()) {
        eprintln!(
            "DEBUG {} {}",
            std::fs::metadata(&p).unwrap().len(),
            p.display()
        );
    }
    eprintln!(
        "{total} bytes of tool output, {under} bytes under .whittle ({:.2}x)",
        under as f64 / total as f64
    );
    assert!(
        under <= total * 11 / 10 + 64 * 1024,
        "{under} bytes under .whittle for {total} bytes of output"
    );
    h.assert_clean();
}
