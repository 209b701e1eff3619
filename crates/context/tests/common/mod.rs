//! Helpers shared by the pipeline tests.
#![allow(dead_code)]

use serde_json::json;
use whittle_context::{SummarizeError, Summarizer, SummaryInput};
use whittle_protocol::{Block, Message};

/// A summarizer that returns a fixed text and remembers what it was given.
#[derive(Default)]
pub struct Recording {
    pub calls: Vec<(String, Option<String>)>,
    pub reply: Option<String>,
    /// Fail with InputTooLong while the input is longer than this.
    pub max_input_chars: Option<usize>,
}

impl Summarizer for Recording {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        _ledger: &str,
        _max_chars: usize,
    ) -> Result<String, SummarizeError> {
        let text: String = input.to_messages().iter().map(Message::text).collect();
        let len = text.chars().count();
        self.calls.push((text, focus.map(str::to_string)));
        if self.max_input_chars.is_some_and(|max| len > max) {
            return Err(SummarizeError::InputTooLong);
        }
        Ok(self
            .reply
            .clone()
            .unwrap_or_else(|| "Goal: compare READMEs. Done: read five files.".into()))
    }
}

pub fn read_call(id: &str, path: &str) -> Message {
    Message::assistant_blocks(vec![
        Block::text(format!("Reading {path}.")),
        Block::tool_use(id, "read_file", json!({ "path": path })),
    ])
}

pub fn result(id: &str, text: String) -> Message {
    Message::user_blocks(vec![Block::tool_result(id, text, false)])
}

/// Text of roughly `n` characters that differs per `seed`, with lines.
pub fn file_text(seed: usize, n: usize) -> String {
    let line = format!("{seed:04} lorem ipsum dolor sit amet, consectetur adipiscing elit\n");
    let mut s = line.repeat(n / line.len() + 1);
    s.truncate(n);
    s
}
