//! Replaying one recorded conversation through one policy, as if the agent
//! were live.
//!
//! Every assistant turn of the recording is one model call. Before it, the
//! policy's pipeline runs on the history rebuilt so far; the request that
//! would have been sent is measured (tokens = characters / `chars_per_token`),
//! validated, and priced by the [prompt-cache simulator](crate::prompt_cache).
//! Then the recorded answer is appended and the replay goes on.
//!
//! With a recording ([`replay_recorded`]), every request also carries the
//! conversation's calibrated overhead, tokens use its calibrated ratio, the
//! cache expires over the recorded idle gaps, and `none` makes the requests
//! as the recording agent made them: restarted at its own compactions, and
//! exactly as logged when the log has them. A compaction the person asked
//! for (Claude Code's `/compact`, recorded as a `manual` boundary) is the
//! person's command, not the recording agent's policy: every policy with a
//! pipeline compacts there too, as whittle's `/compact` does, while the
//! automatic ones stay the recording agent's own. So do the calls the
//! recording agent made to write its summaries (Claude Code's compaction
//! subagent): `none` makes them, as part of the session's bill, and a
//! policy with a pipeline makes its own summaries in the session instead
//! (see [`replay_paths`](crate::replay_paths)).

use crate::calibration::{Calibration, Measured};
use crate::call_times::{TenthsP99, median};
use crate::import::Conversation;
use crate::policy::{MASK_KEEP_RESULTS, Policy, ReplayConfig};
use crate::prompt_cache::{CallTime, PromptCache, hash};
use crate::recorded::{CacheTtl, RecordedCall};
use crate::report::{AppliedStep, ReplayReport};
use crate::survival::SurvivalProbe;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use whittle_context::prompts::{CONTINUATION_INSTRUCTION, summary_instruction};
use whittle_context::steps::{cache_anchor, micro_compact};
use whittle_context::{
    CachePrices, CacheState, CharMeter, Compactor, Ctx, History, Limits, Meter, Outcome, Step,
    StepReport, SummarizeError, Summarizer, SummaryInput, TokenMeter, check_recovery,
};
use whittle_llm::Prices;
use whittle_protocol::{Content, Message, Role, validate};
use whittle_store::Store;

/// Passes summaries through and prices them: a continuation goes through
/// the prompt cache like any request, a transcript is fresh input.
struct Counting<'a, 'c> {
    inner: &'a mut dyn Summarizer,
    cache: PromptCache<'c>,
    /// The call the summaries are made for.
    time: CallTime,
    calls: u64,
    read_tokens: u64,
    write_tokens: u64,
    write_1h_tokens: u64,
    fresh_tokens: u64,
    output_chars: usize,
    /// Time spent in summary calls: the model's in the agent (here the
    /// stand-in's, with the pricing of its request), not the pipeline's.
    spent: Duration,
}

impl Summarizer for Counting<'_, '_> {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        ledger: &str,
        max_chars: usize,
    ) -> Result<String, SummarizeError> {
        let started = Instant::now();
        self.calls += 1;
        let instruction =
            summary_instruction(CONTINUATION_INSTRUCTION, focus, ledger, max_chars).len();
        match input {
            SummaryInput::Continuation(messages) => {
                let priced = self
                    .cache
                    .price(messages, None, instruction, None, self.time);
                self.read_tokens += priced.read;
                self.write_tokens += priced.write;
                self.write_1h_tokens += priced.write_1h;
            }
            SummaryInput::Transcript(t) => {
                self.fresh_tokens += self.cache.config.tokens(t.chars().count() + instruction);
            }
        }
        let answer = self.inner.summarize(input, focus, ledger, max_chars);
        if let Ok(out) = &answer {
            self.output_chars += out.chars().count();
        }
        self.spent += started.elapsed();
        answer
    }
}

/// Replays `messages` (one recorded conversation) under `policy`, with the
/// store under `store_dir` (which should be empty). Nothing is known of the
/// recording but its messages: see [`replay_recorded`] for the rest.
pub fn replay_conversation(
    id: &str,
    messages: &[Message],
    system: Option<&str>,
    policy: Policy,
    config: &ReplayConfig,
    summarizer: &mut dyn Summarizer,
    store_dir: &Path,
) -> ReplayReport {
    let recording = Recording {
        overhead_chars: 0,
        calls: HashMap::new(),
        restarts: &[],
        requested: &[],
        exact: false,
        billed: false,
        injected: &[],
    };
    let run = ReplayRun {
        id,
        messages,
        system,
        recording: &recording,
        policy,
        config,
        store_dir,
    };
    replay(run, summarizer)
}

/// Replays a recorded conversation under `policy` with what the recording
/// says about its calls (see the module documentation), measured as
/// `calibration` says, with the store under `store_dir` (which should be empty).
pub fn replay_recorded(
    conversation: &Conversation,
    calibration: &Calibration,
    policy: Policy,
    config: &ReplayConfig,
    summarizer: &mut dyn Summarizer,
    store_dir: &Path,
) -> ReplayReport {
    let config = ReplayConfig {
        chars_per_token: calibration.chars_per_token,
        ..config.clone()
    };
    let restarts: Vec<usize> = conversation
        .compaction_boundaries
        .iter()
        .map(|b| b.index)
        .collect();
    let requested: Vec<usize> = conversation
        .compaction_boundaries
        .iter()
        .filter(|b| b.requested())
        .map(|b| b.index)
        .collect();
    let recording = Recording {
        overhead_chars: calibration.overhead_chars,
        calls: conversation.calls.iter().map(|c| (c.message, c)).collect(),
        restarts: if policy == Policy::None {
            &restarts
        } else {
            &[]
        },
        requested: if policy == Policy::None {
            &[]
        } else {
            &requested
        },
        // All or nothing: rebuilt and estimated requests share no prefix.
        exact: calibration.measured == Measured::Exact,
        billed: calibration.measured != Measured::Assumed,
        injected: &conversation.injected,
    };
    let run = ReplayRun {
        id: &conversation.id,
        messages: &conversation.messages,
        system: conversation.system.as_deref(),
        recording: &recording,
        policy,
        config: &config,
        store_dir,
    };
    replay(run, summarizer)
}

/// One replay: a conversation, what is known of its recording, the policy
/// and where its store goes.
#[derive(Clone, Copy)]
struct ReplayRun<'a> {
    id: &'a str,
    messages: &'a [Message],
    system: Option<&'a str>,
    recording: &'a Recording<'a>,
    policy: Policy,
    config: &'a ReplayConfig,
    /// An empty folder for the replay's store.
    store_dir: &'a Path,
}

/// What replay knows of a recording besides its messages.
struct Recording<'a> {
    /// Characters every request carries besides the system text and messages.
    overhead_chars: usize,
    /// The recorded calls, by the index of their answer.
    calls: HashMap<usize, &'a RecordedCall>,
    /// Where the history restarts (the recording agent's own compactions).
    restarts: &'a [usize],
    /// Where the person asked for a compaction: the policy compacts before
    /// the message at each.
    requested: &'a [usize],
    /// Whether `none` sends the requests rebuilt from the log.
    exact: bool,
    /// Whether the recorded usage is the bill of these requests (then the
    /// answers' output is priced as billed).
    billed: bool,
    /// The user messages the recording agent's harness wrote.
    injected: &'a [usize],
}

fn replay(run: ReplayRun<'_>, summarizer: &mut dyn Summarizer) -> ReplayReport {
    let mut replayer = Replayer::new(run, summarizer);
    let mut i = 0;
    while i < run.messages.len() {
        i = replayer.next(i);
    }
    replayer.finish()
}

/// A replay under way: what each call leaves for the next.
struct Replayer<'r, 's> {
    run: ReplayRun<'r>,
    store: Store,
    /// Everything a request carries besides the messages.
    system_chars: usize,
    /// The pipeline of `teaching` and `default`.
    compactor: Option<Compactor>,
    /// What `mask` clears by.
    mask_limits: Limits,
    counting: Counting<'s, 'r>,
    /// What survives; `none` removes nothing (its restarts are the recording's
    /// own compactions, measured on their own: `recorded_survival`).
    probe: Option<SurvivalProbe>,
    history: History,
    report: ReplayReport,
    /// Where the history last restarted: what came before is the recording's loss.
    restarted_at: usize,
    /// The person's newest request, which a marker quotes.
    request: String,
    /// A compaction the person asked for, not made yet.
    compaction_requested: bool,
    /// The pipeline's time before each call, in µs.
    times: Vec<u64>,
    last_call: Option<CallTime>,
}

impl<'r, 's> Replayer<'r, 's> {
    fn new(run: ReplayRun<'r>, summarizer: &'s mut dyn Summarizer) -> Self {
        let ReplayRun {
            id,
            messages,
            system,
            recording,
            policy,
            config,
            store_dir,
        } = run;
        // A fixed transcript name: the default one carries the time, the process
        // id and a process-wide count, whose digits would change the markers'
        // sizes from one run (or one replay in the same process) to the next.
        let store = Store::with_transcript_name(store_dir, "replay");
        let system_chars = system.map_or(0, |s| s.chars().count()) + recording.overhead_chars;
        let compactor = match policy {
            Policy::None | Policy::Mask => None,
            Policy::Teaching => Some(Compactor::new(
                Limits::teaching(),
                store.clone(),
                Box::new(CharMeter),
            )),
            Policy::Default => {
                let mut meter = TokenMeter::new(config.chars_per_token);
                meter.set_overhead_chars(system_chars);
                Some(Compactor::new(
                    config.default_limits(),
                    store.clone(),
                    Box::new(meter),
                ))
            }
        };
        if compactor.is_some() {
            // As a session does when it starts. A folder that cannot be
            // written fails again, and is reported, at the first compaction.
            let _ = store.open_transcript();
        }
        let report = ReplayReport {
            conversation: id.to_string(),
            policy: policy.name().to_string(),
            compaction_limit_tokens: match policy {
                Policy::None | Policy::Mask => None,
                Policy::Teaching => Some(config.tokens(Limits::teaching().context_limit as usize)),
                Policy::Default => Some(config.default_limits().context_limit),
            },
            ..ReplayReport::default()
        };
        let mut counting = Counting {
            inner: summarizer,
            cache: PromptCache::new(config, system.unwrap_or(""), system_chars),
            time: CallTime::default(),
            calls: 0,
            read_tokens: 0,
            write_tokens: 0,
            write_1h_tokens: 0,
            fresh_tokens: 0,
            output_chars: 0,
            spent: Duration::ZERO,
        };
        if let Some(warm) = recording
            .calls
            .values()
            .filter(|c| c.usage.is_some())
            .min_by_key(|c| c.message)
            .and_then(|c| c.usage)
        {
            counting.cache.prewarm(warm.cache_read_tokens);
        }
        Replayer {
            run,
            store,
            system_chars,
            compactor,
            mask_limits: Limits {
                context_limit: 0,
                target: 0,
                keep_recent_results: MASK_KEEP_RESULTS,
                clear_at_least: 0,
                ..Limits::teaching()
            },
            counting,
            probe: (policy != Policy::None)
                .then(|| SurvivalProbe::new(messages, recording.injected)),
            history: History::default(),
            report,
            restarted_at: 0,
            request: String::new(),
            compaction_requested: false,
            times: Vec::new(),
            last_call: None,
        }
    }

    /// Takes message `i` and whatever answers it, and says where to go on.
    fn next(&mut self, i: usize) -> usize {
        let m = &self.run.messages[i];
        if self.run.recording.restarts.contains(&i) {
            self.history.replace_all(Vec::new());
            self.counting.cache.forget_hashes();
            self.restarted_at = i;
        }
        // A boundary between a tool call and its result (a log cut or
        // edited there) waits for the result: the marker replaces whole turns.
        self.compaction_requested |= self.run.recording.requested.contains(&i);
        if self.compaction_requested && !m.has_tool_result() {
            self.compaction_requested = false;
            self.compact_on_request();
        }
        if m.role() == Role::User {
            // The request a marker quotes is the person's, as in the agent:
            // not a turn the recording harness wrote (its own summary, a
            // skill's text, a notice), which would be quoted whole.
            if is_user_input(m) && self.run.recording.injected.binary_search(&i).is_err() {
                self.request = m.text();
            }
            self.save_outputs_as_tools_do(m);
            self.history.push(m.clone());
            return i + 1;
        }
        let recorded = self.run.recording.calls.get(&i).copied();
        // An assistant turn is one model call, but for an opening assistant
        // message (with nothing before it, it cannot be a request) and an
        // answer the recording agent wrote itself.
        if self.history.is_empty() || recorded.is_some_and(RecordedCall::written_by_agent) {
            self.history.push(m.clone());
            return i + 1;
        }
        let answer = self.answer_tokens(i, recorded);
        let billed = self.call(recorded, answer);
        self.take_answer(i, billed)
    }

    /// Saves the results of `m` that the agent's tools would have saved
    /// while they ran (those past `persist_results_above`, which the
    /// agent's output writer keeps in memory no longer): the agent pays
    /// for that file in the tool's time, not in the pipeline's, so replay
    /// counts it with the work ahead. The pipeline then finds it saved, as
    /// in the agent.
    fn save_outputs_as_tools_do(&mut self, m: &Message) {
        let Some(c) = &self.compactor else { return };
        let Some(above) = c.limits().persist_results_above else {
            return;
        };
        let started = Instant::now();
        for result in m.tool_results() {
            if result.content_chars() > above {
                // A file not saved here is saved by the pipeline, on its path.
                let _ = c
                    .store()
                    .save_ahead(&result.tool_use_id, &result.full_text());
            }
        }
        self.report.ahead_us_total += started.elapsed().as_micros() as u64;
    }

    /// One model call: the pipeline on the history, then the request it
    /// leaves measured and priced; an answer of `answer` tokens that the
    /// request's squeezed room would cut is asked again, as the agent
    /// does. Returns the answer's output tokens to bill.
    fn call(&mut self, recorded: Option<&RecordedCall>, answer: u64) -> u64 {
        let time = CallTime {
            at_ms: recorded.and_then(|c| c.at_ms),
            ttl: recorded.and_then(|c| c.cache_ttl).unwrap_or_default(),
            model: hash(&recorded.and_then(|c| c.model.as_deref())),
        };
        self.counting.time = time;
        if let Some(kept) = recorded
            .filter(|c| c.prefix_rebuilt)
            .map(|c| c.usage.map_or(0, |u| u.cache_read_tokens))
        {
            self.counting.cache.rebuild_prefix(kept);
        }
        let cache_state = self.cache_state(time);
        self.last_call = Some(time);
        if let Some(p) = &mut self.probe {
            p.before_pipeline(&self.history);
        }
        // The pipeline's own time: the summaries it asks for are model
        // calls in the agent, timed apart.
        let started = Instant::now();
        let summarizing = self.counting.spent;
        let applied = self.compact(cache_state);
        let summaries = self.counting.spent.saturating_sub(summarizing);
        let pipeline = started.elapsed().saturating_sub(summaries);
        self.times.push(pipeline.as_micros() as u64);
        self.count_steps(applied);
        let sent = self.send(recorded, time);
        let mut billed = answer;
        if let Some(room) = self.cut_at(sent, answer) {
            // The agent's answer stops at the room it was given; it
            // compacts to leave the full room and, if that made room, asks
            // again: the cut answer is paid for, then never seen. Else it
            // keeps the cut answer (here the recorded one, billed as cut).
            self.report.cut_answers += 1;
            if let Some(c) = &mut self.compactor {
                c.leave_full_answer_room();
            }
            if let Some(p) = &mut self.probe {
                p.before_pipeline(&self.history);
            }
            let again = self.cache_state(time);
            let started = Instant::now();
            let summarizing = self.counting.spent;
            let applied = self.compact(again);
            let summaries = self.counting.spent.saturating_sub(summarizing);
            if let Some(last) = self.times.last_mut() {
                *last += started.elapsed().saturating_sub(summaries).as_micros() as u64;
            }
            self.count_steps(applied);
            if self.squeezes(self.request_tokens()) {
                billed = room;
            } else {
                self.report.output_tokens += room;
                self.send(recorded, time);
            }
        }
        // While the model would answer, as the agent does.
        if let Some(c) = &self.compactor {
            let started = Instant::now();
            c.prepare_ahead(&mut self.history);
            self.report.ahead_us_total += started.elapsed().as_micros() as u64;
        }
        billed
    }

    /// What the provider's cache holds: the default policy rewrites its
    /// cached prefix only when the window forces it, the cache went cold
    /// over an idle gap, or the rewrite pays (whittle_context::CacheState).
    fn cache_state(&self, time: CallTime) -> CacheState {
        let idle_ms = self.last_call.map(|l| match (l.at_ms, time.at_ms) {
            (Some(before), Some(now)) => now.saturating_sub(before),
            // No times recorded: nothing expires.
            _ => 0,
        });
        let ttl = self.last_call.map_or(time.ttl, |l| l.ttl);
        CacheState {
            prices: cache_prices(&self.run.config.prices, ttl),
            ttl_ms: ttl.millis(),
            idle_ms,
            calls_so_far: self.report.calls,
        }
    }

    /// The policy's pipeline before a call: the steps that changed the history.
    fn compact(&mut self, cache_state: CacheState) -> Vec<StepReport> {
        let config = self.run.config;
        let mut applied = Vec::new();
        match (&mut self.compactor, self.run.policy) {
            (Some(c), policy) => {
                if policy == Policy::Default {
                    c.set_cache_state(Some(cache_state));
                }
                let outcome = c.prepare(&mut self.history, &self.request, &mut self.counting);
                applied.extend(outcome.reports.into_iter().filter(StepReport::applied));
                if config.tokens(self.history.chars() + self.system_chars) > config.window_tokens {
                    // The provider would reject it: recover as the agent does.
                    let r =
                        c.reactive_compact(&mut self.history, &self.request, &mut self.counting);
                    if r.outcome == Outcome::Applied {
                        applied.push(r);
                    }
                }
            }
            (None, Policy::Mask) => {
                let cx = Ctx {
                    limits: &self.mask_limits,
                    store: &self.store,
                    meter: &CharMeter,
                };
                if let Some(r) = micro_compact(&mut self.history, &cx)
                    && r.applied()
                {
                    applied.push(r);
                }
            }
            (None, _) => {}
        }
        applied
    }

    /// The person's `/compact`: the policy summarizes now, whatever the size,
    /// as the agent's `/compact` does (`Compactor::compact`).
    fn compact_on_request(&mut self) {
        let Some(c) = &mut self.compactor else {
            return;
        };
        if let Some(p) = &mut self.probe {
            p.before_pipeline(&self.history);
        }
        let report = c.compact(&mut self.history, &self.request, &mut self.counting, None);
        let applied = if report.applied() {
            vec![report]
        } else {
            Vec::new()
        };
        self.count_steps(applied);
    }

    /// What survived the steps, and the steps themselves, in the report.
    fn count_steps(&mut self, applied: Vec<StepReport>) {
        let config = self.run.config;
        if let Some(p) = &mut self.probe {
            let replaced = applied.iter().any(|s| {
                matches!(
                    s.step,
                    Step::SnipCompact | Step::CompactHistory | Step::ReactiveCompact
                )
            });
            p.after_pipeline(
                &self.history,
                self.run.system,
                replaced,
                |chars| config.tokens(chars),
                &mut self.report.survival,
            );
        }
        for r in applied {
            let step = r.step.as_str().to_string();
            *self.report.steps.entry(step.clone()).or_default() += 1;
            self.report.applied_steps.push(AppliedStep {
                call: self.report.calls,
                step,
                line: scratch_free_line(&r),
            });
        }
    }

    /// The room an answer of `answer` tokens is cut at, if the request of
    /// `sent` tokens squeezed it below that (never for `none`, which is
    /// the recording, nor where the policy does not squeeze).
    fn cut_at(&self, sent: u64, answer: u64) -> Option<u64> {
        let c = self.compactor.as_ref()?;
        if !self.squeezes(sent) {
            return None;
        }
        let room = c
            .limits()
            .answer_room(sent, self.run.config.reserved_output_tokens);
        (answer > room).then_some(room)
    }

    /// Whether a request of `tokens` squeezes the answer's room under the
    /// policy's limits (`Limits::squeezes`).
    fn squeezes(&self, tokens: u64) -> bool {
        self.compactor
            .as_ref()
            .is_some_and(|c| c.limits().squeezes(tokens))
    }

    /// The size in tokens of the request the history makes now, as
    /// [`Replayer::send`] measures it.
    fn request_tokens(&self) -> u64 {
        self.run
            .config
            .tokens(self.history.chars() + self.system_chars)
    }

    /// The request the history makes (for `none`, what the recording agent
    /// sent, exactly when it was logged): measured, checked and priced.
    /// Returns its size in tokens.
    fn send(&mut self, recorded: Option<&RecordedCall>, time: CallTime) -> u64 {
        let config = self.run.config;
        let exact = recorded
            .and_then(|c| c.request.as_deref())
            .filter(|_| self.run.policy == Policy::None && self.run.recording.exact);
        let tokens = match exact {
            Some(blocks) => config.tokens(blocks.iter().map(|b| b.chars).sum()),
            None => self.request_tokens(),
        };
        let report = &mut self.report;
        if validate(self.history.messages()).is_err() {
            report.invalid_requests += 1;
        }
        if tokens > config.window_tokens {
            report.over_window += 1;
            report.overflow_calls.push(report.calls);
        }
        report.peak_tokens = report.peak_tokens.max(tokens);
        report.tokens_by_call.push(tokens);
        let anchor = match &self.compactor {
            Some(c) => c.cache_anchor(&self.history),
            None => cache_anchor(
                &self.history,
                &Ctx {
                    limits: &self.mask_limits,
                    store: &self.store,
                    meter: &CharMeter,
                },
            ),
        };
        let cache = &mut self.counting.cache;
        let priced = match exact {
            Some(blocks) => {
                report.exact_requests += 1;
                cache.price_blocks(blocks, time)
            }
            None => cache.price(
                self.history.messages(),
                Some(self.history.epoch()),
                0,
                anchor,
                time,
            ),
        };
        self.history.mark();
        report.input_tokens += tokens;
        report.cache_read_tokens += priced.read;
        report.cache_write_tokens += priced.write;
        report.cache_write_1h_tokens += priced.write_1h;
        report.uncached_tokens += tokens.saturating_sub(priced.read + priced.write);
        report.calls += 1;
        tokens
    }

    /// The output tokens of the recorded answer to the call at `i` (this
    /// and any directly following assistant messages): as billed when the
    /// recording says, else estimated from its text.
    fn answer_tokens(&self, i: usize, recorded: Option<&RecordedCall>) -> u64 {
        let billed = recorded
            .and_then(|c| c.usage)
            .filter(|_| self.run.recording.billed)
            .map(|u| u.output_tokens);
        billed.unwrap_or_else(|| {
            self.run.messages[i..]
                .iter()
                .take_while(|m| m.role() == Role::Assistant)
                .map(|m| self.run.config.tokens(content_chars(m)))
                .sum()
        })
    }

    /// Takes the recorded answer to the call at `i` into the history, and
    /// its output into the bill. Returns the index after it.
    fn take_answer(&mut self, mut i: usize, answer: u64) -> usize {
        let messages = self.run.messages;
        while i < messages.len() && messages[i].role() == Role::Assistant {
            self.history.push(messages[i].clone());
            i += 1;
        }
        self.report.output_tokens += answer;
        i
    }

    /// The report, with the summaries' bill, the loss and the pipeline's times.
    fn finish(self) -> ReplayReport {
        let Replayer {
            run,
            store,
            counting,
            history,
            mut report,
            restarted_at,
            times,
            ..
        } = self;
        report.summarize_calls = counting.calls;
        report.summarize_input_tokens =
            counting.read_tokens + counting.write_tokens + counting.fresh_tokens;
        report.output_tokens += run.config.tokens(counting.output_chars);
        let writes = report.cache_write_tokens + counting.write_tokens;
        let writes_1h = report.cache_write_1h_tokens + counting.write_1h_tokens;
        report.cost_usd = run.config.prices.cost_usd(
            report.uncached_tokens + counting.fresh_tokens,
            report.cache_read_tokens + counting.read_tokens,
            writes - writes_1h,
            writes_1h,
            report.output_tokens,
        );
        report.unrecoverable_chars = check_recovery(&run.messages[restarted_at..], &history, &store)
            .unrecoverable_chars as u64;
        report.pipeline_us_p99_by_tenth = TenthsP99::of(&times);
        report.pipeline_us_median = median(&times);
        report.pipeline_us_median_all_calls = report.pipeline_us_median;
        report.pipeline_us_max = times.iter().copied().max().unwrap_or(0);
        report.pipeline_us_total = times.iter().sum();
        report.pipeline_us_by_call = times;
        report
    }
}

/// A step's report line without the files it wrote: they were in a scratch
/// store, gone when the replay ends, and named by time and process.
fn scratch_free_line(r: &StepReport) -> String {
    StepReport {
        paths: Vec::new(),
        ..r.clone()
    }
    .describe(None)
}

/// The replay's price table as the cache model's multiples of input, for
/// writes that live `ttl`.
fn cache_prices(prices: &Prices, ttl: CacheTtl) -> CachePrices {
    let input = if prices.input > 0.0 {
        prices.input
    } else {
        1.0
    };
    CachePrices {
        read: prices.cache_read_multiplier,
        write: match ttl {
            CacheTtl::FiveMinutes => prices.cache_write_multiplier,
            CacheTtl::OneHour => prices.cache_write_1h_multiplier,
        },
        output: prices.output / input,
    }
}

/// Whether a user message is input from the person (not tool results).
fn is_user_input(m: &Message) -> bool {
    match m.content() {
        Content::Text(t) => !t.is_empty(),
        Content::Blocks(_) => !m.has_tool_result() && !m.text().is_empty(),
    }
}

/// Characters of a message's content, roughly what the model generated.
fn content_chars(m: &Message) -> usize {
    m.chars().saturating_sub(30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StandInSummarizer;
    use serde_json::json;
    use std::collections::BTreeMap;
    use whittle_protocol::Block;

    fn conversation(turns: usize, result_chars: usize) -> Vec<Message> {
        let mut m = vec![Message::user("TASK: fix it")];
        for i in 0..turns {
            let id = format!("t{i}");
            m.push(Message::assistant_blocks(vec![
                Block::text(format!("step {i}")),
                Block::tool_use(&id, "bash", json!({"command": "cat x"})),
            ]));
            m.push(Message::user_blocks(vec![Block::tool_result(
                &id,
                format!("{i}:").repeat(result_chars / 3),
                false,
            )]));
        }
        m.push(Message::assistant("done"));
        m
    }

    #[test]
    fn append_only_conversations_read_the_previous_request_from_cache() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReplayConfig::for_window(1_000_000);
        let msgs = conversation(30, 8_000);
        let r = replay_conversation(
            "c",
            &msgs,
            Some("sys"),
            Policy::None,
            &config,
            &mut StandInSummarizer::default(),
            dir.path(),
        );
        assert_eq!(r.calls, 31);
        assert_eq!(
            r.input_tokens,
            r.cache_read_tokens + r.cache_write_tokens + r.uncached_tokens
        );
        assert!(r.cache_read_share() > 0.85, "{r:?}");
        assert_eq!(r.invalid_requests, 0);
        assert_eq!(r.unrecoverable_chars, 0);
        assert_eq!(r.over_window, 0);
    }

    /// `default` lets a history grow into the answer's reserve with a
    /// smaller answer; an answer longer than that room is cut, paid for,
    /// and asked again after a compaction, as the agent does.
    #[test]
    fn an_answer_longer_than_the_squeezed_room_is_cut_and_asked_again() {
        let config = ReplayConfig::for_window(32_000);
        let limits = config.default_limits();
        let replay_messages = |msgs: &[Message], policy: Policy| {
            let dir = tempfile::tempdir().unwrap();
            replay_conversation(
                "c",
                msgs,
                None,
                policy,
                &config,
                &mut StandInSummarizer::default(),
                dir.path(),
            )
        };
        let replay = |answer_chars: usize, policy: Policy| {
            // A long first answer: the second request measures about
            // 29,300 tokens, past the window limit, short of the squeeze.
            let msgs = [
                Message::user("TASK: write the notes"),
                Message::assistant("note ".repeat(23_440)),
                Message::user("go on"),
                Message::assistant("a".repeat(answer_chars)),
            ];
            replay_messages(&msgs, policy)
        };
        let none = replay(12_000, Policy::None);
        let sent = none.tokens_by_call[1];
        assert!(limits.window_limit < sent && sent < limits.squeeze_limit);
        let room = limits.answer_room(sent, config.reserved_output_tokens);

        // An answer that fits the room: sent as it is, nothing compacted.
        let short = replay(4 * room as usize - 400, Policy::Default);
        assert_eq!((short.calls, short.cut_answers), (2, 0), "{short:?}");
        assert!(short.steps.is_empty(), "{short:?}");
        assert_eq!(short.tokens_by_call, none.tokens_by_call);

        // One that does not: cut at the room, then a compaction and the
        // same request again.
        let long = replay(4 * room as usize + 4_000, Policy::Default);
        assert_eq!((long.calls, long.cut_answers), (3, 1), "{long:?}");
        assert_eq!(long.over_window, 0);
        assert!(long.steps.contains_key("compact_history"), "{long:?}");
        let again = long.tokens_by_call[2];
        assert!(again <= limits.window_limit, "{long:?}");
        let answer = config.tokens(4 * room as usize + 4_000 - 30);
        assert!(long.output_tokens >= room + answer, "{long:?}");

        // Where compacting makes no room (the person's own long message,
        // which a marker quotes whole), the cut answer is kept: one call,
        // its output billed up to the room.
        let msgs = [
            Message::user("note ".repeat(23_440)),
            Message::assistant("a".repeat(20_000)),
        ];
        let kept = replay_messages(&msgs, Policy::Default);
        let sent = kept.tokens_by_call[0];
        assert!(limits.squeezes(sent), "{kept:?}");
        let room = limits.answer_room(sent, config.reserved_output_tokens);
        assert_eq!((kept.calls, kept.cut_answers), (1, 1), "{kept:?}");
        assert_eq!(kept.output_tokens, room, "{kept:?}");
    }

    #[test]
    fn none_reports_overflow_and_default_stays_in_the_window() {
        let config = ReplayConfig::for_window(32_000);
        let msgs = conversation(60, 6_000);
        let mut results = BTreeMap::new();
        for policy in Policy::ALL {
            let dir = tempfile::tempdir().unwrap();
            let r = replay_conversation(
                "c",
                &msgs,
                None,
                policy,
                &config,
                &mut StandInSummarizer::default(),
                dir.path(),
            );
            assert_eq!(r.invalid_requests, 0, "{policy:?}");
            assert_eq!(r.unrecoverable_chars, 0, "{policy:?}");
            // The per-call curve and markers agree with the totals.
            assert_eq!(r.tokens_by_call.len() as u64, r.calls, "{policy:?}");
            assert_eq!(r.tokens_by_call.iter().max(), Some(&r.peak_tokens));
            assert_eq!(
                r.applied_steps.len() as u64,
                r.steps.values().sum::<u64>(),
                "{policy:?}"
            );
            assert!(r.applied_steps.windows(2).all(|w| w[0].call <= w[1].call));
            assert!(r.applied_steps.iter().all(|s| s.call < r.calls));
            results.insert(policy, r);
        }
        let none = &results[&Policy::None];
        assert!(none.over_window > 0 && none.overflow_calls[0] > 0);
        let default = &results[&Policy::Default];
        assert_eq!(default.over_window, 0, "{default:?}");
        assert!(default.peak_tokens <= 32_000);
        assert!(default.steps.contains_key("micro_compact"), "{default:?}");
        let mask = &results[&Policy::Mask];
        assert!(mask.steps["micro_compact"] > 10);
    }
}
