//! The REPL's slash commands: parsing them and drawing what they show.

use crate::ui::render::clip;
use crate::ui::style::Style;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};
use whittle_agent::{ContextBreakdown, SessionInfo, Uncompacted, UsageTotals};
use whittle_context::session::SessionRecord;
use whittle_llm::Prices;
use whittle_local::EngineStats;
use whittle_protocol::group_digits;

/// A line that starts with `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlashCommand {
    /// `/compact [focus]`.
    Compact(Option<String>),
    /// `/uncompact`.
    Uncompact,
    /// `/context`.
    Context,
    /// `/cost`.
    Cost,
    /// `/report`.
    Report,
    /// `/rewind`.
    Rewind,
    /// `/diff`.
    Diff,
    /// `/clear`.
    Clear,
    /// `/sessions`.
    Sessions,
    /// `/sandbox`.
    Sandbox,
    /// `/help`.
    Help,
    /// `/quit` or `/exit`.
    Quit,
    /// Anything else.
    Unknown(String),
}

impl SlashCommand {
    /// Parses `line` if it is a slash command.
    pub fn parse(line: &str) -> Option<SlashCommand> {
        let rest = line.trim().strip_prefix('/')?;
        let (name, arg) = match rest.split_once(char::is_whitespace) {
            Some((n, a)) => (n, Some(a.trim()).filter(|a| !a.is_empty())),
            None => (rest, None),
        };
        Some(match name {
            "compact" => SlashCommand::Compact(arg.map(str::to_string)),
            "uncompact" => SlashCommand::Uncompact,
            "context" => SlashCommand::Context,
            "cost" => SlashCommand::Cost,
            "report" => SlashCommand::Report,
            "rewind" => SlashCommand::Rewind,
            "diff" => SlashCommand::Diff,
            "clear" => SlashCommand::Clear,
            "sessions" => SlashCommand::Sessions,
            "sandbox" => SlashCommand::Sandbox,
            "help" | "?" => SlashCommand::Help,
            "quit" | "exit" | "q" => SlashCommand::Quit,
            other => SlashCommand::Unknown(other.to_string()),
        })
    }
}

/// `/help`.
pub const HELP: &str = "\
Commands:
  /compact [focus]  summarize the conversation now (the focus says what to keep in detail)
  /uncompact        undo the last summary or snip (when the conversation then fits)
  /context          what fills the context window, by kind
  /cost             tokens used in this session and the estimated cost
  /report           write this session's report page (charts, compactions) and print its path
  /rewind           put the files and/or the conversation back as they were at one of your
                    messages or after a tool call that changed files (pick a number)
  /diff             what this session changed in the files (since its first checkpoint)
  /clear            start over with an empty conversation (the session log keeps it all)
  /sessions         sessions in this workspace (continue one with `whittle --resume ID`)
  /sandbox          what commands may write and read, the network, and a self-test
  /help             this list
  /quit             leave (Ctrl-D too)
Keys: Ctrl-C stops the running turn (or clears the line), Ctrl-D quits.
End a line with \\ to continue on the next one; pasted text may span lines.";

/// What `/uncompact` did, in one line.
pub fn uncompact_line(result: &Uncompacted) -> String {
    match result {
        Uncompacted::Restored {
            messages,
            size,
            unit,
        } => format!(
            "restored the conversation as it was before the last compaction: {messages} messages, {} {}",
            group_digits(*size),
            unit.as_str()
        ),
        Uncompacted::TooBig { size, limit, unit } => format!(
            "not restored: before the last compaction the conversation was {} {u}, above the compaction limit of {} {u}, so it would be compacted again at once",
            group_digits(*size),
            group_digits(*limit),
            u = unit.as_str()
        ),
        _ => "nothing to undo: no summary or snip since the session started".to_string(),
    }
}

/// `/context`: a bar and a table of what fills the window.
pub fn render_context(b: &ContextBreakdown, unit: &str, style: Style) -> String {
    const WIDTH: u64 = 50;
    let used = b.used();
    let window = b.window.max(used).max(1);
    let free = window.saturating_sub(used);
    let rows: [(&str, u64, &str, char); 7] = [
        (
            "system prompt",
            b.system.saturating_sub(b.instructions),
            "35",
            '█',
        ),
        ("project instructions", b.instructions, "95", '█'),
        (
            "tool definitions",
            b.tools.saturating_sub(b.mcp_tools),
            "34",
            '█',
        ),
        ("MCP tool schemas", b.mcp_tools, "94", '█'),
        ("messages", b.messages, "32", '█'),
        ("tool results", b.tool_results, "33", '█'),
        ("free", free, "2", '░'),
    ];
    let mut bar = String::new();
    let mut cells = 0;
    for (i, (_, amount, color, ch)) in rows.iter().enumerate() {
        let n = if i == rows.len() - 1 {
            WIDTH.saturating_sub(cells)
        } else {
            // Anything present gets at least one cell.
            let n = amount.saturating_mul(WIDTH).div_ceil(window);
            n.min(WIDTH.saturating_sub(cells))
        };
        cells += n;
        bar.push_str(&style.code(color, &ch.to_string().repeat(n as usize)));
    }
    let pct = |n: u64| n as f64 * 100.0 / window as f64;
    let mut out = format!(
        "Context: {} of {} {unit} used ({:.1}%)\n[{bar}]\n",
        group_digits(used),
        group_digits(window),
        pct(used)
    );
    for (name, amount, color, ch) in rows {
        out.push_str(&format!(
            "  {} {:<20} {:>12} {unit}  {:>5.1}%\n",
            style.code(color, &ch.to_string()),
            name,
            group_digits(amount),
            pct(amount)
        ));
    }
    out.push_str(&format!(
        "  compaction starts above {} {unit}",
        group_digits(b.limit)
    ));
    out
}

/// `/cost`: usage totals and what they cost at `prices`.
pub fn render_cost(u: &UsageTotals, prices: &Prices) -> String {
    format!(
        "model calls        {}\n\
         input tokens       {} uncached\n\
         cache reads        {}\n\
         cache writes       {}\n\
         output tokens      {}\n\
         estimated cost     ${:.4} (at ${}/M input, ${}/M output, cache writes {}x and reads {}x input)",
        group_digits(u.calls),
        group_digits(u.input),
        group_digits(u.cache_read),
        group_digits(u.cache_write),
        group_digits(u.output),
        u.cost_usd(prices),
        prices.input,
        prices.output,
        prices.cache_write_multiplier,
        prices.cache_read_multiplier,
    )
}

/// The embedded model's own figures for `/cost`: how fast it ran and how
/// often a call reused the cached prompt prefix (only the new part of a
/// prompt is then processed).
pub fn render_local_stats(stats: &EngineStats) -> String {
    let rate = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.1} tokens/s"));
    format!(
        "embedded model     {} calls, {} reused the cached prompt prefix ({} of {} prompt tokens)
                            prompt {}, generation {}",
        group_digits(stats.calls as u64),
        group_digits(stats.prefix_hits as u64),
        group_digits(stats.usage.cached_prompt_tokens as u64),
        group_digits(stats.usage.prompt_tokens as u64),
        rate(stats.timings.prompt_tokens_per_second(&stats.usage)),
        rate(stats.timings.generation_tokens_per_second(&stats.usage)),
    )
}

/// `/sessions`: one line per session, newest first; `current` is marked.
pub fn render_sessions(sessions: &[SessionInfo], current: Option<&str>) -> String {
    if sessions.is_empty() {
        return "no sessions in this workspace yet".to_string();
    }
    let mut out = String::new();
    for s in sessions {
        let mark = if Some(s.id.as_str()) == current {
            "*"
        } else {
            " "
        };
        let first = first_input(&s.path).unwrap_or_else(|| "(no input)".to_string());
        out.push_str(&format!(
            "{mark} {}  {}  {}\n",
            s.id,
            utc_minutes(s.modified),
            clip(&whittle_protocol::collapse_whitespace(&first), 70)
        ));
    }
    out.push_str("continue one with: whittle --resume ID");
    out
}

/// The first thing typed in a session, read from the head of its log.
fn first_input(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    BufReader::new(file)
        .lines()
        .take(10_000)
        .map_while(Result::ok)
        .filter(|l| l.contains("\"input\""))
        .find_map(|l| match serde_json::from_str(&l) {
            Ok(SessionRecord::Input { text }) => Some(text),
            _ => None,
        })
}

/// `2026-05-01 14:03 UTC`.
pub fn utc_minutes(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let rem = secs % 86_400;
    format!(
        "{} {:02}:{:02} UTC",
        utc_date(t),
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// `2026-05-01`: the UTC date, for the environment block.
pub fn utc_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slash_commands_parse() {
        assert_eq!(
            SlashCommand::parse("/compact  keep the parser notes "),
            Some(SlashCommand::Compact(Some("keep the parser notes".into())))
        );
        assert_eq!(
            SlashCommand::parse("/compact"),
            Some(SlashCommand::Compact(None))
        );
        assert_eq!(SlashCommand::parse("/exit"), Some(SlashCommand::Quit));
        assert_eq!(SlashCommand::parse("/sandbox"), Some(SlashCommand::Sandbox));
        assert_eq!(SlashCommand::parse("/report"), Some(SlashCommand::Report));
        assert_eq!(
            SlashCommand::parse("/frob"),
            Some(SlashCommand::Unknown("frob".into()))
        );
        assert_eq!(SlashCommand::parse("fix /etc"), None);
    }

    #[test]
    fn the_context_table_adds_up() {
        let b = ContextBreakdown {
            system: 1_000,
            tools: 4_000,
            messages: 5_000,
            tool_results: 10_000,
            limit: 42_500,
            window: 50_000,
            ..ContextBreakdown::default()
        };
        let text = render_context(&b, "chars", Style::plain());
        assert!(
            text.starts_with("Context: 20,000 of 50,000 chars used (40.0%)"),
            "{text}"
        );
        let bar = text.lines().nth(1).unwrap();
        assert_eq!(bar.chars().count(), 52, "{bar}");
        assert_eq!(bar.matches('░').count(), 30);
        assert!(text.contains("tool results"));
        assert!(text.contains("free"));
        assert!(text.contains("42,500"));
    }

    #[test]
    fn instructions_and_mcp_schemas_have_their_own_rows() {
        let b = ContextBreakdown {
            system: 1_000,
            instructions: 300,
            tools: 4_000,
            mcp_tools: 1_500,
            window: 50_000,
            ..ContextBreakdown::default()
        };
        let text = render_context(&b, "chars", Style::plain());
        assert!(
            text.starts_with("Context: 5,000 of 50,000 chars used"),
            "{text}"
        );
        let row = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_owned();
        assert!(row("system prompt").contains(" 700 chars"), "{text}");
        assert!(row("project instructions").contains(" 300 chars"), "{text}");
        assert!(row("tool definitions").contains(" 2,500 chars"), "{text}");
        assert!(row("MCP tool schemas").contains(" 1,500 chars"), "{text}");
    }

    #[test]
    fn numbers_and_dates_read_well() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(utc_minutes(t), "2023-11-14 22:13 UTC");
        assert_eq!(utc_minutes(UNIX_EPOCH), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(t), "2023-11-14");
    }

    #[test]
    fn cost_is_priced() {
        let u = UsageTotals {
            calls: 2,
            input: 1_000_000,
            output: 0,
            cache_read: 0,
            cache_write: 0,
        };
        assert!(render_cost(&u, &Prices::default()).contains("$3.0000"));
    }
}
