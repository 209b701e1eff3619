//! A replay's page data: the policies side by side, cost bars, and per
//! conversation one chart per policy, worst conversations first.

use crate::chart::{ContextCurve, CostBar, Marker, context_chart, cost_bars};
use crate::cost_parts::{LegendKey, cost_legend, cost_parts};
use crate::error::ReportError;
use serde::Serialize;
use whittle_protocol::group_digits;
use whittle_replay::{ConversationRow, Policy, ReplayReport, ReplaySummary, Survival, Tally};

/// One policy's totals, a column of the side-by-side table.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyColumn {
    /// The policy's name.
    pub name: String,
    /// Estimated cost in dollars, summaries included.
    pub cost_usd: f64,
    /// Cost relative to the first policy's (`None` when that one is 0).
    pub vs_first: Option<f64>,
    /// Share of input tokens read from the cache, in percent.
    pub cache_read_pct: f64,
    /// The largest request of any conversation, in tokens.
    pub peak_tokens: u64,
    /// Requests above the window after compaction.
    pub over_window: u64,
    /// Summarization calls.
    pub summaries: u64,
    /// Model calls.
    pub calls: u64,
    /// Steps that changed a history, all kinds.
    pub steps: u64,
    /// Characters lost (not in the store); must be 0.
    pub unrecoverable_chars: u64,
}

impl PolicyColumn {
    fn of(total: &ReplayReport, first_cost: f64) -> PolicyColumn {
        PolicyColumn {
            name: total.policy.clone(),
            cost_usd: total.cost_usd,
            vs_first: (first_cost > 0.0).then(|| total.cost_usd / first_cost),
            cache_read_pct: total.cache_read_share() * 100.0,
            peak_tokens: total.peak_tokens,
            over_window: total.over_window,
            summaries: total.summarize_calls,
            calls: total.calls,
            steps: total.steps.values().sum(),
            unrecoverable_chars: total.unrecoverable_chars,
        }
    }
}

/// One conversation under one policy: its figures and its chart.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyChart {
    /// The policy's name.
    pub policy: String,
    /// Estimated cost in dollars.
    pub cost_usd: f64,
    /// The largest request, in tokens.
    pub peak_tokens: u64,
    /// Requests above the window.
    pub over_window: u64,
    /// Summarization calls.
    pub summaries: u64,
    /// Steps that changed the history (one marker each).
    pub steps: u64,
    /// Steps by name, `micro_compact 3, compact_history 1`.
    pub steps_line: String,
    /// The chart, an SVG element.
    pub svg: String,
}

/// One conversation of the replay.
#[derive(Clone, Debug, Serialize)]
pub struct ConversationView {
    /// Anchor of its section in the page.
    pub anchor: String,
    /// The conversation's id.
    pub id: String,
    /// The file it came from.
    pub source: String,
    /// Its format.
    pub format: String,
    /// Messages in the recording.
    pub messages: usize,
    /// Model calls.
    pub calls: u64,
    /// Requests over the window under the policies that compact: what
    /// puts it first.
    pub over_window_compacting: u64,
    /// The highest cost under any policy.
    pub max_cost_usd: f64,
    /// One per policy, in the run's order.
    pub policies: Vec<PolicyChart>,
}

/// Everything the page shows of a replay.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayView {
    /// The window replayed against.
    pub window_tokens: u64,
    /// Who wrote the summaries.
    pub summarizer: String,
    /// The prices, as one line.
    pub prices: String,
    /// The policies' totals, in the run's order.
    pub policies: Vec<PolicyColumn>,
    /// Per policy, what its compactions kept of the facts they removed
    /// (the person's messages, paths, commands) and its ledger's size, in
    /// parts that the page may put on lines of their own; `None` when no
    /// policy removed anything.
    pub survival: Option<Vec<Vec<String>>>,
    /// The same for the Claude Code summaries recorded in the traces.
    pub recorded_survival: Option<String>,
    /// Cost per policy in parts, an SVG element.
    pub cost_svg: String,
    /// The colours of the cost parts.
    pub cost_legend: Vec<LegendKey>,
    /// Conversations, worst first.
    pub conversations: Vec<ConversationView>,
    /// Files that could not be imported.
    pub errors: Vec<String>,
}

impl ReplayView {
    /// The page data of `summary`; charts drawn here.
    pub fn of(summary: &ReplaySummary) -> Result<ReplayView, ReportError> {
        let first_cost = summary.totals.first().map_or(0.0, |t| t.cost_usd);
        let policies: Vec<PolicyColumn> = summary
            .totals
            .iter()
            .map(|t| PolicyColumn::of(t, first_cost))
            .collect();
        let cost_svg = cost_bars(
            &summary
                .totals
                .iter()
                .map(|t| CostBar {
                    name: t.policy.clone(),
                    parts: cost_parts(t, &summary.prices),
                    total: t.cost_usd,
                })
                .collect::<Vec<_>>(),
        )?;
        let mut conversations = summary
            .conversations
            .iter()
            .enumerate()
            .map(|(k, row)| conversation_view(k, row, summary.window_tokens))
            .collect::<Result<Vec<_>, _>>()?;
        conversations.sort_by(|a, b| {
            b.over_window_compacting
                .cmp(&a.over_window_compacting)
                .then(b.max_cost_usd.total_cmp(&a.max_cost_usd))
        });
        let p = &summary.prices;
        Ok(ReplayView {
            window_tokens: summary.window_tokens,
            summarizer: summary.summarizer.clone(),
            prices: format!(
                "${}/M input, ${}/M output, cache writes {}x (1h: {}x) and reads {}x input",
                p.input,
                p.output,
                p.cache_write_multiplier,
                p.cache_write_1h_multiplier,
                p.cache_read_multiplier
            ),
            survival: summary
                .totals
                .iter()
                .any(|t| t.survival.compactions > 0)
                .then(|| {
                    summary
                        .totals
                        .iter()
                        .map(|t| survival_cell(&t.survival))
                        .collect()
                }),
            recorded_survival: summary
                .recorded_survival
                .as_ref()
                .map(|s| survival_cell(s).join(" · ")),
            policies,
            cost_svg,
            cost_legend: cost_legend(),
            conversations,
            errors: summary.errors.clone(),
        })
    }
}

/// `person 100%`, `paths 88%`, `commands 56%`, `ledger ~1,527 tokens`, or
/// a dash when nothing was removed.
fn survival_cell(s: &Survival) -> Vec<String> {
    if s.compactions == 0 {
        return vec!["-".to_owned()];
    }
    let pct = |t: Tally| {
        t.percent()
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%"))
    };
    let mut cell = vec![
        format!("person {}", pct(s.person)),
        format!("paths {}", pct(s.paths)),
        format!("commands {}", pct(s.commands)),
    ];
    if let Some(median) = s.ledger_tokens_median().filter(|m| *m > 0) {
        cell.push(format!("ledger ~{} tokens", group_digits(median)));
    }
    cell
}

fn conversation_view(
    k: usize,
    row: &ConversationRow,
    window: u64,
) -> Result<ConversationView, ReportError> {
    // One y scale for the conversation's charts, so they compare at a glance.
    let y_max = row.reports.iter().map(|r| r.peak_tokens).max().unwrap_or(0);
    let mut policies = Vec::with_capacity(row.reports.len());
    for r in &row.reports {
        let markers: Vec<Marker> = r
            .applied_steps
            .iter()
            .map(|s| Marker {
                call: s.call,
                step: s.step.clone(),
                label: format!("call {}: {}", s.call, s.line),
            })
            .collect();
        let name = format!("{} / {}", row.id, r.policy);
        let svg = context_chart(&ContextCurve {
            name: &name,
            tokens: &r.tokens_by_call,
            window: Some(window),
            limit: r.compaction_limit_tokens,
            markers: &markers,
            y_max,
        })?;
        policies.push(PolicyChart {
            policy: r.policy.clone(),
            cost_usd: r.cost_usd,
            peak_tokens: r.peak_tokens,
            over_window: r.over_window,
            summaries: r.summarize_calls,
            steps: r.steps.values().sum(),
            steps_line: r
                .steps
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            svg,
        });
    }
    Ok(ConversationView {
        anchor: format!("c{k}"),
        id: row.id.clone(),
        source: row.source.display().to_string(),
        format: row.format.clone(),
        messages: row.messages,
        calls: row.reports.first().map_or(0, |r| r.calls),
        over_window_compacting: row
            .reports
            .iter()
            .filter(|r| r.policy != Policy::None.name())
            .map(|r| r.over_window)
            .sum(),
        max_cost_usd: row.reports.iter().map(|r| r.cost_usd).fold(0.0, f64::max),
        policies,
    })
}
