//! What the charts say, read back from the page as HTML: cost bars in
//! parts with a legend, axes that name what they count, a conversation of
//! one call drawn as a dot, and a cost axis of a hundredth of a cent whose
//! ticks read differently.

use crate::common::{data_value, fixtures, replay, sel};
use scraper::{ElementRef, Html};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use whittle_report::{CostPart, Page, SessionOptions};

/// The texts plotters wrote into `svg` (axis labels, descriptions, notes).
fn svg_texts(svg: ElementRef<'_>) -> Vec<String> {
    svg.select(&sel("text"))
        .map(|t| t.text().collect::<String>().trim().to_owned())
        .collect()
}

fn replay_page(path: std::path::PathBuf, window: u64) -> (Html, whittle_replay::ReplaySummary) {
    let summary = replay(path, window);
    let mut page = Page::new("charts");
    page.add_replay(&summary).unwrap();
    (Html::parse_document(&page.render().unwrap()), summary)
}

#[test]
fn cost_bars_are_stacked_by_part_in_the_legend_colours_and_sum_to_the_cost() {
    let (doc, summary) = replay_page(fixtures(), 4_000);
    let legend: Vec<(String, String)> = doc
        .select(&sel("figure.cost-bars .cost-key"))
        .map(|k| {
            (
                k.value().attr("data-part").unwrap().to_owned(),
                k.value().attr("data-colour").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(legend.len(), CostPart::ALL.len(), "{legend:?}");
    let colours: BTreeSet<&str> = legend.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(
        colours.len(),
        legend.len(),
        "one colour per part: {legend:?}"
    );
    let svg = doc.select(&sel("figure.cost-bars svg")).next().unwrap();
    for total in &summary.totals {
        let parts: Vec<ElementRef<'_>> = svg
            .select(&sel(&format!(
                "rect.cost-part[data-policy=\"{}\"]",
                total.policy
            )))
            .collect();
        // The fixtures read from and write to the cache under every policy.
        assert!(parts.len() >= 2, "{}: {} parts", total.policy, parts.len());
        let mut sum = 0.0;
        for rect in &parts {
            let class = rect.value().attr("class").unwrap();
            let fill = rect.value().attr("fill").unwrap();
            let key = legend
                .iter()
                .find(|(k, _)| class.contains(&format!("p-{k}")))
                .unwrap_or_else(|| panic!("{class} is in the legend"));
            assert_eq!(fill, key.1, "{class}");
            // Hover text says the policy, the part and its dollars.
            let title: String = rect.select(&sel("title")).next().unwrap().text().collect();
            assert!(
                title.starts_with(&total.policy) && title.contains('$'),
                "{title}"
            );
            sum += data_value(*rect);
        }
        assert!(
            (sum - total.cost_usd).abs() <= 1e-9 * total.cost_usd.max(1.0),
            "{}: parts {sum} vs cost {}",
            total.policy,
            total.cost_usd
        );
    }
    // Readable: no label under 11 px (they were 8).
    let texts = svg_texts(svg);
    for total in &summary.totals {
        assert!(texts.contains(&total.policy), "{texts:?}");
    }
    assert!(texts.iter().any(|t| t == "dollars"), "{texts:?}");
    let sizes: Vec<f64> = svg
        .select(&sel("text"))
        .filter_map(|t| t.value().attr("font-size")?.parse().ok())
        .collect();
    assert!(
        !sizes.is_empty() && sizes.iter().all(|s| *s >= 11.0),
        "{sizes:?}"
    );
}

#[test]
fn every_chart_names_its_axes() {
    let (doc, _) = replay_page(fixtures(), 4_000);
    let charts: Vec<_> = doc
        .select(&sel("section.conversation figure.chart svg"))
        .collect();
    assert!(!charts.is_empty());
    for svg in charts {
        let texts = svg_texts(svg);
        assert!(texts.iter().any(|t| t == "call"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "tokens"), "{texts:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let log = tiny_session(dir.path(), 3);
    let doc = session_page(&log, dir.path());
    for (figure, y) in [
        ("figure.session-context", "tokens"),
        ("figure.session-cumulative-cost", "dollars"),
    ] {
        let svg = doc.select(&sel(&format!("{figure} svg"))).next().unwrap();
        let texts = svg_texts(svg);
        assert!(texts.iter().any(|t| t == "call"), "{figure}: {texts:?}");
        assert!(texts.iter().any(|t| t == y), "{figure}: {texts:?}");
    }
}

#[test]
fn a_conversation_of_one_call_is_a_dot_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let chat = dir.path().join("one-call.json");
    std::fs::write(
        &chat,
        json!([
            {"role": "user", "content": "What is 6 times 7?"},
            {"role": "assistant", "content": "42."}
        ])
        .to_string(),
    )
    .unwrap();
    let (doc, summary) = replay_page(dir.path().to_path_buf(), 32_000);
    assert_eq!(summary.conversations.len(), 1, "{:?}", summary.errors);
    let figures: Vec<_> = doc
        .select(&sel("section.conversation figure.chart"))
        .collect();
    assert_eq!(figures.len(), summary.policies.len());
    for figure in figures {
        let dots: Vec<_> = figure.select(&sel("circle.dot")).collect();
        assert_eq!(dots.len(), 1, "one dot for one call");
        let texts = svg_texts(figure.select(&sel("svg")).next().unwrap());
        assert!(texts.iter().any(|t| t.starts_with("one call")), "{texts:?}");
        // Its dot is inside the plot, off the y axis.
        let cx: i32 = dots[0].value().attr("cx").unwrap().parse().unwrap();
        assert!(cx > 100, "{cx}");
    }
    // A session of one call says it too.
    let log = tiny_session(dir.path(), 1);
    let doc = session_page(&log, dir.path());
    for figure in ["figure.session-context", "figure.session-cumulative-cost"] {
        let svg = doc.select(&sel(&format!("{figure} svg"))).next().unwrap();
        assert_eq!(svg.select(&sel("circle.dot")).count(), 1, "{figure}");
        assert!(
            svg_texts(svg).iter().any(|t| t.starts_with("one call")),
            "{figure}"
        );
    }
}

#[test]
fn a_cost_axis_of_a_hundredth_of_a_cent_has_ticks_that_read_differently() {
    let dir = tempfile::tempdir().unwrap();
    let log = tiny_session(dir.path(), 3);
    let doc = session_page(&log, dir.path());
    let shown = data_value(doc.select(&sel(".session-cost")).next().unwrap());
    assert!(
        shown < 0.001,
        "a session this small costs under a tenth of a cent: {shown}"
    );
    let svg = doc
        .select(&sel("figure.session-cumulative-cost svg"))
        .next()
        .unwrap();
    let ticks: Vec<String> = svg_texts(svg)
        .into_iter()
        .filter(|t| t.starts_with('$'))
        .collect();
    assert!(ticks.len() >= 2, "{ticks:?}");
    let distinct: BTreeSet<&String> = ticks.iter().collect();
    assert_eq!(distinct.len(), ticks.len(), "repeated ticks: {ticks:?}");
    // Beyond the first, none reads as nothing.
    assert!(
        ticks[1..]
            .iter()
            .all(|t| !t.trim_start_matches(['$', '0', '.']).is_empty()),
        "{ticks:?}"
    );
}

/// A whittle session log of `calls` calls of a few tokens each, in
/// `root/.whittle/sessions`.
fn tiny_session(root: &Path, calls: usize) -> std::path::PathBuf {
    let sessions = root.join(".whittle/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let mut log = json!({"type": "session", "format": "whittle-session-1", "id": "tiny",
        "model": "anthropic:claude-sonnet-5-5", "cwd": "/w", "created_ms": 1})
    .to_string()
        + "\n";
    log += &(json!({"type": "message", "message": {"role": "user", "content": "hi"}}).to_string()
        + "\n");
    for k in 0..calls {
        log += &(json!({"type": "message", "message": {"role": "assistant", "content": format!("hi {k}")}})
            .to_string()
            + "\n");
        log += &(json!({"type": "usage", "input_tokens": 5 + k, "output_tokens": 1,
            "cache_read_tokens": 0, "cache_write_tokens": 0})
        .to_string()
            + "\n");
    }
    let path = sessions.join(format!("tiny-{calls}.jsonl"));
    std::fs::write(&path, log).unwrap();
    path
}

fn session_page(log: &Path, page_dir: &Path) -> Html {
    let mut page = Page::new("session");
    page.add_session(log, page_dir, &SessionOptions::default())
        .unwrap();
    Html::parse_document(&page.render().unwrap())
}
