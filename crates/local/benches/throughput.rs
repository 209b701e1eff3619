//! Prompt-processing and generation speed of the default model (SmolLM2-135M, Q4_1) on
//! this machine's CPU: `cargo bench -p whittle-local`. Throughput is in tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::ops::ControlFlow;
use std::time::Duration;
use whittle_local::{ChatRequest, GenerationParams, LocalModel, ensure_default_model};
use whittle_protocol::Message;

fn load() -> LocalModel {
    let path = ensure_default_model(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    LocalModel::load(path).unwrap_or_else(|e| panic!("{e}"))
}

/// A chat prompt of roughly `words` words, rendered through the model's template.
fn prompt(model: &LocalModel, words: usize) -> String {
    let filler =
        "The agent reads the failing test, finds the off-by-one error in the loop, and fixes it. ";
    let body: String = filler
        .split(' ')
        .cycle()
        .take(words)
        .collect::<Vec<_>>()
        .join(" ");
    let history = [Message::user(format!(
        "{body}\nSummarize the above in one sentence."
    ))];
    model
        .render(&ChatRequest {
            system: "You are a coding agent.",
            messages: &history,
            tools: &[],
        })
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let mut model = load();
    let mut group = c.benchmark_group("smollm2-135m");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));

    // Prompt processing: a cold cache each time, one token sampled.
    for words in [128usize, 512] {
        let text = prompt(&model, words);
        let n = model.prompt_tokens(&text).unwrap().len();
        let one = GenerationParams {
            max_tokens: 1,
            temperature: 0.0,
            ..GenerationParams::default()
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("prompt_{n}_tokens"), |b| {
            b.iter(|| {
                model.reset_cache();
                model
                    .generate(&text, &one, &mut |_| ControlFlow::Continue(()))
                    .unwrap()
            })
        });
    }

    // Generation: the prompt stays cached, so each iteration is decode steps only.
    let text = prompt(&model, 32).replace(
        "Summarize the above in one sentence.",
        "Write a long story about a dragon.",
    );
    let params = GenerationParams {
        max_tokens: 64,
        temperature: 0.0,
        ..GenerationParams::default()
    };
    let warm = model
        .generate(&text, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    let n = warm.usage.completion_tokens;
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(format!("generate_{n}_tokens"), |b| {
        b.iter(|| {
            model
                .generate(&text, &params, &mut |_| ControlFlow::Continue(()))
                .unwrap()
        })
    });
    group.finish();
}

/// Loading the model file: the header parsed and the weights mapped (converted only where a
/// type has no kernel), tokenizer and template built; the page cache holds the file.
fn bench_load(c: &mut Criterion) {
    let path = ensure_default_model(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("smollm2-135m");
    group.sample_size(20);
    group.bench_function("load", |b| {
        b.iter(|| LocalModel::load(&path).unwrap_or_else(|e| panic!("{e}")))
    });
    group.finish();
}

criterion_group!(benches, bench_load, bench);
criterion_main!(benches);
