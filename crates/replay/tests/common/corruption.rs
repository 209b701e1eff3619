//! Truncated and corrupted copies of trace files, written to temp dirs: a
//! clear error naming the file (and the line, or the JSON path), never a
//! panic, and never an invalid conversation. The same cases run on our
//! fixtures and on the recorded sessions.
//!
//! The one tolerated fault: a JSONL file whose final line was cut (no newline
//! after it, not parseable), as a crash mid-write leaves it, is read up to
//! that line and the cut counts as one repair.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use whittle_protocol::validate;
use whittle_replay::{Conversation, ImportError, import_path};

/// A file small enough to corrupt many times: (name, bytes, is JSONL).
pub type Sample = (String, Vec<u8>, bool);

/// `files` read whole, then an OpenAI document written here, pretty-printed.
pub fn read_samples(files: &[PathBuf]) -> Vec<Sample> {
    let mut out: Vec<Sample> = files
        .iter()
        .map(|f| {
            let bytes = fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let is_jsonl = name.ends_with(".jsonl");
            (name, bytes, is_jsonl)
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

pub fn lines_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count() + 1
}

/// What must hold for any input: no panic (the caller got here), an error
/// names the file on one line and a line that exists, and an import is valid.
pub fn check_any(path: &Path, bytes: &[u8], result: &Result<Vec<Conversation>, ImportError>) {
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

pub fn import_bytes(
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

/// `full`: a Claude Code session of at least 21 lines whose first 19 need
/// no repair.
pub fn a_jsonl_file_cut_mid_line_is_read_up_to_the_cut(full: &[u8]) {
    let dir = TempDir::new().unwrap();
    let starts = line_starts(full);
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

/// `full`: a Claude Code session of at least 9 lines.
pub fn a_jsonl_file_with_lines_missing_in_the_middle_names_the_line(full: &[u8]) {
    let dir = TempDir::new().unwrap();
    let starts = line_starts(full);
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

/// `full`: a pretty-printed mini-swe-agent trajectory whose `info` has no
/// `role` or `content` keys.
pub fn a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut(full: &[u8]) {
    let dir = TempDir::new().unwrap();
    for cut in [1, full.len() / 3, full.len() / 2, full.len() - 2] {
        let (_, result) = import_bytes(&dir, "t.traj.json", &full[..cut]);
        let err = result.unwrap_err();
        assert!(matches!(err, ImportError::Syntax { .. }), "{err}");
        assert_eq!(err.line(), Some(lines_in(&full[..cut])), "{err}");
    }
    // Messages missing from the middle (from inside messages[2] to inside
    // messages[4]): still JSON, but messages[2] now lacks its role.
    let text = std::str::from_utf8(full).unwrap();
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

/// Replaces one JSONL line of a session by `line`; the error must name it.
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

/// `session`: Claude Code, line 4 a user event; `trajectory`:
/// mini-swe-agent, at least 8 messages.
pub fn wrong_json_types_name_the_line_or_the_path(session: &[u8], trajectory: &[u8]) {
    let dir = TempDir::new().unwrap();
    let full = session;
    let line4: Value =
        serde_json::from_str(std::str::from_utf8(full).unwrap().lines().nth(3).unwrap()).unwrap();
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
        let (path, result) = import_bytes(&dir, "short.jsonl", &with_line(full, 4, &bad));
        let err = result.unwrap_err();
        assert!(matches!(err, ImportError::BadLine { line: 4, .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}:4: ", path.display())),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
    }

    let trajectory: Value = serde_json::from_slice(trajectory).unwrap();
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

/// `full`: a Claude Code session whose line 7 is longer than 10 bytes.
pub fn invalid_utf8_inside_a_jsonl_file_names_the_line(full: &[u8]) {
    let dir = TempDir::new().unwrap();
    let starts = line_starts(full);
    let mut bytes = full.to_vec();
    bytes[starts[6] + 10] = 0xFF;
    let (_, result) = import_bytes(&dir, "short.jsonl", &bytes);
    let err = result.unwrap_err();
    assert!(matches!(err, ImportError::Syntax { line: 7, .. }), "{err}");
}

/// One case of the truncation property: the prefix of `sample` up to `at`
/// (a fraction of its length). A JSON document cut short is an error at its
/// last line; JSON Lines keep every complete line and count the cut.
pub fn truncation_is_an_error_or_a_counted_repair(
    sample: &Sample,
    at: f64,
) -> Result<(), TestCaseError> {
    let (name, full, is_jsonl) = sample;
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
    Ok(())
}

/// One case of the byte-flip property: `flips` (position as a fraction of
/// the length, new byte) applied to `sample`; whatever comes out is a valid
/// import or an error naming the file and a real line.
pub fn byte_flips_never_panic(sample: &Sample, flips: &[(f64, u8)]) {
    let (name, full, _) = sample;
    let mut bytes = full.clone();
    for &(at, byte) in flips {
        let i = ((bytes.len() as f64) * at) as usize;
        if let Some(b) = bytes.get_mut(i) {
            *b = byte;
        }
    }
    let dir = TempDir::new().unwrap();
    // import_bytes checks the properties.
    let _ = import_bytes(&dir, name, &bytes);
}

/// Runs both properties over `samples`, 96 cases each, outside the
/// `proptest!` macro (for a suite with its own harness).
pub fn run_properties(samples: &[Sample]) {
    use proptest::test_runner::{Config, TestRunner};
    // No regression file: the inputs are data outside the repository.
    let config = || Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new(config())
        .run(&(0..samples.len(), 0.0f64..1.0), |(which, at)| {
            truncation_is_an_error_or_a_counted_repair(&samples[which], at)
        })
        .unwrap_or_else(|e| panic!("truncation: {e}"));
    let flips = proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8);
    TestRunner::new(config())
        .run(&(0..samples.len(), flips), |(which, flips)| {
            byte_flips_never_panic(&samples[which], &flips);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("byte flips: {e}"));
}
