//! Greedy decoding alone, for profiling the decode step (`perf record`, `perf stat`):
//! `decode MODEL.gguf [TOKENS] [PROMPT_FILE]` prints tokens per second from the first
//! generated token on. The `speed` example times a whole session, whose prompt
//! processing would dominate a profile.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::ops::ControlFlow;
use std::time::Instant;
use whittle_local::{GenerationParams, LocalModel};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut m = LocalModel::load(&args[0]).unwrap();
    let n: usize = args.get(1).map_or(256, |s| s.parse().unwrap());
    let prompt = match args.get(2) {
        Some(f) => std::fs::read_to_string(f).unwrap(),
        None => "Once upon a time, in a land far away, there lived a dragon who".into(),
    };
    let params = GenerationParams {
        max_tokens: n,
        temperature: 0.0,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    let mut first = None;
    let g = m
        .generate(&prompt, &params, &mut |_| {
            first.get_or_insert_with(Instant::now);
            ControlFlow::Continue(())
        })
        .unwrap();
    let secs = first.unwrap().elapsed().as_secs_f64();
    let tokens = g.usage.completion_tokens;
    println!(
        "{tokens} tokens, {:.1} tok/s",
        tokens.saturating_sub(1) as f64 / secs
    );
}
