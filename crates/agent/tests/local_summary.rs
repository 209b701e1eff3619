//! The summarizer path of compaction with the embedded default model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use whittle_agent::ProviderSummarizer;
use whittle_context::prompts::bounded_transcript;
use whittle_context::{SUMMARY_CHARS, SummaryInput};
use whittle_llm::LocalProvider;
use whittle_protocol::{Block, Message};

#[tokio::test(flavor = "multi_thread")]
async fn the_local_model_writes_a_non_empty_summary_both_ways() {
    let path = whittle_local::ensure_default_model(&mut |_| {}).expect("pull the default model");
    let provider = Arc::new(LocalProvider::load(&path).unwrap());
    let history = vec![
        Message::user("Rename the function parse_args to parse_cli in src/main.rs."),
        Message::assistant_blocks(vec![Block::tool_use(
            "t1",
            "read_file",
            serde_json::json!({"path": "src/main.rs"}),
        )]),
        Message::user_blocks(vec![Block::tool_result(
            "t1",
            "1\tfn parse_args() -> Args {\n2\t    Args::default()\n3\t}",
            false,
        )]),
        Message::assistant("I found parse_args on line 1 and will rename it next."),
    ];
    // 32 output tokens each: the test asks for a non-empty summary from each
    // path, and on 2 cores every token past that is ~15 ms of CPU (96 took
    // 9.4 s of CPU for the test, 32 takes 6.6 s; the rest is the prompts).
    let mut summarizer =
        ProviderSummarizer::new(provider, "", "You are a coding agent.", vec![], 32);
    let in_place = summarizer
        .summarize(
            SummaryInput::Continuation(&history),
            Some("the rename"),
            "",
            SUMMARY_CHARS,
        )
        .await
        .unwrap();
    assert!(!in_place.trim().is_empty());
    let transcript = bounded_transcript(&history, 4_000);
    let from_text = summarizer
        .summarize(
            SummaryInput::Transcript(&transcript),
            None,
            "",
            SUMMARY_CHARS,
        )
        .await
        .unwrap();
    assert!(!from_text.trim().is_empty());
}
