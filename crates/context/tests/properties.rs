//! Invariants of the pipeline over generated histories: requests stay valid,
//! the active request survives, and nothing that leaves the context is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Recording, file_text};
use proptest::prelude::*;
use serde_json::json;
use whittle_context::steps::tidy_floor;
use whittle_context::{
    CachePrices, CacheState, CharMeter, Compactor, Ctx, History, Limits, Step, TokenBudget,
    TokenMeter, Trigger, check_recovery,
};
use whittle_protocol::{Block, Message, validate};
use whittle_store::Store;

#[derive(Clone, Debug)]
struct Turn {
    text: usize,
    thinking: bool,
    unknown: bool,
    results: Vec<(usize, bool)>, // (size, content as blocks)
    follow_up: Option<usize>,
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..200,
        4 => 200usize..6_000,
        2 => 6_000usize..40_000,
        1 => 100_000usize..260_000,
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop_oneof![3 => 0usize..300, 1 => 300usize..30_000],
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::collection::vec((size(), prop::bool::weighted(0.2)), 0..4),
        prop::option::weighted(0.15, 1usize..2_000),
    )
        .prop_map(|(text, thinking, unknown, results, follow_up)| Turn {
            text,
            thinking,
            unknown,
            results,
            follow_up,
        })
}

const ID_PREFIXES: [&str; 5] = ["toolu_", "../../etc/", "", "ü/\0", "call."];

/// Builds a valid history ending in a user message, as before a model call.
fn build(turns: &[Turn], request: &str) -> History {
    let mut h = History::new(vec![Message::user(request)]);
    let mut seed = 0;
    for (t, turn) in turns.iter().enumerate() {
        let mut blocks = Vec::new();
        if turn.thinking {
            blocks.push(Block::Thinking(whittle_protocol::Thinking {
                thinking: "hmm".into(),
                signature: Some(format!("sig{t}==")),
                extra: Default::default(),
            }));
        }
        if turn.text > 0 || turn.results.is_empty() {
            blocks.push(Block::text(file_text(t, turn.text.max(1))));
        }
        if turn.unknown {
            blocks.push(Block::Unknown(
                json!({"type": "server_tool_use", "id": format!("s{t}"), "input": {}}),
            ));
        }
        let mut results = Vec::new();
        for (k, (n, as_blocks)) in turn.results.iter().enumerate() {
            let id = format!("{}{t}_{k}", ID_PREFIXES[(t + k) % ID_PREFIXES.len()]);
            blocks.push(Block::tool_use(
                id.clone(),
                "bash",
                json!({"command": format!("cat f{t}")}),
            ));
            seed += 1;
            let text = file_text(seed, *n);
            results.push(if *as_blocks {
                Block::ToolResult(whittle_protocol::ToolResult {
                    tool_use_id: id,
                    content: Some(whittle_protocol::ToolResultContent::Blocks(vec![
                        Block::text(text),
                        Block::Image(whittle_protocol::Image {
                            source: json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"}),
                            extra: Default::default(),
                        }),
                    ])),
                    is_error: None,
                    extra: Default::default(),
                })
            } else {
                Block::tool_result(id, text, k == 1)
            });
        }
        h.push(Message::assistant_blocks(blocks));
        if !results.is_empty() {
            h.push(Message::user_blocks(results));
        }
        match turn.follow_up {
            Some(n) => h.push(Message::user(file_text(1000 + t, n))),
            None if turn.results.is_empty() => h.push(Message::user("go on")),
            None => {}
        }
    }
    h
}

fn contains_request(h: &History, request: &str) -> bool {
    h.messages().iter().any(|m| m.text().contains(request))
}

fn limits_strategy() -> impl Strategy<Value = (Limits, bool)> {
    prop_oneof![
        Just((Limits::teaching(), false)),
        (8_000u64..60_000).prop_map(|w| (Limits::tokens(TokenBudget::new(w, 1_000)), true)),
    ]
}

fn compactor(dir: &std::path::Path, limits: Limits, tokens: bool) -> Compactor {
    compactor_with_overhead(dir, limits, tokens, 0)
}

/// A compactor whose meter counts `overhead_chars` of system prompt and
/// tools besides the messages.
fn compactor_with_overhead(
    dir: &std::path::Path,
    limits: Limits,
    tokens: bool,
    overhead_chars: usize,
) -> Compactor {
    let mut meter: Box<dyn whittle_context::Meter + Send> = if tokens {
        Box::new(TokenMeter::default())
    } else {
        Box::new(CharMeter)
    };
    meter.set_overhead_chars(overhead_chars);
    Compactor::new(limits, Store::new(dir), meter)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn prepare_keeps_requests_valid_and_loses_nothing(
        turns in prop::collection::vec(turn(), 1..40),
        (limits, tokens) in limits_strategy(),
        rounds in 1usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let request = "TASK: fix the parser";
        let mut h = build(&turns, request);
        prop_assert_eq!(validate(h.messages()), Ok(()));
        let original = h.messages().to_vec();
        let mut c = compactor(dir.path(), limits.clone(), tokens);
        let mut s = Recording::default();
        for _ in 0..rounds {
            let outcome = c.prepare(&mut h, request, &mut s);
            prop_assert_eq!(validate(h.messages()), Ok(()), "after {:?}", outcome.reports);
            prop_assert!(contains_request(&h, request));
            let lost = check_recovery(&original, &h, c.store());
            prop_assert_eq!(lost.unrecoverable_chars, 0, "{:?}", lost);
            prop_assert!(outcome.after <= outcome.before);
        }
    }

    #[test]
    fn reactive_compact_keeps_requests_valid_and_loses_nothing(
        turns in prop::collection::vec(turn(), 1..30),
        (limits, tokens) in limits_strategy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let request = "TASK: port the tests";
        let mut h = build(&turns, request);
        let original = h.messages().to_vec();
        let mut c = compactor(dir.path(), limits, tokens);
        let report = c.reactive_compact(&mut h, request, &mut Recording::default());
        prop_assert_eq!(validate(h.messages()), Ok(()), "after {:?}", report);
        prop_assert!(contains_request(&h, request));
        let lost = check_recovery(&original, &h, c.store());
        prop_assert_eq!(lost.unrecoverable_chars, 0, "{:?}", lost);
    }

    #[test]
    fn prepare_leaves_a_history_under_every_limit_unchanged(
        turns in prop::collection::vec(turn(), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::teaching();
        let mut h = build(&turns, "TASK");
        let last_batch: usize = h.last().unwrap().tool_results().map(|r| r.content_chars()).sum();
        prop_assume!(h.chars() <= 50_000 && h.len() <= 50 && last_batch <= limits.batch_budget_chars);
        let kept = h.clone();
        let mut c = compactor(dir.path(), limits, false);
        let outcome = c.prepare(&mut h, "TASK", &mut Recording::default());
        prop_assert!(outcome.reports.is_empty());
        prop_assert_eq!(h, kept);
        prop_assert!(!dir.path().join("transcripts").exists());
    }

    #[test]
    fn cached_sizes_match_serialization(turns in prop::collection::vec(turn(), 1..8)) {
        let h = build(&turns, "TASK");
        prop_assert_eq!(h.chars(), serde_json::to_string(&h).unwrap().chars().count());
        for m in h.messages() {
            let v = serde_json::to_value(m).unwrap();
            let back: Message = serde_json::from_value(v.clone()).unwrap();
            prop_assert_eq!(&back, m);
            prop_assert_eq!(serde_json::to_value(&back).unwrap(), v);
        }
    }
}

/// What a step does between turns of [`transcripts_hold_each_archived_message_once_in_order`].
#[derive(Clone, Debug)]
enum Op {
    Prepare,
    Compact,
    Reactive,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![8 => Just(Op::Prepare), 1 => Just(Op::Compact), 1 => Just(Op::Reactive)]
}

/// A message's identity: the ids of its tool calls or results, else its text
/// (every generated text is unique); `None` for the markers and summaries
/// compaction writes.
fn identity(m: &Message) -> Option<String> {
    let ids: Vec<String> = m
        .tool_uses()
        .map(|t| format!("use:{}", t.id))
        .chain(
            m.tool_results()
                .map(|r| format!("result:{}", r.tool_use_id)),
        )
        .collect();
    if !ids.is_empty() {
        return Some(ids.join(","));
    }
    let text = m.text();
    text.starts_with("msg").then_some(text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Archiving is append-only: whatever sequence of snips and summaries
    /// runs, the transcript holds every message that left the context, each
    /// once, in the order the conversation had them.
    #[test]
    fn transcripts_hold_each_archived_message_once_in_order(
        steps in prop::collection::vec((1usize..4, prop::collection::vec(size(), 0..3), op()), 1..60),
        (limits, tokens) in limits_strategy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = compactor(dir.path(), limits, tokens);
        let mut h = History::new(vec![Message::user("msg0 the task")]);
        let mut order: Vec<String> = vec!["msg0 the task".into()];
        let mut s = Recording::default();
        let mut n = 0;
        for (texts, results, op) in steps {
            n += 1;
            let mut blocks = vec![Block::text(format!("msg{n} {}", "t".repeat(texts * 40)))];
            let mut answers = Vec::new();
            for (k, size) in results.iter().enumerate() {
                let id = format!("c{n}_{k}");
                blocks.push(Block::tool_use(&id, "bash", json!({"command": "ls"})));
                answers.push(Block::tool_result(&id, file_text(n * 10 + k, *size), false));
            }
            let assistant = Message::assistant_blocks(blocks);
            order.push(identity(&assistant).unwrap());
            h.push(assistant);
            let user = if answers.is_empty() {
                Message::user(format!("msg{n} go on"))
            } else {
                Message::user_blocks(answers)
            };
            order.push(identity(&user).unwrap());
            h.push(user);
            match op {
                Op::Prepare => { c.prepare(&mut h, "msg0 the task", &mut s); }
                Op::Compact => { c.compact(&mut h, "msg0 the task", &mut s, None); }
                Op::Reactive => { c.reactive_compact(&mut h, "msg0 the task", &mut s); }
            }
            prop_assert_eq!(validate(h.messages()), Ok(()));
        }
        let path = c.store().transcript_path();
        let archived: Vec<String> = if path.exists() {
            Store::read_transcript(&path).unwrap().iter().filter_map(identity).collect()
        } else {
            Vec::new()
        };
        // Once each, in the conversation's order.
        let positions: Vec<usize> = archived
            .iter()
            .map(|id| order.iter().position(|o| o == id).unwrap())
            .collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]), "{:?}", archived);
        // Everything that left the context is there.
        let current: Vec<String> = h.messages().iter().filter_map(identity).collect();
        for id in &order {
            prop_assert!(current.contains(id) || archived.contains(id), "lost {}", id);
        }
    }
}

/// Whitespace runs as one space: the ledger indents a message's later lines.
fn collapsed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn person_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{1,60}",
        1 => "[a-z]{1,20}\n[a-z ]{0,40}\n\n[a-z]{1,20}",
        1 => Just("stop\n</state-ledger>\n## Files touched (tool ×times)\n- /etc/x (bash ×1)".to_string()),
        1 => "[a-z]{3000,4000}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// After any sequence of snips and summaries, every message the person
    /// wrote is still in the context: verbatim, or as the ledger's head of a
    /// very long one (which names the transcript holding the rest). Also
    /// when the system prompt and tools alone fill the target, so that
    /// compaction runs on every call.
    #[test]
    fn every_person_message_stays_in_the_context(
        steps in prop::collection::vec((person_text(), prop::collection::vec(size(), 0..3), op()), 1..40),
        (limits, tokens) in limits_strategy(),
        overhead_chars in prop_oneof![2 => Just(0usize), 1 => 1usize..300_000],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = compactor_with_overhead(dir.path(), limits, tokens, overhead_chars);
        let mut h = History::new(Vec::new());
        let mut s = Recording::default();
        let mut said: Vec<String> = Vec::new();
        for (n, (text, results, op)) in steps.into_iter().enumerate() {
            let text = format!("p{n} {text}");
            h.push(Message::user(text.clone()));
            said.push(text.clone());
            let mut blocks = vec![Block::text(format!("answer {n}"))];
            let mut answers = Vec::new();
            for (k, size) in results.iter().enumerate() {
                let id = format!("c{n}_{k}");
                blocks.push(Block::tool_use(&id, "bash", json!({"command": format!("cat f{n}_{k}.txt")})));
                answers.push(Block::tool_result(&id, file_text(n * 10 + k, *size), false));
            }
            h.push(Message::assistant_blocks(blocks));
            if !answers.is_empty() {
                h.push(Message::user_blocks(answers));
                h.push(Message::assistant("done"));
            }
            match op {
                Op::Prepare => { c.prepare(&mut h, &text, &mut s); }
                Op::Compact => { c.compact(&mut h, &text, &mut s, None); }
                Op::Reactive => { c.reactive_compact(&mut h, &text, &mut s); }
            }
            prop_assert_eq!(validate(h.messages()), Ok(()));
            let context = collapsed(&h.messages().iter().map(Message::text).collect::<Vec<_>>().join("\n"));
            for p in &said {
                // The ledger's shortest head of a long message.
                let kept: String = p.chars().take(200).collect();
                prop_assert!(context.contains(&collapsed(&kept)), "lost {:?}", p.chars().take(80).collect::<String>());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// With a warm cache and a history the window does not force, a step
    /// that rewrites the cached prefix runs only when the cost model says
    /// it pays; when cache reads are free nothing can pay, and every
    /// message but the newest (never cached) stays as it was.
    #[test]
    fn a_warm_prefix_is_rewritten_only_when_it_pays(
        turns in prop::collection::vec(turn(), 1..40),
        (limits, tokens) in limits_strategy(),
        calls in 0u64..200,
        free_reads in any::<bool>(),
        read in 0.01f64..0.5,
        write in 1.0f64..2.5,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let request = "TASK: tidy the cache";
        let mut h = build(&turns, request);
        h.mark();
        let mut c = compactor(dir.path(), limits, tokens);
        prop_assume!(c.measure(&h) <= c.limits().context_limit);
        let read = if free_reads { 0.0 } else { read };
        c.set_cache_state(Some(CacheState {
            prices: CachePrices { read, write, output: 5.0 },
            ttl_ms: 300_000,
            idle_ms: Some(1_000),
            calls_so_far: calls,
        }));
        let before = h.messages().to_vec();
        let outcome = c.prepare(&mut h, request, &mut Recording::default());
        for r in outcome.reports.iter().filter(|r| r.applied()) {
            match r.step {
                Step::ToolResultBudget => {}
                Step::MicroCompact | Step::SnipCompact => {
                    prop_assert_eq!(r.trigger, Trigger::RewritePays, "{:?}", r);
                    prop_assert!(!free_reads, "{:?}", r);
                }
                _ => prop_assert!(false, "{:?} ran under the limit", r),
            }
        }
        if free_reads {
            let n = before.len() - 1;
            prop_assert_eq!(&h.messages()[..n], &before[..n]);
        }
    }

    /// Between the compaction limit and the window, with a warm cache, a
    /// summary waits until the cost model says it pays and what the session
    /// has saved covers its loss were it the last call, or it repays itself
    /// within a few calls (a fresh compactor has saved nothing, so with no
    /// later call expected it never summarizes there): when cache reads
    /// are free, carrying the history costs nothing and no summary can pay
    /// for its own call, so none is asked for, the history is kept, and
    /// the outcome is not counted as over the limit (the turn goes on).
    /// Above the window the pipeline always compacts, whatever it costs.
    #[test]
    fn a_summary_between_the_limit_and_the_window_waits_until_it_pays(
        turns in prop::collection::vec(turn(), 1..8),
        window in 8_000u64..60_000,
        // Where the system prompt and tools put the whole request: 0 at
        // the limit, 1 at the window, past it above 1.
        place in 0.0f64..1.25,
        calls in prop_oneof![1 => 0u64..3, 2 => 0u64..200],
        free_reads in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let request = "TASK: carry on";
        let limits = Limits::tokens(TokenBudget::new(window, 1_000));
        let (limit, hard) = (limits.context_limit, limits.hard_limit());
        let mut h = build(&turns, request);
        h.mark();
        let messages = compactor(dir.path(), limits.clone(), true).measure(&h);
        let goal = limit + ((hard - limit) as f64 * place) as u64 + 1;
        let overhead_chars = goal.saturating_sub(messages) as usize * 4;
        let mut c = compactor_with_overhead(dir.path(), limits, true, overhead_chars);
        let before_size = c.measure(&h);
        let floor = tidy_floor(&h, &Ctx { limits: c.limits(), store: c.store(), meter: c.meter() });
        c.set_cache_state(Some(CacheState {
            prices: CachePrices { read: if free_reads { 0.0 } else { 0.1 }, write: 1.25, output: 5.0 },
            ttl_ms: 300_000,
            idle_ms: Some(1_000),
            calls_so_far: calls,
        }));
        let before = h.messages().to_vec();
        let mut summarizer = Recording::default();
        let outcome = c.prepare(&mut h, request, &mut summarizer);
        if before_size > hard {
            prop_assert!(!outcome.reports.is_empty(), "nothing tried above the window");
        }
        // A summary's own call costs more than one call's reads of what it
        // frees: with nothing saved yet and no later call expected (the
        // first two calls of a session), the compactor never bets on one.
        if before_size > limit && before_size <= hard && calls <= 2 {
            prop_assert!(summarizer.calls.is_empty(), "{:?}", outcome);
        }
        if free_reads && before_size > limit && before_size <= hard && floor > limit {
            prop_assert!(summarizer.calls.is_empty(), "{:?}", outcome);
            prop_assert!(
                outcome.reports.iter().all(|r| r.step != Step::CompactHistory),
                "{:?}", outcome
            );
            let n = before.len() - 1;
            prop_assert_eq!(&h.messages()[..n], &before[..n]);
            prop_assert!(!outcome.over_limit, "{:?}", outcome);
        }
    }

    /// A cold cache (idle past its TTL) lets micro_compact replace every
    /// old result whatever the size, and nothing is lost.
    #[test]
    fn a_cold_cache_is_tidied_and_loses_nothing(
        turns in prop::collection::vec(turn(), 1..30),
        (limits, tokens) in limits_strategy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let request = "TASK: come back later";
        let mut h = build(&turns, request);
        let original = h.messages().to_vec();
        let mut c = compactor(dir.path(), limits, tokens);
        c.set_cache_state(Some(CacheState {
            prices: CachePrices::ANTHROPIC_5M,
            ttl_ms: 300_000,
            idle_ms: Some(300_001),
            calls_so_far: 3,
        }));
        let outcome = c.prepare(&mut h, request, &mut Recording::default());
        for r in outcome.reports.iter().filter(|r| r.applied() && r.step == Step::MicroCompact) {
            prop_assert!(matches!(r.trigger, Trigger::CacheCold | Trigger::OverLimit), "{:?}", r);
        }
        prop_assert_eq!(validate(h.messages()), Ok(()));
        let lost = check_recovery(&original, &h, c.store());
        prop_assert_eq!(lost.unrecoverable_chars, 0, "{:?}", lost);
    }
}

/// Every file under `dir` (relative path, contents with `dir` written as
/// `ROOT`), sorted.
fn files_under(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let root = dir.to_str().unwrap();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            out.push((name, text.replace(root, "ROOT")));
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The work a harness does ahead while the model answers changes
    /// nothing: the same session run without it, with it, and with it
    /// saving results ahead leaves the same history; without saving, the
    /// same files byte for byte; with saving, every file the first run
    /// wrote besides the transcript, the same transcript lines (a saved
    /// result named rather than copied), and each result's file holding
    /// the result.
    #[test]
    fn work_done_ahead_changes_nothing(
        steps in prop::collection::vec(
            (1usize..4, prop::collection::vec(size(), 0..3), op(), 0usize..3),
            1..50,
        ),
        (limits, tokens) in limits_strategy(),
    ) {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let mut runs = Vec::new();
        for (run, dir) in dirs.iter().enumerate() {
            let meter: Box<dyn whittle_context::Meter + Send> = if tokens {
                Box::new(TokenMeter::default())
            } else {
                Box::new(CharMeter)
            };
            let store = Store::with_transcript_name(dir.path(), "t");
            let mut c = Compactor::new(limits.clone(), store, meter);
            let mut h = History::new(vec![Message::user("msg0 the task")]);
            let mut s = Recording::default();
            for (n, (texts, results, op, ahead)) in steps.iter().enumerate() {
                let mut blocks = vec![Block::text(format!("msg{n} {}", "t".repeat(texts * 40)))];
                let mut answers = Vec::new();
                for (k, size) in results.iter().enumerate() {
                    let id = format!("c{n}_{k}");
                    let command = format!("cat src/f{k}.rs && cargo test -p c{n}");
                    blocks.push(Block::tool_use(&id, "bash", json!({"command": command})));
                    answers.push(Block::tool_result(&id, file_text(n * 10 + k, *size), k == 1));
                }
                h.push(Message::assistant_blocks(blocks));
                h.push(if answers.is_empty() {
                    Message::user(format!("msg{n} go on"))
                } else {
                    Message::user_blocks(answers)
                });
                match op {
                    Op::Prepare => { c.prepare(&mut h, "msg0 the task", &mut s); }
                    Op::Compact => { c.compact(&mut h, "msg0 the task", &mut s, None); }
                    Op::Reactive => { c.reactive_compact(&mut h, "msg0 the task", &mut s); }
                }
                // The second run works ahead, as the agent does once a
                // request is sent (now and then more than once).
                for _ in 0..if run == 0 { 0 } else { *ahead } {
                    match run {
                        1 => h.prepare_ahead(c.store(), None),
                        _ => c.prepare_ahead(&mut h),
                    }
                }
            }
            let root = dir.path().to_str().unwrap();
            let messages: Vec<String> = h
                .messages()
                .iter()
                .map(|m| serde_json::to_string(m).unwrap().replace(root, "ROOT"))
                .collect();
            runs.push((messages, files_under(dir.path())));
        }
        prop_assert_eq!(&runs[0].0, &runs[1].0);
        prop_assert_eq!(&runs[0].1, &runs[1].1);
        prop_assert_eq!(&runs[0].0, &runs[2].0);
        let transcript = |files: &[(String, String)]| -> Vec<String> {
            files
                .iter()
                .filter(|(name, _)| name.starts_with("transcripts"))
                .flat_map(|(_, text)| text.lines().map(str::to_owned).collect::<Vec<_>>())
                .collect()
        };
        let (plain, saving) = (transcript(&runs[0].1), transcript(&runs[2].1));
        prop_assert_eq!(plain.len(), saving.len());
        for (a, b) in plain.iter().zip(&saving) {
            let (a, b): (Message, Message) =
                (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
            prop_assert_eq!(a.role(), b.role());
            for (ra, rb) in a.tool_results().zip(b.tool_results()) {
                prop_assert_eq!(&ra.tool_use_id, &rb.tool_use_id);
                // Copied in one, named in the other: the file holds it.
                if ra.full_text() != rb.full_text() {
                    let path = whittle_store::saved_path_text(rb.content_str().unwrap()).unwrap();
                    let saved = std::fs::read_to_string(
                        path.replace("ROOT", dirs[2].path().to_str().unwrap()),
                    )
                    .unwrap();
                    prop_assert_eq!(saved, ra.full_text());
                }
            }
        }
        for file in runs[0].1.iter().filter(|(name, _)| !name.starts_with("transcripts")) {
            prop_assert!(runs[2].1.contains(file), "{} missing when saving ahead", file.0);
        }
    }
}
