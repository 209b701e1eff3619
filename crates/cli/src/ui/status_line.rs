//! The dim line after each REPL turn: how full the context is against the
//! window and the compaction threshold, what the session has cost, and the
//! compaction this turn made, if any. One glance instead of `/context` and
//! `/cost` after every turn.

use whittle_agent::ContextBreakdown;
use whittle_protocol::group_digits;

/// `context 41,200 / 200,000 tokens (21%), compacts at 162,000 (81%) · $0.0412 · compacted: ...`.
pub fn status_line(
    b: &ContextBreakdown,
    unit: &str,
    cost_usd: f64,
    compaction: Option<&str>,
) -> String {
    let window = b.window.max(1);
    let pct = |n: u64| n as f64 * 100.0 / window as f64;
    let used = b.used();
    let mut line = format!(
        "context {} / {} {unit} ({:.0}%), compacts at {} ({:.0}%) · ${cost_usd:.4}",
        group_digits(used),
        group_digits(b.window),
        pct(used),
        group_digits(b.limit),
        pct(b.limit),
    );
    if let Some(c) = compaction {
        line.push_str(" · compacted: ");
        line.push_str(c);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_says_use_threshold_cost_and_compaction() {
        let b = ContextBreakdown {
            system: 1_000,
            instructions: 0,
            tools: 4_000,
            mcp_tools: 0,
            messages: 5_000,
            tool_results: 10_000,
            limit: 170_000,
            window: 200_000,
        };
        let line = status_line(&b, "tokens", 0.04123, None);
        assert_eq!(
            line,
            "context 20,000 / 200,000 tokens (10%), compacts at 170,000 (85%) · $0.0412"
        );
        let line = status_line(
            &b,
            "tokens",
            0.0,
            Some("60k -> 20k tokens (micro_compact, 3 changed)"),
        );
        assert!(
            line.ends_with("· compacted: 60k -> 20k tokens (micro_compact, 3 changed)"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
