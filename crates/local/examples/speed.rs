//! Speed of the embedded model on one machine, as JSON on stdout, for
//! `bench/local_vs_llamacpp.py` (which runs llama.cpp on the same file beside it):
//! `cargo run --release -p whittle-local --example speed -- MODEL.gguf [--long FILE] PROMPT_FILE...`.
//! Each prompt file is raw text (no template), timed as prompt processing. With `--long`,
//! 64 greedy tokens are also timed after that file's text: the agent's real calls
//! generate after thousands of tokens of system prompt, where attention dominates.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::ops::ControlFlow;
use std::time::Instant;
use whittle_local::{ChatRequest, GenerationParams, LocalModel, ToolSpec};
use whittle_protocol::Message;

/// CPU seconds used so far by the whole process (all threads), from `/proc/self/stat`
/// (utime + stime in clock ticks, 100 a second on Linux): on a shared machine the CPU
/// time per token moves far less with the load than the wall time does. `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// `tokens` per CPU second between two [`cpu_seconds`] readings, as JSON (null if unknown).
fn per_cpu_second(tokens: usize, from: Option<f64>, to: Option<f64>) -> String {
    match (from, to) {
        (Some(a), Some(b)) if b > a => format!("{:.1}", tokens as f64 / (b - a)),
        _ => "null".into(),
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let long = args.iter().position(|a| a == "--long").map(|i| {
        let file = args.remove(i + 1);
        args.remove(i);
        std::fs::read_to_string(file).unwrap()
    });
    let (model_path, prompts) = args
        .split_first()
        .expect("MODEL.gguf [--long FILE] PROMPT_FILE...");
    let loading = Instant::now();
    let mut m = LocalModel::load(model_path).unwrap_or_else(|e| panic!("{e}"));
    let load_s = loading.elapsed().as_secs_f64();
    let one = GenerationParams {
        max_tokens: 1,
        temperature: 0.0,
        ..GenerationParams::default()
    };
    let mut pp = Vec::new();
    for file in prompts {
        let text = std::fs::read_to_string(file).unwrap();
        m.reset_cache();
        let cpu = cpu_seconds();
        let g = m
            .generate(&text, &one, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        let cpu_rate = per_cpu_second(g.usage.prompt_tokens, cpu, cpu_seconds());
        let rate = g.timings.prompt_tokens_per_second(&g.usage).unwrap_or(0.0);
        pp.push(format!(
            "{{\"tokens\": {}, \"tokens_per_s\": {rate:.1}, \"tokens_per_cpu_s\": {cpu_rate}}}",
            g.usage.prompt_tokens
        ));
    }
    // Generation: greedy, 128 tokens after a short prompt.
    let gen_params = GenerationParams {
        max_tokens: 128,
        temperature: 0.0,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    m.reset_cache();
    // CPU time from the first generated token on (the prompt is not generation).
    let mut cpu_first = None;
    let g = m
        .generate(
            "Once upon a time, in a land far away, there lived a dragon who",
            &gen_params,
            &mut |_| {
                if cpu_first.is_none() {
                    cpu_first = Some(cpu_seconds());
                }
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    let tg_cpu = per_cpu_second(
        g.usage.completion_tokens.saturating_sub(1),
        cpu_first.flatten(),
        cpu_seconds(),
    );
    let tg = g
        .timings
        .generation_tokens_per_second(&g.usage)
        .unwrap_or(0.0);
    let long = long.map(|text| generation_after(&mut m, &text));
    // An agent session: a long system prompt with ten tool schemas, then a second call
    // that adds one short message. Time to the first generated text of the second call.
    let tools: Vec<ToolSpec> = (0..10)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: format!(
                "Tool number {i}: reads, searches or edits files in the workspace. \
                 Use it when the task needs it; it returns plain text. {}",
                "It never touches files outside the workspace. ".repeat(6)
            ),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A path relative to the workspace root."},
                    "pattern": {"type": "string", "description": "A regular expression to search for."},
                    "limit": {"type": "integer", "description": "Most results to return."}
                },
                "required": ["path"]
            }),
        })
        .collect();
    let system = "You are whittle, a coding agent. ".repeat(40);
    let short = GenerationParams {
        max_tokens: 8,
        temperature: 0.0,
        ..GenerationParams::default()
    };
    let mut history = vec![Message::user("List the files in src.")];
    m.reset_cache();
    let request = ChatRequest {
        system: &system,
        messages: &history,
        tools: &tools,
    };
    let first = m
        .complete(&request, &short, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    history.push(Message::assistant(first.raw_text.clone()));
    history.push(Message::user("Now say hi."));
    let request = ChatRequest {
        system: &system,
        messages: &history,
        tools: &tools,
    };
    let prompt = m.render(&request).unwrap();
    let started = Instant::now();
    let mut first_token = None;
    let second = m
        .generate(&prompt, &short, &mut |_| {
            first_token.get_or_insert_with(|| started.elapsed().as_secs_f64());
            ControlFlow::Continue(())
        })
        .unwrap();
    let long = long.map_or_else(String::new, |(prompt, tokens, rate, cpu_rate)| {
        format!(
            ", \"long_prompt_tokens\": {prompt}, \"long_tg_tokens\": {tokens}, \
             \"long_tg_tokens_per_s\": {rate:.1}, \"long_tg_tokens_per_cpu_s\": {cpu_rate}"
        )
    });
    println!(
        "{{\"load_s\": {load_s:.3}, \"pp\": [{}], \"tg_tokens\": {}, \"tg_tokens_per_s\": {tg:.1}, \"tg_tokens_per_cpu_s\": {tg_cpu}, \
         \"session_prompt_tokens\": {}, \"second_call_cached\": {}, \"second_call_prompt_tokens\": {}, \
         \"second_call_first_token_s\": {:.3}{long}}}",
        pp.join(", "),
        g.usage.completion_tokens,
        first.usage.prompt_tokens,
        second.usage.cached_prompt_tokens,
        second.usage.prompt_tokens,
        first_token.unwrap_or(f64::NAN),
    );
}

/// Greedy generation of 64 tokens after `text` from an empty cache: (prompt tokens,
/// generated tokens, generated tokens per second and per CPU second). Both rates count
/// from the first generated token on, which closes the prompt, as the bench does for
/// llama.cpp.
fn generation_after(m: &mut LocalModel, text: &str) -> (usize, usize, f64, String) {
    let params = GenerationParams {
        max_tokens: 64,
        temperature: 0.0,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    m.reset_cache();
    let mut first = None;
    let g = m
        .generate(text, &params, &mut |_| {
            first.get_or_insert_with(|| (Instant::now(), cpu_seconds()));
            ControlFlow::Continue(())
        })
        .unwrap();
    let tokens = g.usage.completion_tokens.saturating_sub(1);
    let (rate, cpu_rate) = match first {
        Some((wall, cpu)) => (
            tokens as f64 / wall.elapsed().as_secs_f64(),
            per_cpu_second(tokens, cpu, cpu_seconds()),
        ),
        None => (0.0, "null".into()),
    };
    (
        g.usage.prompt_tokens,
        g.usage.completion_tokens,
        rate,
        cpu_rate,
    )
}
