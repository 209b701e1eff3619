//! Overflow from the provider: a prompt too long is compacted and retried once.

use crate::{Harness, assert_success, build_history, stderr, stdout};
use std::path::Path;
use testkit::{ContextLimit, Reply, content_text};

#[test]
fn prompt_too_long_once_is_recovered_by_reactive_compaction() {
    let h = Harness::new();
    let last_bytes = build_history(&h);
    let before = h.requests().len();
    h.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: last_bytes - 500,
        once: true,
    }));
    h.server
        .push(Reply::text("Earlier: counted with seq four times."));
    h.server.push(Reply::text("All good now."));
    let out = h.run(&["--preset", "teaching", "--continue", "-p", "and now?"]);
    assert_success(&out);
    assert!(stdout(&out).contains("All good now."));
    assert!(
        stderr(&out).contains("[reactive compact]"),
        "{}",
        stderr(&out)
    );
    let requests = h.requests();
    assert_eq!(requests.len(), before + 3, "refused, summary, retry");
    let first = content_text(&requests.last().unwrap().body["messages"][0]);
    assert!(
        first.starts_with("[Reactive compact]\n\nCurrent user request:\nand now?"),
        "{first}"
    );
    h.assert_clean();
}

#[test]
fn prompt_too_long_always_is_one_error_line_naming_the_transcript() {
    let h = Harness::new();
    build_history(&h);
    h.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 600,
        once: false,
    }));
    let out = h.run(&["--preset", "teaching", "--continue", "-p", "again"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    let line = lines[0];
    assert!(line.contains("still too long"), "{line}");
    assert!(err.contains("[reactive compact]"), "{err}");
    assert!(!err.contains("warning:"), "the failure is said once: {err}");
    let transcript = line
        .split_whitespace()
        .find(|w| w.contains("/transcripts/"))
        .expect("names the transcript");
    assert!(
        Path::new(transcript.trim_end_matches(['.', ','])).is_file(),
        "{line}"
    );
    h.assert_clean();
}
