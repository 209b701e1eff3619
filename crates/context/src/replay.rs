//! Replays a recorded conversation through a compaction policy as if the
//! agent were live, and measures what it would have cost.
//!
//! Every assistant turn of the recording is one model call. Before it, the
//! policy's pipeline runs on the history rebuilt so far; the request that
//! would have been sent is measured (tokens = characters / `chars_per_token`),
//! validated, and priced with Anthropic's prompt caching as our provider uses
//! it: breakpoints after the system prompt and on the newest message, a
//! cached prefix read back when a later request starts with it (looked up
//! within `cache_lookback` messages before each breakpoint, as the API does
//! with blocks), prefixes shorter than `min_cacheable_tokens` never cached.
//! Then the recorded answer is appended and the replay goes on.

use crate::history::History;
use crate::import::import_tree;
use crate::limits::{Limits, TokenBudget};
use crate::message::{Content, Message, Role};
use crate::meter::{CharMeter, Meter, TokenMeter};
use crate::pipeline::{Compactor, Ctx, Outcome, Step, cache_anchor, micro_compact};
use crate::recovery;
use crate::store::Store;
use crate::summarize::{CONTINUATION_INSTRUCTION, SummarizeError, Summarizer, SummaryInput};
use crate::validate::validate;
use std::collections::{BTreeMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A compaction policy to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// No compaction at all: shows where the window would overflow.
    None,
    /// The seed's character limits (`Limits::teaching`).
    Teaching,
    /// whittle's token policy for the window (`Limits::tokens`).
    Default,
    /// Observation masking: every turn, all but the newest
    /// [`MASK_KEEP_RESULTS`] tool results become saved placeholders; never summarizes.
    Mask,
}

/// Results the `mask` policy keeps whole, as in the observation-masking baseline.
pub const MASK_KEEP_RESULTS: usize = 10;

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 4] = [
        Policy::None,
        Policy::Teaching,
        Policy::Default,
        Policy::Mask,
    ];

    /// The policy's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Teaching => "teaching",
            Policy::Default => "default",
            Policy::Mask => "mask",
        }
    }

    /// Parses a name as printed by [`Policy::name`].
    pub fn parse(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Prices in dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache writes, as a multiple of `input`.
    pub cache_write_multiplier: f64,
    /// Cache reads, as a multiple of `input`.
    pub cache_read_multiplier: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            input: 3.0,
            output: 15.0,
            cache_write_multiplier: 1.25,
            cache_read_multiplier: 0.1,
        }
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// Tokens kept free for the answer (the default policy's reserve).
    pub reserved_output_tokens: u64,
    /// The price table.
    pub prices: Prices,
    /// Characters per token for every count in the replay.
    pub chars_per_token: f64,
    /// Prefixes shorter than this are never cached.
    pub min_cacheable_tokens: u64,
    /// How many messages before a breakpoint a cached prefix is looked up.
    pub cache_lookback: usize,
    /// The `default` policy's limits; `None` derives them from the window.
    pub default_limits: Option<Limits>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            window_tokens: 200_000,
            reserved_output_tokens: 8_192,
            prices: Prices::default(),
            chars_per_token: 4.0,
            min_cacheable_tokens: 1_024,
            cache_lookback: 20,
            default_limits: None,
        }
    }
}

impl ReplayConfig {
    /// A config for a window, reserving an eighth of it (at most 32k) for answers.
    pub fn for_window(window_tokens: u64) -> Self {
        ReplayConfig {
            window_tokens,
            reserved_output_tokens: (window_tokens / 8).min(32_000),
            ..ReplayConfig::default()
        }
    }

    /// The limits the `default` policy uses.
    pub fn default_limits(&self) -> Limits {
        self.default_limits.clone().unwrap_or_else(|| {
            Limits::tokens(TokenBudget::new(
                self.window_tokens,
                self.reserved_output_tokens,
            ))
        })
    }

    fn tokens(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }
}

/// What replaying one conversation under one policy measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReplayReport {
    /// The conversation's id.
    pub conversation: String,
    /// The policy's name.
    pub policy: String,
    /// Model calls (assistant turns).
    pub calls: u64,
    /// The largest request, in tokens.
    pub peak_tokens: u64,
    /// Input tokens summed over all calls (cached or not).
    pub input_tokens: u64,
    /// Of those, read from the cache.
    pub cache_read_tokens: u64,
    /// Of those, written to the cache.
    pub cache_write_tokens: u64,
    /// Of those, neither (uncached input).
    pub uncached_tokens: u64,
    /// Output tokens of the recorded answers and of summaries.
    pub output_tokens: u64,
    /// Summarization calls.
    pub summarize_calls: u64,
    /// Input tokens sent to the summarizer (uncached).
    pub summarize_input_tokens: u64,
    /// Estimated cost in dollars, summaries included.
    pub cost_usd: f64,
    /// How many times each step changed the history.
    pub steps: BTreeMap<String, u64>,
    /// Requests above the window after all compaction (would be rejected).
    pub over_window: u64,
    /// Call numbers (0-based) where the request was above the window.
    pub overflow_calls: Vec<u64>,
    /// Requests that failed the validator.
    pub invalid_requests: u64,
    /// Characters that left the context and are not in the store; must be 0.
    pub unrecoverable_chars: u64,
    /// Pipeline time per call, median, in microseconds.
    pub pipeline_us_median: u64,
    /// Pipeline time per call, max, in microseconds.
    pub pipeline_us_max: u64,
    /// Pipeline time in all, in microseconds.
    pub pipeline_us_total: u64,
}

impl ReplayReport {
    /// Share of input tokens read from the cache.
    pub fn cache_read_share(&self) -> f64 {
        if self.input_tokens == 0 {
            0.0
        } else {
            self.cache_read_tokens as f64 / self.input_tokens as f64
        }
    }

    /// Adds `other` into `self` (for totals); medians become the max of medians.
    pub fn absorb(&mut self, other: &ReplayReport) {
        self.calls += other.calls;
        self.peak_tokens = self.peak_tokens.max(other.peak_tokens);
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.uncached_tokens += other.uncached_tokens;
        self.output_tokens += other.output_tokens;
        self.summarize_calls += other.summarize_calls;
        self.summarize_input_tokens += other.summarize_input_tokens;
        self.cost_usd += other.cost_usd;
        for (k, v) in &other.steps {
            *self.steps.entry(k.clone()).or_default() += v;
        }
        self.over_window += other.over_window;
        self.invalid_requests += other.invalid_requests;
        self.unrecoverable_chars += other.unrecoverable_chars;
        self.pipeline_us_median = self.pipeline_us_median.max(other.pipeline_us_median);
        self.pipeline_us_max = self.pipeline_us_max.max(other.pipeline_us_max);
        self.pipeline_us_total += other.pipeline_us_total;
    }
}

/// A summarizer for replay that returns a fixed-size text, so that numbers
/// are reproducible and no model is needed.
#[derive(Clone, Debug)]
pub struct StandInSummarizer {
    /// Characters of every summary.
    pub summary_chars: usize,
}

impl Default for StandInSummarizer {
    fn default() -> Self {
        StandInSummarizer {
            summary_chars: 2_000,
        }
    }
}

impl Summarizer for StandInSummarizer {
    fn summarize(
        &mut self,
        _: SummaryInput<'_>,
        focus: Option<&str>,
    ) -> Result<String, SummarizeError> {
        let mut s = String::from("Stand-in summary of the conversation so far");
        if let Some(f) = focus {
            s.push_str(" (focus: ");
            s.push_str(f);
            s.push(')');
        }
        s.push_str(". ");
        while s.len() < self.summary_chars {
            s.push_str("Goal, decisions, files, remaining work. ");
        }
        s.truncate(self.summary_chars);
        Ok(s)
    }
}

/// Passes summaries through and prices them: a continuation goes through
/// the prompt cache like any request, a transcript is fresh input.
struct Counting<'a, 'c> {
    inner: &'a mut dyn Summarizer,
    cache: PromptCache<'c>,
    calls: u64,
    read_tokens: u64,
    write_tokens: u64,
    fresh_tokens: u64,
    output_chars: usize,
}

impl Summarizer for Counting<'_, '_> {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
    ) -> Result<String, SummarizeError> {
        self.calls += 1;
        let instruction = CONTINUATION_INSTRUCTION.len() + focus.map_or(0, str::len);
        match input {
            SummaryInput::Continuation(messages) => {
                let (read, write) = self.cache.price(messages, None, instruction, None);
                self.read_tokens += read;
                self.write_tokens += write;
            }
            SummaryInput::Transcript(t) => {
                self.fresh_tokens += self.cache.config.tokens(t.chars().count() + instruction);
            }
        }
        let out = self.inner.summarize(input, focus)?;
        self.output_chars += out.chars().count();
        Ok(out)
    }
}

/// Replays `messages` (one recorded conversation) under `policy`, with the
/// store under `store_dir` (which should be empty).
pub fn replay_conversation(
    id: &str,
    messages: &[Message],
    system: Option<&str>,
    policy: Policy,
    config: &ReplayConfig,
    summarizer: &mut dyn Summarizer,
    store_dir: &Path,
) -> ReplayReport {
    let store = Store::new(store_dir);
    let system_chars = system.map_or(0, |s| s.chars().count());
    let mut compactor = match policy {
        Policy::None | Policy::Mask => None,
        Policy::Teaching => Some(Compactor::new(
            Limits::teaching(),
            store.clone(),
            Box::new(CharMeter),
        )),
        Policy::Default => {
            let limits = config.default_limits();
            let mut meter = TokenMeter::new(config.chars_per_token);
            meter.set_overhead_chars(system_chars);
            Some(Compactor::new(limits, store.clone(), Box::new(meter)))
        }
    };
    let mask_limits = Limits {
        context_limit: 0,
        target: 0,
        keep_recent_results: MASK_KEEP_RESULTS,
        clear_at_least: 0,
        ..Limits::teaching()
    };

    let mut report = ReplayReport {
        conversation: id.to_string(),
        policy: policy.name().to_string(),
        ..ReplayReport::default()
    };
    let mut counting = Counting {
        inner: summarizer,
        cache: PromptCache::new(config, system.unwrap_or(""), system_chars),
        calls: 0,
        read_tokens: 0,
        write_tokens: 0,
        fresh_tokens: 0,
        output_chars: 0,
    };
    let mut history = History::default();
    let mut request = String::new();
    let mut times = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if m.role() == Role::User {
            if is_user_input(m) {
                request = m.text();
            }
            history.push(m.clone());
            i += 1;
            continue;
        }
        // An assistant turn: one model call. An opening assistant message
        // with nothing before it cannot be a request; keep it as history.
        if history.is_empty() {
            history.push(m.clone());
            i += 1;
            continue;
        }
        let started = Instant::now();
        let mut applied: Vec<Step> = Vec::new();
        match (&mut compactor, policy) {
            (Some(c), _) => {
                let outcome = c.prepare(&mut history, &request, &mut counting);
                applied.extend(
                    outcome
                        .reports
                        .iter()
                        .filter(|r| r.applied())
                        .map(|r| r.step),
                );
                if config.tokens(history.chars() + system_chars) > config.window_tokens {
                    // The provider would reject it: recover as the agent does.
                    let r = c.reactive_compact(&mut history, &request, &mut counting);
                    if r.outcome == Outcome::Applied {
                        applied.push(r.step);
                    }
                }
            }
            (None, Policy::Mask) => {
                let cx = Ctx {
                    limits: &mask_limits,
                    store: &store,
                    meter: &CharMeter,
                };
                if let Some(r) = micro_compact(&mut history, &cx)
                    && r.applied()
                {
                    applied.push(r.step);
                }
            }
            (None, _) => {}
        }
        times.push(started.elapsed().as_micros() as u64);
        for step in applied {
            *report.steps.entry(step.as_str().to_string()).or_default() += 1;
        }

        if validate(history.messages()).is_err() {
            report.invalid_requests += 1;
        }
        let tokens = config.tokens(history.chars() + system_chars);
        if tokens > config.window_tokens {
            report.over_window += 1;
            report.overflow_calls.push(report.calls);
        }
        report.peak_tokens = report.peak_tokens.max(tokens);
        let anchor = match &compactor {
            Some(c) => c.cache_anchor(&history),
            None => cache_anchor(
                &history,
                &Ctx {
                    limits: &mask_limits,
                    store: &store,
                    meter: &CharMeter,
                },
            ),
        };
        let (read, write) =
            counting
                .cache
                .price(history.messages(), Some(history.epoch()), 0, anchor);
        history.mark();
        report.input_tokens += tokens;
        report.cache_read_tokens += read;
        report.cache_write_tokens += write;
        report.uncached_tokens += tokens.saturating_sub(read + write);
        report.calls += 1;

        // The recorded answer: this and any directly following assistant messages.
        while i < messages.len() && messages[i].role() == Role::Assistant {
            report.output_tokens += config.tokens(content_chars(&messages[i]));
            history.push(messages[i].clone());
            i += 1;
        }
    }

    report.summarize_calls = counting.calls;
    report.summarize_input_tokens =
        counting.read_tokens + counting.write_tokens + counting.fresh_tokens;
    report.output_tokens += config.tokens(counting.output_chars);
    let p = config.prices;
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    report.cost_usd = per(
        report.cache_read_tokens + counting.read_tokens,
        p.input * p.cache_read_multiplier,
    ) + per(
        report.cache_write_tokens + counting.write_tokens,
        p.input * p.cache_write_multiplier,
    ) + per(report.uncached_tokens + counting.fresh_tokens, p.input)
        + per(report.output_tokens, p.output);
    report.unrecoverable_chars =
        recovery::check(messages, &history, &store).unrecoverable_chars as u64;
    times.sort_unstable();
    report.pipeline_us_median = times.get(times.len() / 2).copied().unwrap_or(0);
    report.pipeline_us_max = times.last().copied().unwrap_or(0);
    report.pipeline_us_total = times.iter().sum();
    report
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

/// Anthropic's prompt cache as our provider uses it.
struct PromptCache<'a> {
    config: &'a ReplayConfig,
    system_hash: u64,
    system_chars: usize,
    /// Prefix hashes written to the cache.
    written: HashSet<u64>,
    /// Per-message hashes of the last request, valid while the history's
    /// epoch is unchanged (only appends since).
    hashes: Vec<u64>,
    epoch: Option<u64>,
}

impl<'a> PromptCache<'a> {
    fn new(config: &'a ReplayConfig, system: &str, system_chars: usize) -> Self {
        PromptCache {
            config,
            system_hash: hash(&system),
            system_chars,
            written: HashSet::new(),
            hashes: Vec::new(),
            epoch: None,
        }
    }

    /// Prices a request made of `messages` plus `extra_chars` of new text
    /// after them; returns (read, written) tokens and records what it writes.
    /// With `epoch` (the history's), message hashes are reused across calls
    /// while the history only grows; without, they are computed afresh.
    fn price(
        &mut self,
        messages: &[Message],
        epoch: Option<u64>,
        extra_chars: usize,
        anchor: Option<usize>,
    ) -> (u64, u64) {
        let fresh: Vec<u64>;
        let hashes: &[u64] = match epoch {
            Some(epoch) => {
                if self.epoch != Some(epoch) || self.hashes.len() > messages.len() {
                    self.hashes.clear();
                }
                for m in &messages[self.hashes.len()..] {
                    self.hashes
                        .push(hash(&serde_json::to_string(m).unwrap_or_default()));
                }
                self.epoch = Some(epoch);
                &self.hashes
            }
            None => {
                fresh = messages
                    .iter()
                    .map(|m| hash(&serde_json::to_string(m).unwrap_or_default()))
                    .collect();
                &fresh
            }
        };

        // Prefix hashes and token positions at every message boundary.
        let mut prefix = Vec::with_capacity(messages.len() + 1);
        let mut tokens_at = Vec::with_capacity(messages.len() + 1);
        let mut h = self.system_hash;
        // Counted as the history's JSON array is (`[`, messages, commas), so
        // the whole request measures exactly what the meter says.
        let mut chars = self.system_chars + 1;
        prefix.push(h);
        tokens_at.push(self.config.tokens(chars));
        for (m, mh) in messages.iter().zip(hashes) {
            h = hash(&(h, *mh));
            chars += m.chars() + 1;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
        }
        let n = messages.len();
        if extra_chars > 0 {
            // The extra text is a message of its own after the history.
            h = hash(&(h, extra_chars));
            chars += extra_chars + 1;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
        }
        let n = if extra_chars > 0 { n + 1 } else { n };
        let total = *tokens_at.last().unwrap_or(&0);
        // Breakpoints: after the system prompt (0), at the anchor, and on the
        // newest message (n). A hit is looked up at each breakpoint and up to
        // `cache_lookback` messages before it; the longest one is read.
        let mut breakpoints = vec![0, n];
        breakpoints.extend(anchor.filter(|a| *a < n));
        let hit = breakpoints
            .iter()
            .flat_map(|b| (b.saturating_sub(self.config.cache_lookback)..=*b).rev())
            .filter(|k| {
                self.written.contains(&prefix[*k])
                    && tokens_at[*k] >= self.config.min_cacheable_tokens
            })
            .max();
        let read = hit.map_or(0, |k| tokens_at[k]);
        for k in breakpoints {
            if tokens_at[k] >= self.config.min_cacheable_tokens {
                self.written.insert(prefix[k]);
            }
        }
        let write = if total >= self.config.min_cacheable_tokens {
            total - read
        } else {
            0
        };
        (read, write)
    }
}

fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// One conversation's reports, one per policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConversationRow {
    /// The conversation's id.
    pub id: String,
    /// The file it came from.
    pub source: PathBuf,
    /// Its format.
    pub format: String,
    /// Messages in the recording.
    pub messages: usize,
    /// One report per policy, in the run's policy order.
    pub reports: Vec<ReplayReport>,
}

/// Everything a `whittle replay` run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplaySummary {
    /// The window replayed against.
    pub window_tokens: u64,
    /// The prices used.
    pub prices: Prices,
    /// Who wrote the summaries (e.g. "stand-in, 2000 chars").
    pub summarizer: String,
    /// The policies, in column order.
    pub policies: Vec<String>,
    /// Per conversation.
    pub conversations: Vec<ConversationRow>,
    /// Totals per policy, in column order.
    pub totals: Vec<ReplayReport>,
    /// Files that could not be imported, one line each.
    pub errors: Vec<String>,
}

/// Imports every trace under `paths` and replays each conversation under
/// each policy. Each replay gets its own scratch store, removed afterwards.
/// `summarizer` makes a fresh summarizer for each replay.
pub fn replay_paths(
    paths: &[PathBuf],
    policies: &[Policy],
    config: &ReplayConfig,
    summarizer: &mut dyn FnMut() -> Box<dyn Summarizer>,
    summarizer_name: &str,
) -> ReplaySummary {
    let mut summary = ReplaySummary {
        window_tokens: config.window_tokens,
        prices: config.prices,
        summarizer: summarizer_name.to_string(),
        policies: policies.iter().map(|p| p.name().to_string()).collect(),
        conversations: Vec::new(),
        totals: policies
            .iter()
            .map(|p| ReplayReport {
                conversation: "total".into(),
                policy: p.name().into(),
                ..ReplayReport::default()
            })
            .collect(),
        errors: Vec::new(),
    };
    for path in paths {
        for file in import_tree(path) {
            let conversations = match file.result {
                Ok(c) => c,
                Err(e) => {
                    summary.errors.push(e.to_string());
                    continue;
                }
            };
            for c in conversations {
                let mut row = ConversationRow {
                    id: c.id.clone(),
                    source: c.source.clone(),
                    format: c.format.name().to_string(),
                    messages: c.messages.len(),
                    reports: Vec::new(),
                };
                for (k, policy) in policies.iter().enumerate() {
                    let scratch = match ScratchDir::new() {
                        Ok(s) => s,
                        Err(e) => {
                            summary
                                .errors
                                .push(format!("cannot make a scratch folder: {e}"));
                            return summary;
                        }
                    };
                    let mut s = summarizer();
                    let report = replay_conversation(
                        &c.id,
                        &c.messages,
                        c.system.as_deref(),
                        *policy,
                        config,
                        s.as_mut(),
                        scratch.path(),
                    );
                    summary.totals[k].absorb(&report);
                    row.reports.push(report);
                }
                summary.conversations.push(row);
            }
        }
    }
    summary
}

/// A folder under the system temp dir, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> std::io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("whittle-replay-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(ScratchDir(dir))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The summary as a table for people: policies in columns, totals first,
/// then one line per conversation with each policy's cost and peak.
pub fn render_table(summary: &ReplaySummary) -> String {
    use crate::pipeline::human;
    let mut out = String::new();
    let p = summary.prices;
    out.push_str(&format!(
        "whittle replay: {} conversations, window {} tokens, prices ${}/${} per Mtok in/out \
         (cache write {}x, read {}x), tokens = chars/4, summaries: {}\n\n",
        summary.conversations.len(),
        group_digits(summary.window_tokens),
        p.input,
        p.output,
        p.cache_write_multiplier,
        p.cache_read_multiplier,
        summary.summarizer
    ));
    let base = summary.totals.first().map_or(0.0, |t| t.cost_usd);
    let none_cost = summary
        .totals
        .iter()
        .find(|t| t.policy == "none")
        .map_or(base, |t| t.cost_usd);
    type Cell = fn(&ReplayReport, f64) -> String;
    let rows: Vec<(&str, Cell)> = vec![
        ("model calls", |t, _| group_digits(t.calls)),
        ("peak context (tokens)", |t, _| group_digits(t.peak_tokens)),
        ("input tokens (all calls)", |t, _| human(t.input_tokens)),
        ("  read from cache", |t, _| {
            format!("{:.1}%", 100.0 * t.cache_read_share())
        }),
        ("  written to cache", |t, _| human(t.cache_write_tokens)),
        ("estimated cost", |t, _| format!("${:.2}", t.cost_usd)),
        ("cost vs none", |t, none| {
            if none > 0.0 {
                format!("{:.2}x", t.cost_usd / none)
            } else {
                "-".into()
            }
        }),
        ("requests over the window", |t, _| {
            group_digits(t.over_window)
        }),
        ("summarization calls", |t, _| {
            group_digits(t.summarize_calls)
        }),
        ("tool_result_budget runs", |t, _| {
            step_count(t, "tool_result_budget")
        }),
        ("snip_compact runs", |t, _| step_count(t, "snip_compact")),
        ("micro_compact runs", |t, _| step_count(t, "micro_compact")),
        ("fit_tool_results runs", |t, _| {
            step_count(t, "fit_tool_results")
        }),
        ("compact_history runs", |t, _| {
            step_count(t, "compact_history")
        }),
        ("reactive_compact runs", |t, _| {
            step_count(t, "reactive_compact")
        }),
        ("unrecoverable bytes", |t, _| {
            group_digits(t.unrecoverable_chars)
        }),
        ("invalid requests", |t, _| group_digits(t.invalid_requests)),
        ("pipeline per call (median)", |t, _| {
            format!("{}us", t.pipeline_us_median)
        }),
        ("pipeline per call (max)", |t, _| {
            format!("{}us", t.pipeline_us_max)
        }),
        ("pipeline in all", |t, _| {
            format!("{:.1}ms", t.pipeline_us_total as f64 / 1000.0)
        }),
    ];
    let width = 28;
    out.push_str(&format!("{:width$}", ""));
    for name in &summary.policies {
        out.push_str(&format!("{name:>14}"));
    }
    out.push('\n');
    for (label, cell) in rows {
        out.push_str(&format!("{label:width$}"));
        for t in &summary.totals {
            out.push_str(&format!("{:>14}", cell(t, none_cost)));
        }
        out.push('\n');
    }
    if !summary.conversations.is_empty() {
        out.push_str("\nper conversation: cost (peak tokens, * = over the window)\n");
        let idw = summary
            .conversations
            .iter()
            .map(|c| c.id.chars().count())
            .max()
            .unwrap_or(10)
            .clamp(10, 48);
        out.push_str(&format!("{:idw$}", "conversation"));
        for name in &summary.policies {
            out.push_str(&format!("{name:>22}"));
        }
        out.push('\n');
        for c in &summary.conversations {
            let id: String = c.id.chars().take(idw).collect();
            out.push_str(&format!("{id:idw$}"));
            for r in &c.reports {
                let star = if r.over_window > 0 { "*" } else { " " };
                out.push_str(&format!(
                    "{:>22}",
                    format!("${:.3} ({}){star}", r.cost_usd, human(r.peak_tokens))
                ));
            }
            out.push('\n');
        }
    }
    for e in &summary.errors {
        out.push_str(&format!("skipped: {e}\n"));
    }
    out
}

fn step_count(t: &ReplayReport, step: &str) -> String {
    group_digits(t.steps.get(step).copied().unwrap_or(0))
}

/// `1234567` -> `1,234,567`.
fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Block;
    use serde_json::json;

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
