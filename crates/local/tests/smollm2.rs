//! Tests on the real default model, SmolLM2-135M-Instruct. The first run on a machine pulls
//! it into the user cache with pip; if that fails, these tests fail (they never skip).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ops::ControlFlow;
use std::sync::{Mutex, OnceLock};
use whittle_local::{ChatRequest, GenerationParams, LocalModel, ensure_default_model};
use whittle_protocol::Message;

/// One loaded model shared by the tests (loading takes a second or two).
fn model() -> &'static Mutex<LocalModel> {
    static MODEL: OnceLock<Mutex<LocalModel>> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = ensure_default_model(&mut |p| eprintln!("pull: {p:?}"))
            .unwrap_or_else(|e| panic!("{e}"));
        Mutex::new(LocalModel::load(&path).unwrap_or_else(|e| panic!("{e}")))
    })
}

#[test]
fn metadata_comes_from_the_file() {
    let m = model().lock().unwrap();
    assert_eq!(m.architecture(), "llama");
    assert_eq!(m.context_window(), 8192);
    assert!(!m.template().is_fallback());
    assert_eq!(m.tokenizer().vocab_size(), 49152);
}

/// Expected ids computed with Hugging Face `tokenizers` (BPE + Digits + ByteLevel) over the
/// same vocabulary and merges: an independent implementation.
#[test]
fn tokenizer_agrees_with_a_reference_implementation() {
    let m = model().lock().unwrap();
    let t = m.tokenizer();
    let cases: [(&str, &[u32]); 5] = [
        ("Hello, world!", &[19556, 28, 905, 17]),
        (
            "The year 2024 had 366 days.",
            &[
                504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 30,
            ],
        ),
        (
            "<|im_start|>user\nWhat's 2+2?<|im_end|>\n",
            &[1, 4093, 198, 1780, 506, 216, 34, 27, 34, 47, 2, 198],
        ),
        (
            "  fn main() {\n    println!(\"héllo 🦀\");\n}\n",
            &[
                216, 24526, 1085, 1000, 1662, 472, 1628, 34115, 17, 1470, 88, 2756, 31394, 15107,
                116, 218, 21646, 198, 109, 198,
            ],
        ),
        (
            "naïve café — ünïcödé\t\ttabs   and    spaces",
            &[
                3546, 46494, 37366, 1841, 5549, 137, 94, 25972, 83, 7466, 84, 2756, 197, 197, 100,
                7366, 256, 284, 333, 5600,
            ],
        ),
    ];
    for (text, expected) in cases {
        let ids = t.encode(text).unwrap();
        assert_eq!(ids, expected, "{text:?}");
        assert_eq!(t.decode(&ids), text);
    }
    assert_eq!(t.encode("<|im_start|>").unwrap(), [1]);
    assert_eq!(t.token(1), Some("<|im_start|>"));
    assert!(t.is_stop(2), "<|im_end|> ends the turn");
}

#[test]
fn a_prompt_gets_a_non_empty_streamed_answer() {
    let mut m = model().lock().unwrap();
    let history = [Message::user(
        "What is the capital of France? Answer in one sentence.",
    )];
    let request = ChatRequest {
        system: "",
        messages: &history,
        tools: &[],
    };
    let mut streamed = Vec::new();
    let params = GenerationParams {
        max_tokens: 48,
        temperature: 0.0,
        ..GenerationParams::default()
    };
    let reply = m
        .complete(&request, &params, &mut |t| {
            streamed.push(t.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
    let text = streamed.concat();
    eprintln!(
        "answer: {text:?} ({:?}, {:?})",
        reply.usage, reply.stop_reason
    );
    assert!(streamed.len() > 1, "streamed in pieces");
    assert!(!text.trim().is_empty());
    assert_eq!(text, reply.raw_text);
    assert!(text.contains("Paris"), "{text}");
    let prompt = m.render(&request).unwrap();
    assert_eq!(
        reply.usage.prompt_tokens,
        m.prompt_tokens(&prompt).unwrap().len()
    );
    assert!(reply.usage.completion_tokens > 0 && reply.usage.completion_tokens <= 48);
}

/// Greedy tokens of `system` + `messages` from the model's current cache state.
fn greedy(m: &mut LocalModel, system: &str, messages: &[Message]) -> whittle_local::Completion {
    let params = GenerationParams {
        max_tokens: 24,
        temperature: 0.0,
        top_p: 1.0,
        repeat_penalty: 1.0,
        seed: 0,
        force_tool_call: false,
    };
    let request = ChatRequest {
        system,
        messages,
        tools: &[],
    };
    m.complete(&request, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap()
}

/// The prefix cache changes how much is computed, never what comes out: a request that
/// extends the previous one, and one that rewrites its history (as compaction does, so
/// only the prefix up to the first changed token is shared), decode the same tokens as a
/// cold run of the same prompt.
#[test]
fn the_prefix_cache_gives_the_same_greedy_reply_as_a_cold_run() {
    let mut m = model().lock().unwrap();
    let system = "You are a concise assistant for a software engineer.";
    let first = [Message::user("Name three sorting algorithms.")];
    m.reset_cache();
    let a = greedy(&mut m, system, &first);
    let extended = [
        Message::user("Name three sorting algorithms."),
        Message::assistant(a.raw_text.clone()),
        Message::user("Which of them is stable?"),
    ];
    let warm = greedy(&mut m, system, &extended);
    assert!(warm.usage.cached_prompt_tokens > a.usage.prompt_tokens / 2);
    let rewritten = [
        Message::user("Summary of earlier turns: the user asked about sorting."),
        Message::user("Which sorting algorithm is stable?"),
    ];
    let after_rewrite = greedy(&mut m, system, &rewritten);
    let shared = after_rewrite.usage.cached_prompt_tokens;
    assert!(shared > 5, "the system prompt is shared");
    assert!(
        shared < after_rewrite.usage.prompt_tokens - 5,
        "the history is not"
    );
    let hits = m.stats().prefix_hits;
    assert!(hits >= 2, "{:?}", m.stats());
    for (messages, warm) in [(&extended[..], &warm), (&rewritten[..], &after_rewrite)] {
        m.reset_cache();
        let cold = greedy(&mut m, system, messages);
        assert_eq!(cold.usage.cached_prompt_tokens, 0);
        assert_eq!(cold.raw_text, warm.raw_text);
        assert!(cold.timings.prompt_tokens_per_second(&cold.usage).is_some());
    }
}

/// Made to look first, the small model writes a call that parses, names one of the tools
/// offered and carries that tool's required argument, greedy or sampled.
#[test]
fn a_forced_tool_call_is_a_valid_call_to_a_listed_tool() {
    use whittle_local::{StopReason, ToolSpec};
    use whittle_protocol::Block;
    let spec = |name: &str, key: &str| ToolSpec {
        name: name.into(),
        description: format!("Give a {key}."),
        input_schema: serde_json::json!({"type": "object",
            "properties": {key: {"type": "string"}}, "required": [key]}),
    };
    let tools = [
        spec("read_file", "path"),
        spec("glob", "pattern"),
        spec("grep", "pattern"),
    ];
    let messages = [Message::user("Which file defines the class Ledger?")];
    let request = ChatRequest {
        system: "You are a coding assistant. Look at the files before you answer.",
        messages: &messages,
        tools: &tools,
    };
    let mut m = model().lock().unwrap();
    for (temperature, seed) in [(0.0, 0), (0.8, 1), (0.8, 2), (1.2, 3)] {
        let params = GenerationParams {
            max_tokens: 96,
            temperature,
            seed,
            force_tool_call: true,
            ..GenerationParams::default()
        };
        let reply = m
            .complete(&request, &params, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        assert_eq!(reply.stop_reason, StopReason::ToolUse, "{}", reply.raw_text);
        let calls: Vec<_> = reply
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse(u) => Some(u),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 1, "{}", reply.raw_text);
        let tool = tools.iter().find(|t| t.name == calls[0].name).unwrap();
        let key = tool.input_schema["required"][0].as_str().unwrap();
        assert!(calls[0].input[key].is_string(), "{}", reply.raw_text);
    }
}

/// The fixed prefix from the disk cache changes how much is computed, never what comes
/// out: a cold run, a run whose system prompt comes from disk, a run with the cache off and
/// a run over a damaged entry (ignored) give the same greedy reply.
#[test]
fn the_prompt_cache_on_disk_gives_the_same_greedy_reply() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = model().lock().unwrap();
    let system = "You are a helpful assistant. Answer in one short sentence.";
    let messages = [Message::user("What is the capital of Italy?")];
    m.set_prompt_cache_dir(Some(dir.path().to_path_buf()))
        .unwrap();
    m.reset_cache();
    let hits = m.stats().disk_prefix_hits;
    let cold = greedy(&mut m, system, &messages);
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        entries.len(),
        1,
        "the system prompt's keys and values were written"
    );
    assert_eq!(m.stats().disk_prefix_hits, hits);
    m.reset_cache();
    let from_disk = greedy(&mut m, system, &messages);
    assert_eq!(m.stats().disk_prefix_hits, hits + 1);
    assert!(from_disk.usage.cached_prompt_tokens > 10);
    assert_eq!(from_disk.raw_text, cold.raw_text);
    // A damaged entry is ignored (and rewritten).
    let path = entries[0].as_ref().unwrap().path();
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    m.reset_cache();
    let damaged = greedy(&mut m, system, &messages);
    assert_eq!(damaged.usage.cached_prompt_tokens, 0);
    assert_eq!(damaged.raw_text, cold.raw_text);
    m.set_prompt_cache_dir(None).unwrap();
    m.reset_cache();
    let off = greedy(&mut m, system, &messages);
    assert_eq!(off.raw_text, cold.raw_text);
}

/// The weights as loaded compute what they computed when the file was read into buffers:
/// 64 greedy tokens of a fixed prompt, recorded with that loader, come out the same now
/// that tensors are views into the memory-mapped file.
#[test]
fn greedy_decoding_of_a_fixed_prompt_is_pinned() {
    let mut m = model().lock().unwrap();
    let params = GenerationParams {
        max_tokens: 64,
        temperature: 0.0,
        top_p: 1.0,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    let messages = [Message::user(
        "Explain in a few sentences what a hash map is and when to use one.",
    )];
    let request = ChatRequest {
        system: "You are a concise assistant for a software engineer.",
        messages: &messages,
        tools: &[],
    };
    m.reset_cache();
    let reply = m
        .complete(&request, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    eprintln!("pinned: {:?}", reply.raw_text);
    assert_eq!(reply.raw_text, PINNED);
}

/// Recorded from the loader that read every tensor into a `Vec<u8>` (before the map).
const PINNED: &str = "A hash map is a data structure that maps keys to values, making it \
suitable for use in algorithms that require efficient lookup and insertion. It's a type of \
hash table that uses hash codes to map keys to values, which can be useful in situations \
where a hash table needs to be modified or reused.\n\nHash";
