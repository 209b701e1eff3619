//! `recall`: searches what left the context in this session.
//!
//! Compaction never deletes: removed messages are in the session's
//! transcript, removed outputs in saved files, everything in the session
//! log. A summary and the ledger keep what was foreseen; `recall` finds the
//! rest on demand (an error message, a value from an output summarized away),
//! with `path:line` so the model can read around it with `read_file`.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use serde::Deserialize;
use whittle_protocol::{group_digits, tool_names};

use crate::tool::{ToolContext, ToolOutput};
use crate::typed::TypedTool;
use schemars::JsonSchema;

/// Matches returned by default, and at most.
const DEFAULT_RESULTS: usize = 20;
const MAX_RESULTS: usize = 100;
/// Characters of text shown around one match.
const SNIPPET_CHARS: usize = 240;
/// Bytes of one line searched: a saved output may be one line of a gigabyte.
const MAX_LINE_BYTES: u64 = 1 << 20;
/// Characters of the whole answer, so a recall never floods the context.
const MAX_ANSWER_CHARS: usize = 12_000;

/// The `recall` tool.
#[derive(Debug, Default)]
pub struct RecallTool;

/// What the model sends to `recall`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallInput {
    /// Text to find (case-insensitive), or a regex with regex=true.
    pub query: String,
    /// Treat query as a regular expression (default false).
    #[serde(default)]
    pub regex: bool,
    /// Matches to return (default 20).
    #[schemars(range(min = 1, max = MAX_RESULTS))]
    pub max_results: Option<usize>,
}

impl TypedTool for RecallTool {
    type Input = RecallInput;
    const NAME: &'static str = tool_names::RECALL;
    const DESCRIPTION: &'static str = "Search everything that left the context in this session (messages archived by \
compaction, saved tool outputs, the session log) for a string or a regex, newest first. Each \
match comes with `path:line` and the text around it; read more with read_file. Use it when a \
summary or the state ledger does not have a detail you need again.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, input: RecallInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.query.trim().is_empty() {
                return ToolOutput::error("recall needs a non-empty query");
            }
            let places = places(ctx);
            let job = tokio::task::spawn_blocking(move || recall(&places, &input));
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("recall failed: {e}")))
        })
    }
}

/// Where this session's removed material is: its transcript, its session
/// log, and the saved outputs, newest first.
fn places(ctx: &ToolContext) -> Vec<PathBuf> {
    let store = ctx.store();
    let transcript = store.transcript_path();
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    let mut add = |path: PathBuf| {
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.is_file()
        {
            files.push((meta.modified().unwrap_or(std::time::UNIX_EPOCH), path));
        }
    };
    if let Some(name) = transcript.file_name() {
        add(store.root().join("sessions").join(name));
    }
    add(transcript);
    if let Ok(dir) = std::fs::read_dir(store.tool_results_dir()) {
        for entry in dir.flatten() {
            add(entry.path());
        }
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.into_iter().map(|(_, p)| p).collect()
}

fn recall(places: &[PathBuf], input: &RecallInput) -> ToolOutput {
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(true)
        .fixed_strings(!input.regex)
        .build(&input.query)
    {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(format!("invalid regex {:?}: {e}", input.query)),
    };
    let max = input
        .max_results
        .unwrap_or(DEFAULT_RESULTS)
        .clamp(1, MAX_RESULTS);
    let mut shown: Vec<String> = Vec::new();
    let mut total = 0usize;
    let mut chars = 0usize;
    for path in places {
        let mut hits = matches_in(path, &matcher);
        // Newest first: later lines of a file were written later.
        hits.reverse();
        for (line, snippet) in hits {
            total += 1;
            let entry = format!("{}:{line}: {snippet}", path.display());
            if shown.len() < max && chars + entry.len() <= MAX_ANSWER_CHARS {
                chars += entry.len() + 1;
                shown.push(entry);
            }
        }
    }
    if total == 0 {
        return ToolOutput::ok(format!(
            "No match for {:?} in this session's transcript, session log or saved outputs.",
            input.query
        ));
    }
    let mut out = shown.join("\n");
    if total > shown.len() {
        out.push_str(&format!(
            "\n[{} of {} matches shown, newest first; narrow the query or read the files above]",
            shown.len(),
            group_digits(total as u64)
        ));
    }
    ToolOutput::ok(out)
}

/// Every matching line of `path` (1-based) with the text around its first
/// match; lines are read as bytes, so a binary or huge file costs no more
/// than its size.
fn matches_in(path: &Path, matcher: &impl Matcher) -> Vec<(usize, String)> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let mut hits = Vec::new();
    let mut line = 0usize;
    loop {
        buf.clear();
        // At most MAX_LINE_BYTES of a line are searched, so a saved output
        // that is one huge line costs bounded memory.
        match (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => line += 1,
        }
        if !buf.ends_with(b"\n") && !skip_rest_of_line(&mut reader) {
            break;
        }
        if let Ok(Some(m)) = matcher.find(&buf) {
            hits.push((line, snippet(&buf, m.start(), m.end())));
        }
    }
    hits
}

/// Reads past the end of the current line; false at the end of the file.
fn skip_rest_of_line(reader: &mut impl BufRead) -> bool {
    loop {
        let (done, used) = match reader.fill_buf() {
            Ok([]) | Err(_) => return false,
            Ok(bytes) => match bytes.iter().position(|b| *b == b'\n') {
                Some(at) => (true, at + 1),
                None => (false, bytes.len()),
            },
        };
        reader.consume(used);
        if done {
            return true;
        }
    }
}

/// The text around a match, on one line, with `…` where it was cut.
fn snippet(line: &[u8], start: usize, end: usize) -> String {
    let half = SNIPPET_CHARS / 2;
    let from = start.saturating_sub(half);
    let to = (end + half).min(line.len());
    let text = String::from_utf8_lossy(&line[from..to]);
    let text = whittle_protocol::controls_to_spaces(text.trim_end_matches(['\n', '\r']));
    // The byte cut may split a character: lossy decoding shows it as U+FFFD.
    let text = text.trim_matches('\u{fffd}');
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    out.push_str(text);
    if to < line.len() && line[to..].iter().any(|b| !b.is_ascii_whitespace()) {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tool;
    use serde_json::{Value, json};
    use whittle_protocol::Message;
    use whittle_store::Store;

    fn run(ctx: &ToolContext, input: Value) -> ToolOutput {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(RecallTool.run(input, ctx))
    }

    #[test]
    fn finds_archived_messages_and_saved_outputs_with_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::with_transcript_name(dir.path().join(".whittle"), "s1");
        store
            .archive(&[
                Message::user("first"),
                Message::assistant("the token is ZEBRA-42 now"),
            ])
            .unwrap();
        let saved = store
            .persist_tool_result("t1", "a\nb\nerror: zebra-42 not found\n")
            .unwrap();
        let ctx = ToolContext::new(dir.path()).with_store(store.clone());
        let out = run(&ctx, json!({"query": "zebra-42"}));
        assert!(!out.is_error, "{}", out.content);
        let transcript = store.transcript_path();
        assert!(
            out.content
                .contains(&format!("{}:2: ", transcript.display())),
            "{}",
            out.content
        );
        assert!(
            out.content.contains(&format!(
                "{}:3: error: zebra-42 not found",
                saved.path.display()
            )),
            "{}",
            out.content
        );
        let none = run(&ctx, json!({"query": "giraffe"}));
        assert!(none.content.starts_with("No match"), "{}", none.content);
        let re = run(&ctx, json!({"query": "ZEBRA-\\d+ now", "regex": true}));
        assert!(re.content.contains(":2: "), "{}", re.content);
        let bad = run(&ctx, json!({"query": "(", "regex": true}));
        assert!(bad.is_error);
        let one = run(&ctx, json!({"query": "zebra", "max_results": 1}));
        assert!(
            one.content.contains("[1 of 2 matches shown"),
            "{}",
            one.content
        );
    }

    #[test]
    fn a_huge_line_is_searched_in_its_first_mebibyte_and_lines_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        let mut text = "x".repeat(3 << 20);
        text.insert_str(10, "NEEDLE");
        text.push_str("\nnext NEEDLE\n");
        std::fs::write(&path, text).unwrap();
        let matcher = RegexMatcherBuilder::new().build("NEEDLE").unwrap();
        let hits = matches_in(&path, &matcher);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn snippets_are_bounded_and_on_one_line() {
        let line = format!("{}NEEDLE\n{}\n", "x".repeat(1000), "y".repeat(1000));
        let s = snippet(line.as_bytes(), 1000, 1006);
        assert!(
            s.contains("NEEDLE") && !s.contains('\n') && s.chars().count() < 300,
            "{s}"
        );
        assert!(s.starts_with('…') && s.ends_with('…'));
    }
}
