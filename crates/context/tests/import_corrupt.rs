//! Truncated and corrupted copies of real traces, written to temp dirs: a
//! clear error naming the file (and the line, or the JSON path), never a
//! panic, and never an invalid conversation.
//!
//! The one tolerated fault: a JSONL file whose final line was cut (no newline
//! after it, not parseable), as a crash mid-write leaves it, is read up to
//! that line and the cut counts as one repair.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::shared_traces as traces;

use proptest::prelude::*;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tempfile::TempDir;
use whittle_context::import::{Conversation, ImportError, import_path};
use whittle_context::validate;

/// A real file small enough to corrupt many times: (name, bytes, is JSONL).
type Sample = (String, Vec<u8>, bool);

/// The samples, read once for all cases.
fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(read_samples)
}

fn read_samples() -> Vec<Sample> {
    let root = traces();
    let mut out: Vec<(String, Vec<u8>, bool)> = [
        "claude-code/short.jsonl",
        "claude-code/tool_heavy.jsonl",
        "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
        "mini-swe-agent/astropy__astropy-12907.traj.json",
    ]
    .iter()
    .map(|f| {
        let bytes = fs::read(root.join(f)).unwrap();
        let name = Path::new(f)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        (name, bytes, f.ends_with(".jsonl"))
    })
    .collect();
    let openai = json!({"messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "héllo"}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": [1, 2]}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out ✓"},
        {"role": "assistant", "content": "done"},
    ]});
    let pretty = serde_json::to_vec_pretty(&openai).unwrap();
    out.push(("chat.json".into(), pretty, false));
    out
}

fn lines_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count() + 1
}

/// What must hold for any input: no panic (the caller got here), an error
/// names the file on one line and a line that exists, and an import is valid.
fn check_any(path: &Path, bytes: &[u8], result: &Result<Vec<Conversation>, ImportError>) {
    match result {
        Ok(conversations) => {
            for c in conversations {
                assert_eq!(c.source, path);
                validate(&c.messages).unwrap_or_else(|e| panic!("{}: {e}", c.id));
            }
        }
        Err(e) => {
            assert_eq!(e.path(), path);
            let text = e.to_string();
            assert!(text.starts_with(&path.display().to_string()), "{text}");
            assert!(!text.contains('\n'), "{text}");
            if let Some(line) = e.line() {
                assert!(line >= 1 && line <= lines_in(bytes), "{text}");
            }
        }
    }
}

fn import_bytes(
    dir: &TempDir,
    name: &str,
    bytes: &[u8],
) -> (PathBuf, Result<Vec<Conversation>, ImportError>) {
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    let result = import_path(&path);
    check_any(&path, bytes, &result);
    (path, result)
}

/// Byte offsets just after each newline.
fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts
}

fn total_repairs(result: &Result<Vec<Conversation>, ImportError>) -> usize {
    result.as_ref().unwrap().iter().map(|c| c.repairs).sum()
}

#[test]
fn a_jsonl_file_cut_mid_line_is_read_up_to_the_cut() {
    let dir = TempDir::new().unwrap();
    let full = fs::read(traces().join("claude-code/tool_heavy.jsonl")).unwrap();
    let starts = line_starts(&full);
    // Cut in the middle of line 20.
    let cut = (starts[19] + starts[20]) / 2;
    let (_, whole) = import_bytes(&dir, "whole.jsonl", &full[..starts[19]]);
    let (_, result) = import_bytes(&dir, "cut.jsonl", &full[..cut]);
    assert_eq!(total_repairs(&whole), 0);
    assert_eq!(total_repairs(&result), 1);
    assert_eq!(
        result.as_ref().unwrap()[0].messages.len(),
        whole.as_ref().unwrap()[0].messages.len()
    );
    // Cut inside the first line: nothing recognizable, an error at line 1.
    let (_, result) = import_bytes(&dir, "first.jsonl", &full[..starts[1] / 2]);
    assert_eq!(result.unwrap_err().line(), Some(1));
}

#[test]
fn a_jsonl_file_with_lines_missing_in_the_middle_names_the_line() {
    let dir = TempDir::new().unwrap();
    let full = fs::read(traces().join("claude-code/short.jsonl")).unwrap();
    let starts = line_starts(&full);
    // Drop from the middle of line 6 to the middle of line 8: line 6 is now broken.
    let mut bytes = full[..(starts[5] + starts[6]) / 2].to_vec();
    bytes.extend_from_slice(&full[(starts[7] + starts[8]) / 2..]);
    let (path, result) = import_bytes(&dir, "short.jsonl", &bytes);
    let err = result.unwrap_err();
    assert!(matches!(err, ImportError::Syntax { line: 6, .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:6:", path.display()))
    );
}

#[test]
fn a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut() {
    let dir = TempDir::new().unwrap();
    let full = fs::read(traces().join("mini-swe-agent/astropy__astropy-12907.traj.json")).unwrap();
    for cut in [1, full.len() / 3, full.len() / 2, full.len() - 2] {
        let (_, result) = import_bytes(&dir, "t.traj.json", &full[..cut]);
        let err = result.unwrap_err();
        assert!(matches!(err, ImportError::Syntax { .. }), "{err}");
        assert_eq!(err.line(), Some(lines_in(&full[..cut])), "{err}");
    }
    // Messages missing from the middle (from inside messages[2] to inside
    // messages[4]): still JSON, but messages[2] now lacks its role.
    let text = std::str::from_utf8(&full).unwrap();
    let from = text.match_indices("\"role\"").nth(2).unwrap().0;
    let to = text.match_indices("\"content\"").nth(4).unwrap().0;
    let bytes = [&full[..from], &full[to..]].concat();
    let (_, result) = import_bytes(&dir, "t.traj.json", &bytes);
    let err = result.unwrap_err();
    assert!(
        matches!(&err, ImportError::BadValue { at, .. } if at == "messages[2].role"),
        "{err}"
    );
}

#[test]
fn garbage_and_binary_files_are_errors() {
    let dir = TempDir::new().unwrap();
    // A fixed pseudo-random sequence (xorshift), so the test is reproducible.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&random[..256]);
    for (name, bytes) in [
        ("random.jsonl", random.clone()),
        ("random.json", random),
        ("image.json", png),
        ("text.jsonl", b"hello world\nthis is not json\n".to_vec()),
        ("nul.jsonl", vec![0; 100]),
    ] {
        let (_, result) = import_bytes(&dir, name, &bytes);
        assert!(result.is_err(), "{name} was accepted");
    }
}

/// Replaces one JSONL line of a real session by `line`; the error must name it.
fn with_line(full: &[u8], number: usize, line: &Value) -> Vec<u8> {
    let text = std::str::from_utf8(full).unwrap();
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            if i + 1 == number {
                line.to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

#[test]
fn wrong_json_types_name_the_line_or_the_path() {
    let dir = TempDir::new().unwrap();
    let full = fs::read(traces().join("claude-code/short.jsonl")).unwrap();
    let line4: Value =
        serde_json::from_str(std::str::from_utf8(&full).unwrap().lines().nth(3).unwrap()).unwrap();
    assert_eq!(line4["type"], "user");
    let mut content_number = line4.clone();
    content_number["message"]["content"] = json!(42);
    let mut message_string = line4.clone();
    message_string["message"] = json!("hi");
    let mut block_string = line4.clone();
    block_string["message"]["content"] = json!(["not a block"]);
    let mut no_type = line4.clone();
    no_type.as_object_mut().unwrap().remove("type");
    for (bad, says) in [
        (content_number, "message.content is a number"),
        (message_string, "\"message\" is a string"),
        (block_string, "message.content[0] is a string"),
        (json!([1, 2]), "expected an event object"),
        (no_type, "no \"type\""),
    ] {
        let (path, result) = import_bytes(&dir, "short.jsonl", &with_line(&full, 4, &bad));
        let err = result.unwrap_err();
        assert!(matches!(err, ImportError::BadLine { line: 4, .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}:4: ", path.display())),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
    }

    let full = fs::read(traces().join("mini-swe-agent/astropy__astropy-12907.traj.json")).unwrap();
    let trajectory: Value = serde_json::from_slice(&full).unwrap();
    let mut content_number = trajectory.clone();
    content_number["messages"][3]["content"] = json!(5);
    let mut bad_role = trajectory.clone();
    bad_role["messages"][2]["role"] = json!("robot");
    let mut messages_object = trajectory.clone();
    messages_object["messages"] = json!({});
    let mut message_null = trajectory;
    message_null["messages"][7] = Value::Null;
    for (bad, at) in [
        (content_number, "messages[3].content"),
        (bad_role, "messages[2].role"),
        (messages_object, "messages"),
        (message_null, "messages[7]"),
    ] {
        let (path, result) = import_bytes(&dir, "t.traj.json", bad.to_string().as_bytes());
        let err = result.unwrap_err();
        assert!(
            matches!(&err, ImportError::BadValue { at: got, .. } if got == at),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("{}: at {at}: ", path.display()))
        );
    }

    for (bad, at) in [
        (
            json!([{"role": "assistant", "tool_calls": "x"}]),
            "[0].tool_calls",
        ),
        (json!([{"role": "user", "content": 3}]), "[0].content"),
        (
            json!([{"role": "user", "content": [{"type": "text"}]}]),
            "[0].content[0]",
        ),
        (
            json!([{"role": "tool", "tool_call_id": 7, "content": "x"}]),
            "[0].tool_call_id",
        ),
        (json!({"messages": [{"content": "x"}]}), "messages[0].role"),
        (
            json!([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]),
            "[0].tool_calls[0]",
        ),
    ] {
        let (_, result) = import_bytes(&dir, "chat.json", bad.to_string().as_bytes());
        let err = result.unwrap_err();
        assert!(
            matches!(&err, ImportError::BadValue { at: got, .. } if got == at),
            "{err}"
        );
    }
}

#[test]
fn invalid_utf8_inside_a_jsonl_file_names_the_line() {
    let dir = TempDir::new().unwrap();
    let full = fs::read(traces().join("claude-code/short.jsonl")).unwrap();
    let starts = line_starts(&full);
    let mut bytes = full.clone();
    bytes[starts[6] + 10] = 0xFF;
    let (_, result) = import_bytes(&dir, "short.jsonl", &bytes);
    let err = result.unwrap_err();
    assert!(matches!(err, ImportError::Syntax { line: 7, .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Any prefix of a real trace: a JSON document cut short is an error at
    /// its last line; JSON Lines keep every complete line and count the cut.
    #[test]
    fn any_truncation_is_an_error_or_a_counted_repair(which in 0usize..5, at in 0.0f64..1.0) {
        let samples = samples();
        let (name, full, is_jsonl) = &samples[which % samples.len()];
        let cut = ((full.len() as f64) * at) as usize;
        let prefix = &full[..cut];
        let dir = TempDir::new().unwrap();
        let (_, result) = import_bytes(&dir, name, prefix);
        let blank = prefix.iter().all(u8::is_ascii_whitespace);
        if blank {
            let empty = matches!(result, Err(ImportError::Empty { .. }));
            prop_assert!(empty);
        } else if !is_jsonl {
            let complete = prefix.trim_ascii_end() == full.trim_ascii_end();
            prop_assert_eq!(result.is_ok(), complete);
            if let Err(e) = &result {
                prop_assert_eq!(e.line(), Some(lines_in(prefix)));
            }
        } else {
            let last = prefix.rsplit(|b| *b == b'\n').next().unwrap_or_default();
            let cut_line = !last.is_empty() && serde_json::from_slice::<Value>(last).is_err();
            let in_first_line = !prefix.contains(&b'\n');
            match &result {
                Err(e) => prop_assert!(in_first_line && cut_line && e.line() == Some(1), "{}", e),
                Ok(conversations) => {
                    let repairs: usize = conversations.iter().map(|c| c.repairs).sum();
                    if cut_line && !conversations.is_empty() {
                        prop_assert!(repairs >= 1);
                    }
                }
            }
        }
    }

    /// Random bytes overwritten anywhere in a real trace: whatever comes
    /// out is a valid import or an error naming the file and a real line.
    #[test]
    fn byte_flips_never_panic(
        which in 0usize..5,
        flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8),
    ) {
        let samples = samples();
        let (name, full, _) = &samples[which % samples.len()];
        let mut bytes = full.clone();
        for (at, byte) in flips {
            let i = ((bytes.len() as f64) * at) as usize;
            if let Some(b) = bytes.get_mut(i) {
                *b = byte;
            }
        }
        let dir = TempDir::new().unwrap();
        // import_bytes checks the properties.
        let _ = import_bytes(&dir, name, &bytes);
    }
}
