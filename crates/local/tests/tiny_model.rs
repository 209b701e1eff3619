//! End-to-end tests on tiny GGUF files written here: random weights, a small byte-level
//! vocabulary with merges, SmolLM2's chat template, run by the real engine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::gguf_file::{self, GgmlDType, QTensor};
use serde_json::json;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use whittle_local::{
    ChatRequest, Completion, GenerationParams, LocalError, LocalModel, StopReason, TokenKind,
    ToolSpec,
};
use whittle_protocol::{Block, Message};

const N_EMBD: usize = 64;
const N_FF: usize = 128;
const WINDOW: usize = 1024;
const SMOLLM2_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const MERGES: &[&str] = &[
    "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d", "u s", "e r",
    "us er",
];
/// The one-token tool call the scripted model emits.
const CALL_BODY: &str = "{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}";

/// GPT-2's byte-to-character map, to write tokens in byte-level form.
fn byte_char(b: u8) -> char {
    let mut extra = 0u32;
    for x in 0..=255u8 {
        let printable = matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        if x == b {
            return if printable {
                char::from(x)
            } else {
                char::from_u32(256 + extra).unwrap()
            };
        }
        if !printable {
            extra += 1;
        }
    }
    unreachable!()
}

fn byte_level(s: &str) -> String {
    s.bytes().map(byte_char).collect()
}

struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
}

impl Vocab {
    fn id(&self, token: &str) -> usize {
        self.tokens.iter().position(|t| t == token).unwrap()
    }
}

fn vocab() -> Vocab {
    let mut tokens: Vec<String> = vec![
        "<|endoftext|>".into(),
        "<|im_start|>".into(),
        "<|im_end|>".into(),
    ];
    let mut types = vec![3, 3, 3];
    for b in 0..=255u8 {
        tokens.push(byte_char(b).to_string());
        types.push(1);
    }
    for m in MERGES {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    for (t, ty) in [("<tool_call>", 4), ("</tool_call>", 4)] {
        tokens.push(t.into());
        types.push(ty);
    }
    tokens.push(byte_level(CALL_BODY));
    types.push(1);
    Vocab { tokens, types }
}

/// Deterministic pseudo-random values in [-scale, scale].
fn noise(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn qt(data: Vec<f32>, shape: &[usize], dtype: GgmlDType) -> QTensor {
    QTensor::quantize(&data, shape, dtype)
}

/// Writes a two-layer llama GGUF. `scripted` zeroes the layers' outputs and wires the
/// embeddings and output projection so greedy decoding after "\n" emits
/// `<tool_call>`, the call body, `</tool_call>`, `<|im_end|>`.
fn write_model(dir: &Path, scripted: bool) -> PathBuf {
    write_arch(dir, scripted, "llama", false)
}

/// Writes a model of architecture `arch`, with q/k/v biases when `biases`.
fn write_arch(dir: &Path, scripted: bool, arch: &str, biases: bool) -> PathBuf {
    write_arch_with(dir, scripted, arch, biases, Vec::new(), Vec::new())
}

/// As [`write_arch`], with `extra` metadata written last (so it wins) and more tensors.
fn write_arch_with(
    dir: &Path,
    scripted: bool,
    arch: &str,
    biases: bool,
    extra: Vec<(String, gguf_file::Value)>,
    extra_tensors: Vec<(String, QTensor)>,
) -> PathBuf {
    let v = vocab();
    let n_vocab = v.tokens.len();
    let chain = [
        v.id(&byte_level("\n")),
        v.id("<tool_call>"),
        v.id(&byte_level(CALL_BODY)),
        v.id("</tool_call>"),
        v.id("<|im_end|>"),
    ];
    let mut embd = noise(n_vocab * N_EMBD, 1, 0.5);
    let mut out = noise(n_vocab * N_EMBD, 2, 0.05);
    if scripted {
        for (k, pair) in chain.windows(2).enumerate() {
            let row = &mut embd[pair[0] * N_EMBD..(pair[0] + 1) * N_EMBD];
            row.fill(0.0);
            row[k] = 1.0;
            out[pair[1] * N_EMBD + k] = 10.0;
        }
    }
    let mut tensors: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            qt(embd, &[n_vocab, N_EMBD], GgmlDType::Q8_0),
        ),
        (
            "output_norm.weight".into(),
            qt(vec![1.0; N_EMBD], &[N_EMBD], GgmlDType::F32),
        ),
    ];
    if scripted {
        tensors.push((
            "output.weight".into(),
            qt(out, &[n_vocab, N_EMBD], GgmlDType::F32),
        ));
    }
    let kv = 2 * (N_EMBD / 4);
    for i in 0..2 {
        let p = format!("blk.{i}");
        let seed = 10 + i as u64 * 10;
        let out_scale = if scripted { 0.0 } else { 0.2 };
        let mats: [(&str, usize, usize, f32, GgmlDType); 7] = [
            ("attn_q", N_EMBD, N_EMBD, 0.2, GgmlDType::Q4_1),
            ("attn_k", kv, N_EMBD, 0.2, GgmlDType::Q4_1),
            ("attn_v", kv, N_EMBD, 0.2, GgmlDType::Q8_0),
            ("attn_output", N_EMBD, N_EMBD, out_scale, GgmlDType::Q4_1),
            ("ffn_gate", N_FF, N_EMBD, 0.2, GgmlDType::Q4_1),
            ("ffn_up", N_FF, N_EMBD, 0.2, GgmlDType::Q4_0),
            ("ffn_down", N_EMBD, N_FF, out_scale, GgmlDType::Q4_1),
        ];
        for (j, (name, rows, cols, scale, dtype)) in mats.into_iter().enumerate() {
            let data = noise(rows * cols, seed + j as u64, scale);
            tensors.push((format!("{p}.{name}.weight"), qt(data, &[rows, cols], dtype)));
        }
        if biases {
            for (j, (name, len)) in [("attn_q", N_EMBD), ("attn_k", kv), ("attn_v", kv)]
                .into_iter()
                .enumerate()
            {
                let data = noise(len, seed + 50 + j as u64, 0.5);
                tensors.push((format!("{p}.{name}.bias"), qt(data, &[len], GgmlDType::F32)));
            }
        }
        for norm in ["attn_norm", "ffn_norm"] {
            tensors.push((
                format!("{p}.{norm}.weight"),
                qt(vec![1.0; N_EMBD], &[N_EMBD], GgmlDType::F32),
            ));
        }
    }
    use gguf_file::Value as V;
    let strings = |xs: &[String]| V::Array(xs.iter().map(|s| V::String(s.clone())).collect());
    let merges: Vec<String> = MERGES.iter().map(|s| s.to_string()).collect();
    let key = |k: &str| format!("{arch}.{k}");
    let mut metadata: Vec<(String, V)> = vec![
        ("general.architecture".into(), V::String(arch.into())),
        ("general.name".into(), V::String("tiny".into())),
        (key("block_count"), V::U32(2)),
        (key("context_length"), V::U32(WINDOW as u32)),
        (key("embedding_length"), V::U32(N_EMBD as u32)),
        (key("feed_forward_length"), V::U32(N_FF as u32)),
        (key("attention.head_count"), V::U32(4)),
        (key("attention.head_count_kv"), V::U32(2)),
        (key("rope.dimension_count"), V::U32(16)),
        (key("rope.freq_base"), V::F32(10000.0)),
        (key("attention.layer_norm_rms_epsilon"), V::F32(1e-5)),
        ("tokenizer.ggml.model".into(), V::String("gpt2".into())),
        (
            "tokenizer.ggml.pre".into(),
            V::String(if arch == "qwen2" { "qwen2" } else { "smollm" }.into()),
        ),
        ("tokenizer.ggml.tokens".into(), strings(&v.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            V::Array(v.types.iter().map(|t| V::I32(*t)).collect()),
        ),
        ("tokenizer.ggml.merges".into(), strings(&merges)),
        ("tokenizer.ggml.bos_token_id".into(), V::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), V::U32(2)),
        ("tokenizer.ggml.add_bos_token".into(), V::Bool(false)),
        (
            "tokenizer.chat_template".into(),
            V::String(SMOLLM2_TEMPLATE.into()),
        ),
    ];
    metadata.extend(extra);
    tensors.extend(extra_tensors);
    let path = dir.join(if scripted {
        "scripted.gguf"
    } else {
        "random.gguf"
    });
    let mut file = std::fs::File::create(&path).unwrap();
    let md: Vec<(&str, &V)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut file, &md, &ts).unwrap();
    file.flush().unwrap();
    path
}

fn model(scripted: bool) -> (tempfile::TempDir, LocalModel) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_model(dir.path(), scripted);
    let model = LocalModel::load(&path).unwrap();
    (dir, model)
}

fn collect(
    model: &mut LocalModel,
    prompt: &str,
    params: &GenerationParams,
) -> (whittle_local::Generation, String) {
    let mut streamed = String::new();
    let g = model
        .generate(prompt, params, &mut |piece| {
            streamed.push_str(piece);
            ControlFlow::Continue(())
        })
        .unwrap();
    (g, streamed)
}

/// A greedy `complete` of `history`: the reply, and the text streamed meanwhile.
fn complete_greedy(
    model: &mut LocalModel,
    history: &[Message],
    tools: &[ToolSpec],
) -> (Completion, String) {
    let mut streamed = String::new();
    let reply = model
        .complete(
            &ChatRequest {
                system: "",
                messages: history,
                tools,
            },
            &GenerationParams {
                temperature: 0.0,
                ..GenerationParams::default()
            },
            &mut |t| {
                streamed.push_str(t);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    (reply, streamed)
}

#[test]
fn loads_metadata_and_tokenizer_round_trips() {
    let (_dir, m) = model(false);
    assert_eq!(m.context_window(), WINDOW);
    assert_eq!(m.architecture(), "llama");
    assert_eq!(m.name(), Some("tiny"));
    assert!(!m.template().is_fallback());
    let t = m.tokenizer();
    for text in [
        "hello world",
        "<|im_start|>user\nhi<|im_end|>\n",
        "naïve 🦀 2024\t\n  x",
        "",
    ] {
        let ids = t.encode(text).unwrap();
        assert_eq!(t.decode(&ids), text);
    }
    let ids = t.encode("<|im_start|>user hello world").unwrap();
    let strs: Vec<&str> = ids.iter().map(|i| t.token(*i).unwrap()).collect();
    assert_eq!(strs, ["<|im_start|>", "user", "Ġ", "hello", "Ġworld"]);
    assert_eq!(t.kind(ids[0]), Some(TokenKind::Control));
    assert!(t.is_stop(2) && t.is_stop(0) && !t.is_stop(1));
}

#[test]
fn template_renders_system_tools_and_history() {
    let (_dir, m) = model(false);
    let tools = [ToolSpec {
        name: "bash".into(),
        description: "Run a shell command".into(),
        input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }];
    let history = [
        Message::user("hello"),
        Message::assistant_blocks(vec![Block::tool_use(
            "t1",
            "bash",
            json!({"command": "ls"}),
        )]),
        Message::user_blocks(vec![Block::tool_result("t1", "a.rs", false)]),
    ];
    let prompt = m
        .render(&ChatRequest {
            system: "Be brief.",
            messages: &history,
            tools: &tools,
        })
        .unwrap();
    assert!(
        prompt.starts_with("<|im_start|>system\nBe brief.\n\n# Tools\n"),
        "{prompt}"
    );
    assert!(prompt.ends_with(
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\":\"bash\",\"arguments\":{\"command\":\"ls\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response name=\"bash\">\na.rs\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    ), "{prompt}");
    // Without a system prompt the file's template supplies its default one.
    let bare = m
        .render(&ChatRequest {
            system: "",
            messages: &history[..1],
            tools: &[],
        })
        .unwrap();
    assert_eq!(
        bare,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = m.prompt_tokens(&bare).unwrap();
    assert_eq!(
        ids.iter().filter(|&&i| i == 1).count(),
        3,
        "each <|im_start|> is one token"
    );
}

/// Sampling (not greedy) with a fixed seed: reproducible, and sensitive to
/// any change in the logits.
fn seeded_sampling() -> GenerationParams {
    GenerationParams {
        max_tokens: 24,
        temperature: 1.0,
        top_p: 0.95,
        repeat_penalty: 1.0,
        seed: 7,
        force_tool_call: false,
    }
}

#[test]
fn fixed_seed_is_reproducible() {
    let (_dir, mut m) = model(false);
    let params = seeded_sampling();
    let prompt = "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n";
    let (a, streamed) = collect(&mut m, prompt, &params);
    assert_eq!(a.text, streamed);
    assert_eq!(
        a.usage.prompt_tokens,
        m.prompt_tokens(prompt).unwrap().len()
    );
    assert_eq!(a.usage.cached_prompt_tokens, 0);
    assert!(a.usage.completion_tokens > 0);
    // From a fresh cache, and in another instance, the same seed gives the same reply.
    m.reset_cache();
    let (b, _) = collect(&mut m, prompt, &params);
    assert_eq!(same(&a), same(&b));
    let (_dir2, mut other) = model(false);
    let (c, _) = collect(&mut other, prompt, &params);
    assert_eq!(same(&a), same(&c));
    // The same call again reuses all of the prompt but its last token.
    let (warm, _) = collect(&mut m, prompt, &params);
    assert_eq!(warm.usage.cached_prompt_tokens, a.usage.prompt_tokens - 1);
    m.reset_cache();
    let (d, _) = collect(
        &mut m,
        prompt,
        &GenerationParams {
            seed: 8,
            ..params.clone()
        },
    );
    assert_ne!(a.text, d.text, "another seed samples differently");
}

#[test]
fn extending_the_conversation_reuses_the_cache_and_matches_a_fresh_run() {
    let (_dir, mut m) = model(false);
    let greedy = GenerationParams {
        max_tokens: 12,
        temperature: 0.0,
        top_p: 1.0,
        repeat_penalty: 1.0,
        seed: 0,
        force_tool_call: false,
    };
    let first = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n";
    let (g1, _) = collect(&mut m, first, &greedy);
    let second = format!(
        "{first}{}<|im_end|>\n<|im_start|>user\nworld<|im_end|>\n<|im_start|>assistant\n",
        g1.text
    );
    let (warm, _) = collect(&mut m, &second, &greedy);
    assert!(warm.usage.cached_prompt_tokens >= m.prompt_tokens(first).unwrap().len());
    m.reset_cache();
    let (cold, _) = collect(&mut m, &second, &greedy);
    assert_eq!(cold.usage.cached_prompt_tokens, 0);
    assert_eq!(warm.text, cold.text);
}

#[test]
fn a_generated_tool_call_becomes_a_tool_use_block() {
    let (_dir, mut m) = model(true);
    let history = [Message::user("list the files")];
    let tools = [ToolSpec {
        name: "bash".into(),
        description: "Run a shell command".into(),
        input_schema: json!({"type": "object"}),
    }];
    let (reply, streamed) = complete_greedy(&mut m, &history, &tools);
    assert_eq!(
        reply.raw_text,
        format!("<tool_call>{CALL_BODY}</tool_call>")
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        reply.usage.completion_tokens, 3,
        "three tokens: a completed call ends the reply"
    );
    assert_eq!(reply.content.len(), 1);
    let call = reply.content[0].as_tool_use().unwrap();
    assert_eq!(
        (call.name.as_str(), &call.input),
        ("bash", &json!({"command": "ls"}))
    );
    assert!(call.id.starts_with("toolu_"));
    assert_eq!(streamed, "", "the call's markup is not streamed as text");
    // A second reply gets a different id.
    let (again, _) = complete_greedy(&mut m, &history, &tools);
    assert_ne!(again.content[0].as_tool_use().unwrap().id, call.id);
}

#[test]
fn prompts_that_do_not_fit_are_overflow_errors() {
    let (_dir, mut m) = model(false);
    let params = GenerationParams {
        max_tokens: 1000,
        temperature: 0.0,
        top_p: 1.0,
        repeat_penalty: 1.0,
        seed: 0,
        force_tool_call: false,
    };
    // "aaa…" has no merges: one token per byte.
    for len in [WINDOW, WINDOW + 100] {
        let err = m
            .generate(
                &"a".repeat(len),
                &params,
                &mut |_| ControlFlow::Continue(()),
            )
            .unwrap_err();
        match err {
            LocalError::ContextOverflow {
                prompt_tokens,
                context_window,
            } => {
                assert_eq!((prompt_tokens, context_window), (len, WINDOW));
            }
            other => panic!("expected overflow, got {other}"),
        }
    }
    // One token short of the window: generation is capped by the room left.
    let (g, _) = collect(&mut m, &"a".repeat(WINDOW - 3), &params);
    assert_eq!(g.usage.prompt_tokens, WINDOW - 3);
    assert!(g.usage.completion_tokens <= 3);
    let history = [Message::user("a".repeat(2 * WINDOW))];
    let err = m
        .complete(
            &ChatRequest {
                system: "",
                messages: &history,
                tools: &[],
            },
            &params,
            &mut |_| ControlFlow::Continue(()),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        LocalError::ContextOverflow {
            context_window: WINDOW,
            ..
        }
    ));
}

#[test]
fn the_callback_can_stop_generation() {
    let (_dir, mut m) = model(false);
    let params = GenerationParams {
        max_tokens: 50,
        temperature: 1.0,
        top_p: 1.0,
        repeat_penalty: 1.0,
        seed: 3,
        force_tool_call: false,
    };
    let mut pieces = 0;
    let g = m
        .generate("hello", &params, &mut |_| {
            pieces += 1;
            if pieces == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(pieces, 2);
    assert_eq!(g.stop_reason, StopReason::Stopped);
}

#[test]
fn malformed_files_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(write_model(dir.path(), false)).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("garbage", b"not a gguf at all".repeat(10)),
        ("truncated header", good[..200].to_vec()),
        ("truncated tensors", good[..good.len() / 2].to_vec()),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(format!("{}.gguf", name.replace(' ', "_")));
        std::fs::write(&path, bytes).unwrap();
        let err = LocalModel::load(&path).unwrap_err();
        assert!(!err.to_string().contains('\n'), "{name}: {err}");
    }
    let err = LocalModel::load(dir.path().join("missing.gguf")).unwrap_err();
    assert!(matches!(err, LocalError::Io { .. }));
}

/// The file is mapped, and every tensor is a view into the map: cut anywhere (in the
/// header, between tensors, one byte short of the last), it is a one-line error naming
/// the file, never a read past the map's end.
#[test]
fn a_mapped_file_cut_anywhere_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(write_model(dir.path(), false)).unwrap();
    let path = dir.path().join("cut.gguf");
    let step = (good.len() / 97).max(1);
    let ends = (0..good.len()).step_by(step).chain([good.len() - 1]);
    for end in ends {
        std::fs::write(&path, &good[..end]).unwrap();
        let err = LocalModel::load(&path).unwrap_err();
        let message = err.to_string();
        assert!(!message.contains('\n'), "cut at {end}: {message}");
        assert!(
            matches!(err, LocalError::InvalidModel { .. }),
            "cut at {end}: {message}"
        );
    }
    std::fs::write(&path, &good).unwrap();
    assert!(LocalModel::load(&path).is_ok());
}

#[test]
fn rope_frequency_factors_from_the_file_change_positions() {
    // Head dimension 16: eight rotary frequencies.
    let factors = |f: f32| {
        vec![(
            "rope_freqs.weight".to_string(),
            qt(vec![f; 8], &[8], GgmlDType::F32),
        )]
    };
    let params = seeded_sampling();
    let prompt = "<|im_start|>user\nhello world hello world<|im_end|>\n<|im_start|>assistant\n";
    let run = |tensors| {
        let dir = tempfile::tempdir().unwrap();
        let path = write_arch_with(dir.path(), false, "llama", false, Vec::new(), tensors);
        let mut m = LocalModel::load(path).unwrap();
        collect(&mut m, prompt, &params).0.text
    };
    let plain = run(Vec::new());
    assert_eq!(run(factors(1.0)), plain, "factors of 1 change nothing");
    assert_ne!(run(factors(64.0)), plain, "factors are applied");
    let dir = tempfile::tempdir().unwrap();
    let bad = write_arch_with(dir.path(), false, "llama", false, Vec::new(), factors(0.0));
    let err = LocalModel::load(bad).unwrap_err().to_string();
    assert!(err.contains("rope_freqs.weight"), "{err}");
}

#[test]
fn a_sentencepiece_vocabulary_is_read_from_the_file() {
    use gguf_file::Value as V;
    let n = vocab().tokens.len();
    let scores = V::Array((0..n).map(|i| V::F32(-(i as f32))).collect());
    let dir = tempfile::tempdir().unwrap();
    let spm = vec![
        (
            "tokenizer.ggml.model".to_string(),
            V::String("llama".into()),
        ),
        (
            "tokenizer.ggml.add_space_prefix".to_string(),
            V::Bool(false),
        ),
    ];
    let mut with_scores = spm.clone();
    with_scores.push(("tokenizer.ggml.scores".to_string(), scores));
    let m = LocalModel::load(write_arch_with(
        dir.path(),
        false,
        "llama",
        false,
        with_scores,
        Vec::new(),
    ))
    .unwrap();
    let t = m.tokenizer();
    let ids = t.encode("hello").unwrap();
    let strs: Vec<&str> = ids.iter().map(|i| t.token(*i).unwrap()).collect();
    assert_eq!(strs, ["hello"]);
    assert_eq!(t.decode(&ids), "hello");

    let dir = tempfile::tempdir().unwrap();
    let err = LocalModel::load(write_arch_with(
        dir.path(),
        false,
        "llama",
        false,
        spm,
        Vec::new(),
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("tokenizer.ggml.scores"), "{err}");
}

#[test]
fn hostile_headers_are_errors_not_panics() {
    use gguf_file::Value as V;
    let cases = [
        (
            "alignment 0",
            ("general.alignment", V::U32(0)),
            "general.alignment is 0",
        ),
        (
            "huge block count",
            ("llama.block_count", V::U64(1 << 60)),
            "block_count",
        ),
    ];
    for (name, (key, value), expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = write_arch_with(
            dir.path(),
            false,
            "llama",
            false,
            vec![(key.into(), value)],
            Vec::new(),
        );
        let err = LocalModel::load(&path).unwrap_err().to_string();
        assert!(err.contains(expect) && !err.contains('\n'), "{name}: {err}");
    }

    // Dimensions whose product overflows: [2^59 + 2, 64] for the embedding.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(write_model(dir.path(), false)).unwrap();
    let name = b"token_embd.weight";
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(name);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap()
        + needle.len();
    assert_eq!(&bytes[at..at + 4], &2u32.to_le_bytes(), "two dimensions");
    let rows = at + 4 + 8;
    bytes[rows..rows + 8].copy_from_slice(&((1u64 << 59) + 2).to_le_bytes());
    let path = dir.path().join("overflow.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let err = LocalModel::load(&path).unwrap_err().to_string();
    assert!(err.contains("impossible dimensions"), "{err}");

    // Any byte of the header changed: an error or a model, never a panic.
    let good = std::fs::read(write_model(dir.path(), false)).unwrap();
    let header = good.len().min(16 * 1024);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..150 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut bytes = good.clone();
        let at = (state % header as u64) as usize;
        bytes[at] = (state >> 32) as u8;
        let path = dir.path().join(format!("flip{i}.gguf"));
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = LocalModel::load(&path) {
            assert!(!e.to_string().contains('\n'), "flip at {at}: {e}");
        }
    }
}

#[test]
fn qwen2_architecture_runs_with_biases_and_its_own_split() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = LocalModel::load(write_arch(dir.path(), false, "qwen2", true)).unwrap();
    assert_eq!(m.architecture(), "qwen2");
    // Qwen2's pre-tokenizer keeps a leading space off digits and splits them one by one.
    let t = m.tokenizer();
    let ids = t.encode("hello world 2024").unwrap();
    let strs: Vec<&str> = ids.iter().map(|i| t.token(*i).unwrap()).collect();
    assert_eq!(strs, ["hello", "Ġworld", "Ġ", "2", "0", "2", "4"]);
    let params = GenerationParams {
        max_tokens: 16,
        temperature: 0.8,
        top_p: 0.9,
        repeat_penalty: 1.0,
        seed: 5,
        force_tool_call: false,
    };
    let (a, _) = collect(&mut m, "hello", &params);
    m.reset_cache();
    let (b, _) = collect(&mut m, "hello", &params);
    assert_eq!(same(&a), same(&b));
    assert!(a.usage.completion_tokens > 0);
    // A qwen2 file without its biases is refused with the tensor's name.
    let err = LocalModel::load(write_arch(dir.path(), false, "qwen2", false)).unwrap_err();
    assert!(err.to_string().contains("blk.0.attn_q.bias"), "{err}");
    // An architecture the engine does not know is refused by name.
    let err = LocalModel::load(write_arch(dir.path(), false, "mamba", false)).unwrap_err();
    assert!(matches!(err, LocalError::Unsupported(_)), "{err}");
}

/// What a generation produced, without its timings (which differ run to run).
fn same(g: &whittle_local::Generation) -> (&str, whittle_local::Usage, whittle_local::StopReason) {
    (&g.text, g.usage, g.stop_reason)
}
