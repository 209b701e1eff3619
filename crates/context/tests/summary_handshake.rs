//! The summary handshake driven by hand, as an async harness drives it: a
//! step stops at `SummaryNeeded`, changes nothing until it is resumed, asks
//! at most once more (with less input, after "too long"), and a failed
//! summary leaves the history as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{file_text, read_call, result};
use proptest::prelude::*;
use whittle_context::{
    CachePrices, CacheState, CharMeter, Compactor, History, LEDGER_CLOSE, LEDGER_OPEN, Limits,
    Meter, Outcome, Progress, SUMMARY_CHARS, Step, StepError, StepReport, SummarizeError,
    Summarizer, SummaryInput, TokenBudget, TokenMeter, check_recovery, ledger_file_paths,
};
use whittle_protocol::{Message, validate};
use whittle_store::Store;

fn compactor(dir: &std::path::Path, limits: Limits) -> Compactor {
    Compactor::new(limits, Store::new(dir), Box::new(CharMeter))
}

/// The waiting step, or a panic naming what finished instead.
fn waiting<T: std::fmt::Debug>(progress: Progress<'_, T>) -> whittle_context::SummaryNeeded<'_, T> {
    match progress {
        Progress::NeedsSummary(needed) => needed,
        Progress::Done(result) => panic!("finished without a summary: {result:?}"),
    }
}

fn done<T: std::fmt::Debug>(progress: Progress<'_, T>) -> T {
    match progress {
        Progress::Done(result) => result,
        Progress::NeedsSummary(needed) => panic!("still waiting: {needed:?}"),
    }
}

/// Whether `text` says `fact`: literally, or as a file its ledger's tree
/// of folders lists.
fn names(text: &str, fact: &str) -> bool {
    let open = format!("{LEDGER_OPEN}\n");
    let files = text
        .rfind(&open)
        .map(|at| &text[at + open.len()..])
        .and_then(|rest| rest.find(LEDGER_CLOSE).map(|end| &rest[..end]))
        .map(ledger_file_paths)
        .unwrap_or_default();
    text.contains(fact) || files.iter().any(|f| f == fact)
}

fn long_history() -> History {
    History::new(vec![
        Message::user("task"),
        Message::assistant(file_text(1, 200_000)),
        Message::user("next"),
    ])
}

#[test]
fn a_waiting_step_changes_nothing_and_can_be_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = compactor(dir.path(), Limits::teaching());
    let mut h = long_history();
    let kept = h.clone();
    let needed = waiting(c.start_compact(&mut h, "task", Some("the parser")));
    assert_eq!(needed.step(), Step::CompactHistory);
    assert_eq!(needed.focus(), Some("the parser"));
    let SummaryInput::Transcript(text) = needed.input() else {
        panic!("the teaching preset summarizes a bounded transcript");
    };
    assert!(text.starts_with("[user]\ntask") && text.chars().count() <= 80_000 + 100);
    drop(needed);
    assert_eq!(h, kept);
    // The transcript was written before asking: nothing depends on the answer.
    let transcripts: Vec<_> = std::fs::read_dir(c.store().transcripts_dir())
        .unwrap()
        .collect();
    assert_eq!(transcripts.len(), 1);
}

#[test]
fn too_long_asks_once_more_with_half_then_fails_leaving_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = compactor(dir.path(), Limits::teaching());
    let mut h = long_history();
    let kept = h.clone();
    let needed = waiting(c.start_compact(&mut h, "task", None));
    let first = needed.input().chars();
    let needed = waiting(needed.resume(Err(SummarizeError::InputTooLong)));
    let second = needed.input().chars();
    assert!(second < first / 2 + 100, "{second} vs {first}");
    let report = done(needed.resume(Err(SummarizeError::InputTooLong)));
    assert_eq!(
        report.outcome,
        Outcome::Failed(StepError::Summarize(SummarizeError::InputTooLong))
    );
    assert_eq!(h, kept);
}

#[test]
fn an_in_place_summary_that_is_too_long_falls_back_to_the_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        summarize_in_place_up_to: u64::MAX,
        ..Limits::teaching()
    };
    let mut c = compactor(dir.path(), limits);
    let mut h = long_history();
    let needed = waiting(c.start_compact(&mut h, "task", None));
    assert!(matches!(needed.input(), SummaryInput::Continuation(m) if m.len() == 3));
    let needed = waiting(needed.resume(Err(SummarizeError::InputTooLong)));
    assert!(matches!(needed.input(), SummaryInput::Transcript(t) if t.chars().count() <= 80_100));
    let report = done(needed.resume(Ok("  the summary  ".into())));
    assert!(report.applied(), "{report}");
    assert!(h.messages()[0].text().contains("\"the summary\""));
}

/// A history compacted once, then one more turn: an earlier marker (with
/// its ledger) and new facts after it.
fn compacted_then_more(c: &mut Compactor) -> History {
    let mut h = History::new(vec![
        Message::user("fix the parser"),
        read_call("r1", "src/parse.rs"),
        result("r1", file_text(1, 3_000)),
    ]);
    let needed = waiting(c.start_compact(&mut h, "fix the parser", None));
    assert!(done(needed.resume(Ok("summary one".into()))).applied());
    h.push(Message::user("now the lexer"));
    h.push(read_call("r2", "src/lex.rs"));
    h.push(result("r2", file_text(2, 3_000)));
    h
}

#[test]
fn a_summarizer_that_reads_the_earlier_ledger_is_given_only_the_new_facts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = compactor(dir.path(), Limits::teaching());
    let mut h = compacted_then_more(&mut c);
    let needed = waiting(c.start_compact(&mut h, "now the lexer", None));
    let SummaryInput::Transcript(text) = needed.input() else {
        panic!("the teaching preset summarizes a bounded transcript");
    };
    assert!(
        text.contains("src/parse.rs"),
        "the earlier ledger is in the input"
    );
    let given = needed.ledger();
    assert!(
        given.contains("now the lexer") && given.contains("src/lex.rs"),
        "{given}"
    );
    assert!(
        !given.contains("fix the parser") && !given.contains("src/parse.rs"),
        "{given}"
    );
    // The replacement still carries the whole ledger.
    assert!(done(needed.resume(Ok("summary two".into()))).applied());
    let marker = h.messages()[0].text();
    for fact in [
        "fix the parser",
        "src/parse.rs",
        "now the lexer",
        "src/lex.rs",
    ] {
        assert!(names(&marker, fact), "{fact}: {marker}");
    }
}

#[test]
fn a_summarizer_whose_input_cuts_the_earlier_ledger_is_given_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        summary_input_chars: 400,
        ..Limits::teaching()
    };
    let mut c = compactor(dir.path(), limits);
    let mut h = compacted_then_more(&mut c);
    let needed = waiting(c.start_compact(&mut h, "now the lexer", None));
    let given = needed.ledger();
    for fact in [
        "fix the parser",
        "src/parse.rs",
        "now the lexer",
        "src/lex.rs",
    ] {
        assert!(names(given, fact), "{fact}: {given}");
    }
}

#[test]
fn a_failed_summary_in_prepare_tidies_after_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = compactor(dir.path(), Limits::teaching());
    // Text no tidy step can shrink, plus one old result it can.
    let mut h = History::new(vec![
        Message::user("task"),
        Message::assistant(file_text(1, 60_000)),
        Message::user("read it"),
        read_call("t1", "a.txt"),
        result("t1", file_text(2, 20_000)),
        Message::assistant("read."),
        Message::user("go on"),
    ]);
    let needed = waiting(c.start_prepare(&mut h, "task"));
    assert_eq!(needed.step(), Step::CompactHistory);
    let outcome = done(needed.resume(Err(SummarizeError::Cancelled)));
    let steps: Vec<Step> = outcome.reports.iter().map(|r| r.step).collect();
    assert_eq!(steps[0], Step::CompactHistory, "{outcome:?}");
    assert_eq!(
        outcome.reports[0].outcome,
        Outcome::Failed(StepError::Summarize(SummarizeError::Cancelled))
    );
    assert!(
        outcome.reports[1..]
            .iter()
            .any(|r| r.applied() && matches!(r.step, Step::MicroCompact | Step::FitToolResults)),
        "{outcome:?}"
    );
    let content = h.messages()[4].tool_results().next().unwrap().full_text();
    assert!(content.chars().count() < 20_000, "{content}");
    assert_eq!(outcome.consecutive_over_limit, 1);
}

/// What a summarizer answers, in the property test.
#[derive(Clone, Debug)]
enum Answer {
    Summary(usize),
    TooLong,
    Cancelled,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        3 => (0usize..3_000).prop_map(Answer::Summary),
        2 => Just(Answer::TooLong),
        1 => Just(Answer::Cancelled),
    ]
}

fn history(sizes: &[(usize, usize)]) -> History {
    let mut h = History::new(vec![Message::user("TASK")]);
    for (i, (text, output)) in sizes.iter().enumerate() {
        let id = format!("t{i}");
        h.push(read_call(&id, "f.txt"));
        h.push(result(&id, file_text(i, *output)));
        // Never empty: the API rejects an empty turn, and a compaction that
        // keeps turns verbatim would keep the invalid input too.
        h.push(Message::assistant(file_text(i + 100, (*text).max(1))));
        h.push(Message::user(format!("more {i}")));
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the summarizer answers, a summarizing step asks at most
    /// twice (the second time only after "too long"), leaves the history as
    /// it was unless it applied, and loses nothing when it did.
    #[test]
    fn any_answers_end_the_step_safely(
        sizes in prop::collection::vec((0usize..20_000, 0usize..20_000), 1..12),
        answers in prop::collection::vec(answer(), 2),
        reactive in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = compactor(dir.path(), Limits::teaching());
        let mut h = history(&sizes);
        let kept = h.clone();
        let mut progress = if reactive {
            c.start_reactive_compact(&mut h, "TASK")
        } else {
            c.start_compact(&mut h, "TASK", None)
        };
        let mut asked = 0;
        let report: StepReport = loop {
            progress = match progress {
                Progress::Done(report) => break report,
                Progress::NeedsSummary(needed) => {
                    prop_assert!(asked < 2, "a third summary request");
                    prop_assert!(
                        asked == 0 || matches!(answers[0], Answer::TooLong),
                        "asked again after {:?}", answers[0]
                    );
                    let reply = match &answers[asked] {
                        Answer::Summary(n) => Ok(file_text(7, *n)),
                        Answer::TooLong => Err(SummarizeError::InputTooLong),
                        Answer::Cancelled => Err(SummarizeError::Cancelled),
                    };
                    asked += 1;
                    needed.resume(reply)
                }
            };
        };
        if report.applied() {
            prop_assert_eq!(validate(h.messages()), Ok(()));
            let lost = check_recovery(kept.messages(), &h, c.store());
            prop_assert_eq!(lost.unrecoverable_chars, 0, "{:?}", lost);
        } else {
            prop_assert_eq!(&h, &kept, "{}", report);
        }
    }
}

/// The summary a compaction asks for is as long as the window has room for:
/// the full [`SUMMARY_CHARS`] beside a small system prompt, a quarter of the
/// room beside a big one, and a floor that still says what is next when the
/// system prompt leaves no room at all. The summarizer is given that budget.
#[test]
fn the_summary_asked_for_shrinks_with_the_room_beside_the_system_prompt() {
    let budget_with_overhead = |overhead_chars: usize| {
        let dir = tempfile::tempdir().unwrap();
        let mut meter = TokenMeter::new(4.0);
        meter.set_overhead_chars(overhead_chars);
        let limits = Limits::tokens(TokenBudget::new(32_000, 4_000));
        let mut c = Compactor::new(limits, Store::new(dir.path()), Box::new(meter));
        let mut h = long_history();
        let needed = waiting(c.start_compact(&mut h, "task", None));
        let asked = needed.max_chars();
        let report = done(needed.resume(Ok("s".repeat(asked / 2))));
        assert_eq!(report.outcome, Outcome::Applied);
        asked
    };
    let roomy = budget_with_overhead(0);
    assert_eq!(roomy, SUMMARY_CHARS);
    // 1,500 tokens of room under the target (6,000 chars): a quarter of it.
    let target = Limits::tokens(TokenBudget::new(32_000, 4_000)).target;
    let tight = budget_with_overhead((target as usize - 1_500) * 4);
    assert!(
        (1_300..=1_700).contains(&tight),
        "a quarter of ~6,000 chars of room: {tight}"
    );
    let none = budget_with_overhead(target as usize * 4 + 40_000);
    assert_eq!(none, 1_000, "the floor");
}

/// `finish_with` hands the budget to a blocking summarizer.
#[test]
fn a_blocking_summarizer_is_given_the_budget() {
    struct Budget(Vec<usize>);
    impl Summarizer for Budget {
        fn summarize(
            &mut self,
            _: SummaryInput<'_>,
            _: Option<&str>,
            _: &str,
            max_chars: usize,
        ) -> Result<String, SummarizeError> {
            self.0.push(max_chars);
            Ok("s".repeat(max_chars / 2))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = compactor(dir.path(), Limits::teaching());
    let mut h = long_history();
    let mut s = Budget(Vec::new());
    let report = c.compact(&mut h, "task", &mut s, None);
    assert_eq!(report.outcome, Outcome::Applied);
    assert_eq!(s.0, [SUMMARY_CHARS]);
}

/// Near the window, a history the provider holds is summarized in place as
/// long as it, the ask and the summary's answer fit: that answer is capped
/// far below an ordinary call's reserve, so the window less the reserve
/// (the rule before) sent such a history again as a transcript, fresh
/// input, where the cache would have served it. With the cache cold the
/// transcript costs less, and is sent.
#[test]
fn near_the_window_a_history_the_cache_holds_is_summarized_in_place() {
    // 32,000 units (characters with this meter), 4,000 of them the answer's.
    let limits = Limits::tokens(TokenBudget::new(32_000, 4_000));
    assert!(limits.summarize_in_place_up_to > limits.window_limit);
    let history = || {
        let mut h = History::new(vec![
            Message::user("task"),
            Message::assistant(file_text(1, 28_500)),
            Message::user("next"),
        ]);
        h.mark();
        h
    };
    let state = |idle_ms| CacheState {
        prices: CachePrices::ANTHROPIC_5M,
        ttl_ms: 300_000,
        idle_ms: Some(idle_ms),
        calls_so_far: 10,
    };
    for (idle_ms, in_place) in [(5_000, true), (600_000, false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = compactor(dir.path(), limits.clone());
        c.set_cache_state(Some(state(idle_ms)));
        let mut h = history();
        assert!(c.measure(&h) > limits.window_limit - 1_000);
        let needed = waiting(c.start_compact(&mut h, "task", None));
        assert_eq!(
            matches!(needed.input(), SummaryInput::Continuation(m) if m.len() == 3),
            in_place,
            "idle {idle_ms} ms"
        );
        assert!(done(needed.resume(Ok("the summary".into()))).applied());
    }
}
