//! The page of a replay of the repository's fixtures and of a session log,
//! parsed as HTML: its structure, its numbers and its links.
use crate::common::{check_replay_page, data_value, fixtures, replay, sel};
use scraper::Html;
use serde_json::json;
use std::path::Path;
use whittle_report::{Page, SessionOptions};

#[test]
fn a_replay_page_has_a_chart_per_conversation_and_policy_with_every_step_marked() {
    // A small window, so that the fixtures' conversations compact.
    let summary = replay(fixtures(), 4_000);
    assert!(
        summary.conversations.len() >= 5,
        "{}",
        summary.conversations.len()
    );
    let mut page = Page::new("fixtures");
    page.add_replay(&summary).unwrap();
    let html = page.render().unwrap();
    let markers = check_replay_page(&html, &summary);
    let applied: u64 = summary.totals.iter().flat_map(|t| t.steps.values()).sum();
    assert_eq!(markers as u64, applied);
    assert!(markers > 0, "the fixtures compact at a 4,000-token window");
    // Self-contained: nothing is fetched.
    let doc = Html::parse_document(&html);
    // What each policy's compactions kept, one cell per policy, saying the
    // same percentages as the replay.
    let cells: Vec<String> = doc
        .select(&sel("table.policies td.survival"))
        .map(|td| td.text().collect())
        .collect();
    assert_eq!(cells.len(), summary.totals.len(), "{cells:?}");
    for (cell, total) in cells.iter().zip(&summary.totals) {
        match total.survival.person.percent() {
            Some(p) if total.survival.compactions > 0 => {
                assert!(cell.contains(&format!("person {p:.0}%")), "{cell}")
            }
            _ => assert!(cell == "-" || cell.contains("person"), "{cell}"),
        }
    }
    for (tag, attr) in [("script", "src"), ("link", "href"), ("img", "src")] {
        assert_eq!(
            doc.select(&sel(&format!("{tag}[{attr}]"))).count(),
            0,
            "{tag}"
        );
    }
    let without_namespaces = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_namespaces.contains("http://") && !without_namespaces.contains("https://"));
    // Worst first: compacting policies' overflows, then cost, descending.
    let worst: Vec<(u64, f64)> = summary
        .conversations
        .iter()
        .map(|r| {
            (
                r.reports
                    .iter()
                    .filter(|p| p.policy != "none")
                    .map(|p| p.over_window)
                    .sum(),
                r.reports.iter().map(|p| p.cost_usd).fold(0.0, f64::max),
            )
        })
        .collect();
    let mut expected = worst.clone();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let first = doc.select(&sel("section.conversation")).next().unwrap();
    let first_id = first.value().attr("data-id").unwrap();
    let k = worst.iter().position(|w| *w == expected[0]).unwrap();
    let tied: Vec<&str> = summary
        .conversations
        .iter()
        .zip(&worst)
        .filter(|(_, w)| **w == worst[k])
        .map(|(r, _)| r.id.as_str())
        .collect();
    assert!(tied.contains(&first_id), "{first_id} is not among {tied:?}");
}

fn record(v: serde_json::Value) -> String {
    v.to_string() + "\n"
}

/// A session log as the agent writes it: a header, messages, usage, and a
/// compaction that saved one output and wrote one transcript.
fn write_session(root: &Path, transcript_exists: bool) -> std::path::PathBuf {
    let sessions = root.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(root.join("tool-results")).unwrap();
    std::fs::create_dir_all(root.join("transcripts")).unwrap();
    std::fs::write(root.join("tool-results/out 1.txt"), "saved").unwrap();
    let transcript = root.join("transcripts/s1.jsonl");
    if transcript_exists {
        std::fs::write(&transcript, "{}\n").unwrap();
    }
    let mut log = record(
        json!({"type": "session", "format": "whittle-session-1", "id": "s1",
        "model": "anthropic:claude-sonnet-5-5", "cwd": "/w", "created_ms": 1}),
    );
    log += &record(json!({"type": "input", "text": "go"}));
    log += &record(json!({"type": "message", "message": {"role": "user", "content": "go"}}));
    for (i, tokens) in [1_000u64, 5_000, 9_000].iter().enumerate() {
        log += &record(
            json!({"type": "message", "message": {"role": "assistant", "content": format!("step {i}")}}),
        );
        log += &record(
            json!({"type": "usage", "input_tokens": tokens, "output_tokens": 100,
            "cache_read_tokens": tokens / 2, "cache_write_tokens": 100}),
        );
        log += &record(json!({"type": "message", "message": {"role": "user", "content": "more"}}));
    }
    log += &record(
        json!({"type": "compaction", "step": "micro_compact+compact_history",
        "trigger": "over_limit+over_limit", "before": 9_500, "after": 2_000, "unit": "tokens",
        "paths": [transcript], "from": 1, "keep_last": 1,
        "messages": [{"role": "user", "content": "summary"}]}),
    );
    log += &record(json!({"type": "message", "message": {"role": "assistant", "content": "done"}}));
    log += &record(
        json!({"type": "usage", "input_tokens": 2_500, "output_tokens": 10,
        "cache_read_tokens": 0, "cache_write_tokens": 2_400}),
    );
    // A compaction after the last call: in the timeline, not on the chart.
    log += &record(
        json!({"type": "compaction", "step": "micro_compact", "trigger": "requested",
        "before": 2_500, "after": 2_400, "unit": "tokens", "paths": ["tool-results/out 1.txt"],
        "from": 0, "messages": []}),
    );
    let path = sessions.join("s1.jsonl");
    std::fs::write(&path, log).unwrap();
    path
}

#[test]
fn a_session_page_charts_real_usage_and_links_what_compaction_saved() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".whittle");
    let log = write_session(&root, true);
    let page_dir = root.join("reports");
    std::fs::create_dir_all(&page_dir).unwrap();
    let mut page = Page::new("session s1");
    page.add_session(&log, &page_dir, &SessionOptions::default())
        .unwrap();
    let html = page.render().unwrap();
    let doc = Html::parse_document(&html);
    let section = doc.select(&sel("section.session")).next().unwrap();
    assert_eq!(section.value().attr("data-id"), Some("s1"));
    let compactions: Vec<_> = section.select(&sel("li.compaction")).collect();
    assert_eq!(compactions.len(), 2);
    assert_eq!(compactions[0].value().attr("data-call"), Some("3"));
    let text: String = compactions[0].text().collect();
    assert!(text.contains("9,500") && text.contains("2,000"), "{text}");
    // From 1 + 6 messages, the first and the last were kept: 5 removed, 1 in their place.
    assert!(text.contains("removed 5 message(s), put 1"), "{text}");
    // Only the compaction before a call is on the chart.
    let chart = section
        .select(&sel("figure.session-context"))
        .next()
        .unwrap();
    assert_eq!(chart.select(&sel("circle.step-marker")).count(), 1);
    // Every link resolves, relative to the page, to a file that exists.
    let links: Vec<_> = section.select(&sel("li.compaction a")).collect();
    assert_eq!(links.len(), 2);
    for a in links {
        let href = a.value().attr("href").unwrap();
        assert!(!href.starts_with('/') && !href.contains("://"), "{href}");
        let decoded = percent_decode(href);
        assert!(page_dir.join(&decoded).is_file(), "{href}");
        assert!(!a.value().classes().any(|c| c == "missing"));
    }
    // The cost is the usage priced at the provider's default prices.
    let prices = whittle_llm::Prices::default();
    let expected: f64 = [(1_000u64, 500u64), (5_000, 2_500), (9_000, 4_500)]
        .iter()
        .map(|(t, r)| prices.cost_usd(t - r - 100, *r, 100, 0, 100))
        .sum::<f64>()
        + prices.cost_usd(100, 0, 2_400, 0, 10);
    let shown = data_value(section.select(&sel(".session-cost")).next().unwrap());
    assert!((shown - expected).abs() < 1e-12, "{shown} vs {expected}");
}

#[test]
fn a_missing_file_is_marked_and_a_broken_log_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".whittle");
    let log = write_session(&root, false);
    let mut page = Page::new("s");
    page.add_session(&log, &root, &SessionOptions::default())
        .unwrap();
    let html = page.render().unwrap();
    let doc = Html::parse_document(&html);
    assert_eq!(doc.select(&sel("li.compaction a.missing")).count(), 1);

    let bad = root.join("sessions/bad.jsonl");
    std::fs::write(&bad, "{\"type\":\"session\",\"format\":\"whittle-session-1\",\"id\":\"b\",\"model\":\"x\",\"cwd\":\"/\",\"created_ms\":1}\nnot json\n{}\n").unwrap();
    let e = Page::new("b")
        .add_session(&bad, &root, &SessionOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.jsonl:2") && !e.contains("\n"), "{e}");
    let not_a_log = root.join("sessions/other.jsonl");
    std::fs::write(&not_a_log, "{\"type\":\"usage\",\"input_tokens\":1,\"output_tokens\":1,\"cache_read_tokens\":0,\"cache_write_tokens\":0}\n").unwrap();
    let e = Page::new("o")
        .add_session(&not_a_log, &root, &SessionOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a whittle session log"), "{e}");
    // A last line cut by a crash is left out, as when resuming.
    let cut = root.join("sessions/cut.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"type\":\"usa");
    std::fs::write(&cut, text).unwrap();
    assert!(
        Page::new("c")
            .add_session(&cut, &root, &SessionOptions::default())
            .is_ok()
    );
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .unwrap()
        .into_owned()
}

#[test]
fn a_session_page_marks_its_checkpoints_on_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".whittle");
    let log = write_session(&root, true);
    let mut text = std::fs::read_to_string(&log).unwrap();
    text += &record(
        json!({"type": "checkpoint", "id": "0196f3a2b4c1d9e7", "tool_call_id": null,
        "unix_ms": 1, "files_changed": 0, "insertions": 0, "deletions": 0}),
    );
    text += &record(
        json!({"type": "checkpoint", "id": "0196f3a2b4c1d9e8", "tool_call_id": "c1",
        "unix_ms": 2, "files_changed": 3, "insertions": 10, "deletions": 2}),
    );
    std::fs::write(&log, text).unwrap();
    let page_dir = root.join("reports");
    std::fs::create_dir_all(&page_dir).unwrap();
    let mut page = Page::new("session s1");
    page.add_session(&log, &page_dir, &SessionOptions::default())
        .unwrap();
    let doc = Html::parse_document(&page.render().unwrap());
    let marks: Vec<_> = doc.select(&sel("li.checkpoint")).collect();
    assert_eq!(marks.len(), 2);
    assert_eq!(marks[1].value().attr("data-id"), Some("0196f3a2b4c1d9e8"));
    assert_eq!(marks[1].value().attr("data-call"), Some("4"));
    let text: String = marks[1].text().collect();
    assert!(
        text.contains("after tool call c1") && text.contains("+10 -2"),
        "{text}"
    );
    assert_eq!(
        doc.select(&sel("li.checkpoint .checkpoint-marker")).count(),
        2
    );
}
