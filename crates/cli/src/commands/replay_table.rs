//! `whittle replay`'s table for people: policies in columns, totals first,
//! then one line per conversation. The numbers are `whittle-replay`'s; how
//! they look on a terminal is the CLI's business.

use whittle_protocol::{abbreviate_count, group_digits};
use whittle_replay::{ErrorPct, RecordedTotals, ReplayReport, ReplaySummary, Survival, Tally};

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
        // Answers the squeezed room would have cut, asked again.
        ("answers cut and asked again", |t, _| {
            group_digits(t.cut_answers)
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
        // The slowest conversation's median call: a conversation of one
        // call that compacts a whole session shows that call here.
        ("median call, slowest conv.", |t, _| {
            format!("{}us", t.pipeline_us_median)
        }),
        ("median call, all calls", |t, _| {
            format!("{}us", t.pipeline_us_median_all_calls)
        }),
        ("pipeline per call (max)", |t, _| {
            format!("{}us", t.pipeline_us_max)
        }),
        // The same spread late in the longest session as early in it:
        // the cost of a call does not grow with the session.
        ("p99 per tenth, longest", |t, _| {
            match t.pipeline_us_p99_by_tenth.range() {
                Some((low, high)) => format!("{low}-{high}us"),
                None => "-".into(),
            }
        }),
        ("pipeline in all", |t, _| {
            format!("{:.1}ms", t.pipeline_us_total as f64 / 1000.0)
        }),
        // Done while the model answers, off the calls' path: shown so that
        // no work of the pipeline's is left out of the table.
        ("work ahead (in all)", |t, _| {
            format!("{:.1}ms", t.ahead_us_total as f64 / 1000.0)
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
    render_survival(summary, &mut out);
    if let (Some(recorded), Some(none), Some(error)) = (
        &summary.recorded,
        &summary.none_on_recorded,
        &summary.none_vs_recorded,
    ) {
        render_bill(summary, recorded, none, error, &mut out);
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

/// Survival per policy that compacted, then the recording agent's own
/// compactions as a row of their own, measured on the same facts.
fn render_survival(summary: &ReplaySummary, out: &mut String) {
    let mut rows: Vec<(&str, &Survival)> = summary
        .totals
        .iter()
        .filter(|t| t.survival.compactions > 0 || t.survival.paths.probed > 0)
        .map(|t| (t.policy.as_str(), &t.survival))
        .collect();
    if let Some(s) = &summary.recorded_survival {
        rows.push(("recorded Claude Code summary", s));
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("\nsurvival: facts compaction removed, found in the next request (% of probed)\n");
    let width = 30;
    out.push_str(&format!(
        "{:width$}{:>16}{:>16}{:>16}{:>13}{:>16}\n",
        "", "paths", "commands", "person", "compactions", "ledger med/max"
    ));
    for (name, s) in rows {
        let ledger = match (s.ledger_tokens_median(), s.ledger_tokens_max()) {
            (Some(median), Some(max)) => {
                format!("{}/{}", group_digits(median), group_digits(max))
            }
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{name:width$}{:>16}{:>16}{:>16}{:>13}{ledger:>16}\n",
            tally(&s.paths),
            tally(&s.commands),
            tally(&s.person),
            group_digits(s.compactions),
        ));
    }
}

/// `95.0% (1,234)`: survived in percent, of how many probed.
fn tally(t: &Tally) -> String {
    match t.percent() {
        Some(p) => format!("{p:.1}% ({})", group_digits(t.probed)),
        None => "-".into(),
    }
}

/// What the recordings say was billed, `none` over the same conversations,
/// and how far apart they are.
fn render_bill(
    summary: &ReplaySummary,
    recorded: &RecordedTotals,
    none: &ReplayReport,
    error: &ErrorPct,
    out: &mut String,
) {
    let billed = summary
        .conversations
        .iter()
        .filter(|c| c.recorded.is_some())
        .count();
    out.push_str(&format!(
        "\nrecorded usage vs none ({billed} conversations with a bill)\n"
    ));
    let width = 12;
    out.push_str(&format!(
        "{:width$}{:>12}{:>12}{:>12}{:>12}{:>12}\n",
        "", "calls", "uncached", "cache read", "cache write", "cost"
    ));
    out.push_str(&format!(
        "{:width$}{:>12}{:>12}{:>12}{:>12}{:>12}\n",
        "recorded",
        group_digits(recorded.calls),
        abbreviate_count(recorded.uncached_tokens),
        abbreviate_count(recorded.cache_read_tokens),
        abbreviate_count(recorded.cache_write_tokens),
        format!("${:.2}", recorded.cost_usd),
    ));
    // Billed, but not on the path replayed: on its own line, not in the error.
    let abandoned = recorded.abandoned;
    out.push_str(&format!(
        "  abandoned branches: {} calls, ${:.2} (billed, not replayed: the error is on the other {})\n",
        group_digits(abandoned.calls),
        abandoned.cost_usd,
        group_digits(recorded.calls - abandoned.calls),
    ));
    out.push_str(&format!(
        "{:width$}{:>12}{:>12}{:>12}{:>12}{:>12}\n",
        "none",
        group_digits(none.calls),
        abbreviate_count(none.uncached_tokens),
        abbreviate_count(none.cache_read_tokens),
        abbreviate_count(none.cache_write_tokens),
        format!("${:.2}", none.cost_usd),
    ));
    let pct = |e: Option<f64>| e.map_or("-".into(), |e| format!("{e:+.1}%"));
    out.push_str(&format!(
        "{:width$}{:>12}{:>12}{:>12}{:>12}{:>12}\n",
        "error",
        pct(error.calls),
        pct(error.uncached),
        pct(error.cache_read),
        pct(error.cache_write),
        pct(error.cost),
    ));
}

fn step_count(t: &ReplayReport, step: &str) -> String {
    group_digits(t.steps.get(step).copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use whittle_llm::Prices;
    use whittle_replay::{BilledCalls, ConversationRow};

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
            pipeline_us_median_all_calls: 7,
            pipeline_us_max: 340,
            pipeline_us_total: 5_600,
            ahead_us_total: 1_250,
            pipeline_us_p99_by_tenth: whittle_replay::TenthsP99::of(&[9, 40, 12, 31]),
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
            summarizer: "stand-in, up to 2000 chars".into(),
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
                recorded_survival: None,
            }],
            totals: vec![none, default],
            errors: vec!["bad.json: the file is empty".into()],
            recorded: None,
            none_on_recorded: None,
            none_vs_recorded: None,
            recorded_survival: None,
        };
        let table = render_table(&summary);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "whittle replay: 1 conversations, window 32,000 tokens, prices $3/$15 per Mtok in/out \
             (cache write 1.25x, read 0.1x), tokens = chars/4, summaries: stand-in, up to 2000 chars"
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
        assert_eq!(row("median call, slowest conv."), ["12us", "12us"]);
        assert_eq!(row("median call, all calls"), ["7us", "7us"]);
        assert_eq!(row("pipeline per call (max)"), ["340us", "340us"]);
        assert_eq!(row("pipeline in all"), ["5.6ms", "5.6ms"]);
        assert_eq!(row("work ahead (in all)"), ["1.2ms", "1.2ms"]);
        assert_eq!(row("p99 per tenth, longest"), ["9-40us", "9-40us"]);
        let c1 = lines.iter().find(|l| l.starts_with("c1 ")).unwrap();
        assert!(c1.contains("$2.000 (40k)*"), "{c1}");
        assert!(c1.contains("$1.500 (30k) "), "{c1}");
        assert_eq!(lines.last(), Some(&"skipped: bad.json: the file is empty"));
        // Nothing compacted and nothing billed: neither section is there.
        assert!(!table.contains("survival:") && !table.contains("recorded usage"));
    }

    #[test]
    fn survival_per_policy_then_the_recorded_summary_and_the_bill_against_none() {
        let none = report("none", 2.0, 40_000, 3);
        let mut default = report("default", 1.5, 30_000, 0);
        default.survival = Survival {
            paths: Tally {
                survived: 19,
                probed: 20,
            },
            commands: Tally {
                survived: 3,
                probed: 4,
            },
            person: Tally {
                survived: 2,
                probed: 2,
            },
            compactions: 3,
            ledger_tokens: vec![1_200, 800, 3_500],
        };
        let recorded_survival = Survival {
            paths: Tally {
                survived: 1,
                probed: 3,
            },
            compactions: 1,
            ..Survival::default()
        };
        // 34 of the billed calls were on a branch the person abandoned.
        let recorded = RecordedTotals {
            calls: 1_268,
            uncached_tokens: 1_000,
            cache_read_tokens: 2_100_000,
            cache_write_tokens: 60_000,
            cache_write_1h_tokens: 0,
            output_tokens: 10_000,
            cost_usd: 3.0,
            abandoned: BilledCalls {
                calls: 34,
                cache_read_tokens: 100_000,
                cache_write_tokens: 10_000,
                cost_usd: 0.5,
                ..BilledCalls::default()
            },
        };
        let summary = ReplaySummary {
            window_tokens: 32_000,
            prices: Prices::default(),
            summarizer: "stand-in".into(),
            policies: vec!["none".into(), "default".into()],
            conversations: vec![ConversationRow {
                id: "c1".into(),
                source: "c1.jsonl".into(),
                format: "claude-code".into(),
                messages: 10,
                reports: vec![none.clone(), default.clone()],
                measured: whittle_replay::Measured::Estimated,
                chars_per_token: 3.5,
                overhead_tokens: 20_000,
                recorded: Some(recorded),
                none_vs_recorded: Some(ErrorPct::of(&none, &recorded)),
                recorded_survival: Some(recorded_survival.clone()),
            }],
            totals: vec![none.clone(), default],
            errors: Vec::new(),
            recorded: Some(recorded),
            none_on_recorded: Some(none.clone()),
            none_vs_recorded: Some(ErrorPct::of(&none, &recorded)),
            recorded_survival: Some(recorded_survival),
        };
        let table = render_table(&summary);
        let lines: Vec<&str> = table.lines().collect();
        let at = |prefix: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix:?} line in\n{table}"))
        };
        let survival = at("survival:");
        let header: Vec<&str> = lines[survival + 1].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "paths",
                "commands",
                "person",
                "compactions",
                "ledger",
                "med/max"
            ]
        );
        // `none` compacts nothing and has no row; the recording's own row comes last.
        assert_eq!(
            lines[survival + 2].split_whitespace().collect::<Vec<_>>(),
            [
                "default",
                "95.0%",
                "(20)",
                "75.0%",
                "(4)",
                "100.0%",
                "(2)",
                "3",
                "1,200/3,500"
            ]
        );
        assert_eq!(
            lines[survival + 3].split_whitespace().collect::<Vec<_>>(),
            [
                "recorded", "Claude", "Code", "summary", "33.3%", "(3)", "-", "-", "1", "-"
            ]
        );
        let bill = at("recorded usage vs none (1 conversations with a bill)");
        let row = |k: usize| lines[bill + k].split_whitespace().collect::<Vec<_>>();
        assert_eq!(
            row(1),
            [
                "calls", "uncached", "cache", "read", "cache", "write", "cost"
            ]
        );
        assert_eq!(
            row(2),
            ["recorded", "1,268", "1000", "2.1M", "60k", "$3.00"]
        );
        // The abandoned branches on their own line; the error is on the rest.
        assert_eq!(
            lines[bill + 3].trim(),
            "abandoned branches: 34 calls, $0.50 (billed, not replayed: the error is on the other 1,234)"
        );
        assert_eq!(row(4), ["none", "1,234", "0", "2.0M", "45k", "$2.00"]);
        assert_eq!(
            row(5),
            ["error", "+0.0%", "-100.0%", "+0.0%", "-10.0%", "-20.0%"]
        );
    }
}
