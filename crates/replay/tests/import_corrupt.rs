//! Truncated and corrupted copies of our fixtures, written to temp dirs: a
//! clear error naming the file (and the line, or the JSON path), never a
//! panic, and never an invalid conversation. The cases themselves are in
//! `common/corruption.rs`; the `traces` suite runs them on recorded sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::corruption::{self, Sample, import_bytes, read_samples};
use common::fixtures;
use proptest::prelude::*;
use std::sync::OnceLock;
use tempfile::TempDir;

fn session() -> Vec<u8> {
    std::fs::read(fixtures().join("claude-code/session.jsonl")).unwrap()
}

fn trajectory() -> Vec<u8> {
    std::fs::read(fixtures().join("mini-swe-agent/widgets__widgets-101.traj.json")).unwrap()
}

/// The fixtures to corrupt, read once for all cases.
fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let root = fixtures();
        read_samples(&[
            root.join("claude-code/session.jsonl"),
            root.join("claude-code/session/subagents/agent-a1.jsonl"),
            root.join("mini-swe-agent/widgets__widgets-101.traj.json"),
            root.join("openai/chat.json"),
        ])
    })
}

#[test]
fn a_jsonl_file_cut_mid_line_is_read_up_to_the_cut() {
    corruption::a_jsonl_file_cut_mid_line_is_read_up_to_the_cut(&session());
}

#[test]
fn a_jsonl_file_with_lines_missing_in_the_middle_names_the_line() {
    corruption::a_jsonl_file_with_lines_missing_in_the_middle_names_the_line(&session());
}

#[test]
fn a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut() {
    corruption::a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut(&trajectory());
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

#[test]
fn wrong_json_types_name_the_line_or_the_path() {
    corruption::wrong_json_types_name_the_line_or_the_path(&session(), &trajectory());
}

#[test]
fn invalid_utf8_inside_a_jsonl_file_names_the_line() {
    corruption::invalid_utf8_inside_a_jsonl_file_names_the_line(&session());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Any prefix of a fixture: a JSON document cut short is an error at
    /// its last line; JSON Lines keep every complete line and count the cut.
    #[test]
    fn any_truncation_is_an_error_or_a_counted_repair(which in 0usize..5, at in 0.0f64..1.0) {
        let samples = samples();
        corruption::truncation_is_an_error_or_a_counted_repair(&samples[which % samples.len()], at)?;
    }

    /// Random bytes overwritten anywhere in a fixture: whatever comes out
    /// is a valid import or an error naming the file and a real line.
    #[test]
    fn byte_flips_never_panic(
        which in 0usize..5,
        flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8),
    ) {
        let samples = samples();
        corruption::byte_flips_never_panic(&samples[which % samples.len()], &flips);
    }
}
