//! `whittle replay`'s table for people: policies in columns, totals first,
//! then one line per conversation. The numbers are `whittle-replay`'s; how
//! they look on a terminal is the CLI's business.

use whittle_context::{abbreviate_count, group_digits};
use whittle_replay::{ReplayReport, ReplaySummary};

/// The summary as a table for people: policies in columns, totals first,
/// then one line per conversation with each policy's cost and peak.
pub fn render_table(summary: &ReplaySummary) -> String {
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
        ("input tokens (all calls)", |t, _| {
            abbreviate_count(t.input_tokens)
        }),
        ("  read from cache", |t, _| {
            format!("{:.1}%", 100.0 * t.cache_read_share())
        }),
        ("  written to cache", |t, _| {
            abbreviate_count(t.cache_write_tokens)
        }),
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
                    format!(
                        "${:.3} ({}){star}",
                        r.cost_usd,
                        abbreviate_count(r.peak_tokens)
                    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use whittle_llm::Prices;
    use whittle_replay::ConversationRow;

    fn report(policy: &str, cost_usd: f64, peak_tokens: u64, over_window: u64) -> ReplayReport {
        ReplayReport {
            conversation: "c1".into(),
            policy: policy.into(),
            calls: 1_234,
            peak_tokens,
            input_tokens: 2_500_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 45_000,
            cost_usd,
            over_window,
            steps: BTreeMap::from([("micro_compact".to_string(), 7)]),
            pipeline_us_median: 12,
            pipeline_us_max: 340,
            pipeline_us_total: 5_600,
            ..ReplayReport::default()
        }
    }

    #[test]
    fn the_table_has_totals_per_policy_then_one_line_per_conversation() {
        let none = report("none", 2.0, 40_000, 3);
        let default = report("default", 1.5, 30_000, 0);
        let summary = ReplaySummary {
            window_tokens: 32_000,
            prices: Prices::default(),
            summarizer: "stand-in, 2000 chars".into(),
            policies: vec!["none".into(), "default".into()],
            conversations: vec![ConversationRow {
                id: "c1".into(),
                source: "c1.jsonl".into(),
                format: "claude-code".into(),
                messages: 10,
                reports: vec![none.clone(), default.clone()],
                measured: whittle_replay::Measured::Assumed,
                chars_per_token: 4.0,
                overhead_tokens: 0,
                recorded: None,
                none_vs_recorded: None,
            }],
            totals: vec![none, default],
            errors: vec!["bad.json: the file is empty".into()],
            recorded: None,
            none_on_recorded: None,
            none_vs_recorded: None,
        };
        let table = render_table(&summary);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "whittle replay: 1 conversations, window 32,000 tokens, prices $3/$15 per Mtok in/out \
             (cache write 1.25x, read 0.1x), tokens = chars/4, summaries: stand-in, 2000 chars"
        );
        let row = |label: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label:?} row in\n{table}"))
                .split_whitespace()
                .rev()
                .take(2)
                .collect::<Vec<_>>()
        };
        assert_eq!(row("model calls"), ["1,234", "1,234"]);
        assert_eq!(row("peak context"), ["30,000", "40,000"]);
        assert_eq!(row("input tokens"), ["2.5M", "2.5M"]);
        assert_eq!(row("  read from cache"), ["80.0%", "80.0%"]);
        assert_eq!(row("  written to cache"), ["45k", "45k"]);
        assert_eq!(row("estimated cost"), ["$1.50", "$2.00"]);
        assert_eq!(row("cost vs none"), ["0.75x", "1.00x"]);
        assert_eq!(row("requests over the window"), ["0", "3"]);
        assert_eq!(row("micro_compact runs"), ["7", "7"]);
        assert_eq!(row("compact_history runs"), ["0", "0"]);
        assert_eq!(row("pipeline per call (max)"), ["340us", "340us"]);
        assert_eq!(row("pipeline in all"), ["5.6ms", "5.6ms"]);
        let c1 = lines.iter().find(|l| l.starts_with("c1 ")).unwrap();
        assert!(c1.contains("$2.000 (40k)*"), "{c1}");
        assert!(c1.contains("$1.500 (30k) "), "{c1}");
        assert_eq!(lines.last(), Some(&"skipped: bad.json: the file is empty"));
    }
}
