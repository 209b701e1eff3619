//! Throughput of the streaming path: SSE decoding alone, and a whole
//! Anthropic response streamed over loopback and assembled.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use testkit::{Chunking, Reply, TestServer};
use whittle_llm::sse::SseDecoder;
use whittle_llm::{
    AnthropicAuth, AnthropicConfig, AnthropicProvider, ModelRequest, Secret, complete,
};
use whittle_protocol::Message;

/// About 1 MiB of `content_block_delta` events, as the API sends them.
fn sample_stream() -> Vec<u8> {
    let mut s = String::new();
    let delta = "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Some streamed words \\u00e9\"}}";
    while s.len() < 1 << 20 {
        s.push_str("event: content_block_delta\n");
        s.push_str(delta);
        s.push_str("\n\n");
    }
    s.into_bytes()
}

fn sse_decode(c: &mut Criterion) {
    let bytes = sample_stream();
    let mut group = c.benchmark_group("sse_decode");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    for chunk in [64usize, 4096] {
        group.bench_function(format!("1MiB_in_{chunk}B_chunks"), |b| {
            b.iter(|| {
                let mut decoder = SseDecoder::new();
                let mut out = Vec::new();
                let mut n = 0;
                for piece in bytes.chunks(chunk) {
                    decoder.push(piece, &mut out).unwrap();
                    n += out.len();
                    out.clear();
                }
                black_box(n)
            });
        });
    }
    group.finish();
}

fn anthropic_round_trip(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = TestServer::start_blocking();
    server.set_chunking(Chunking {
        max_chunk: 16 * 1024,
        seed: 1,
    });
    let text = "All work and no play makes a dull model. ".repeat(6000);
    let mut config =
        AnthropicConfig::new("claude-sonnet-5-5", AnthropicAuth::ApiKey(Secret::new("k")));
    config.base_url = server.url();
    let provider = AnthropicProvider::new(config).unwrap();
    let mut group = c.benchmark_group("anthropic_stream");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("240KB_text_reply_over_loopback", |b| {
        b.iter(|| {
            server.push(Reply::text(text.clone()));
            let request = ModelRequest::new("", "", vec![Message::user("go")]);
            let response = runtime.block_on(complete(&provider, request)).unwrap();
            black_box(response.message.chars())
        });
    });
    group.finish();
}

criterion_group!(benches, sse_decode, anthropic_round_trip);
criterion_main!(benches);
