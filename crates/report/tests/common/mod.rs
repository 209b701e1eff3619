//! What the report suites share: where the inputs are, a replay of them, and
//! the structural checks made on every page.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use scraper::{ElementRef, Html, Selector};
use std::path::PathBuf;
use whittle_context::Summarizer;
use whittle_replay::{Policy, ReplayConfig, ReplaySummary, StandInSummarizer, replay_paths};

/// The package directory, as cargo gives it at run time (clones may share a
/// target directory, so `env!` could name another checkout).
fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The replay crate's fixtures: one small session per format, in the repository.
pub fn fixtures() -> PathBuf {
    package_dir().join("../replay/tests/fixtures")
}

/// Every policy over `path` at `window` tokens, with the stand-in summarizer.
pub fn replay(path: PathBuf, window: u64) -> ReplaySummary {
    let stand_in = StandInSummarizer::default();
    let mut factory = move || Box::new(stand_in.clone()) as Box<dyn Summarizer>;
    replay_paths(
        &[path],
        &Policy::ALL,
        &ReplayConfig::for_window(window),
        &mut factory,
        "stand-in",
    )
}

pub fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// The number an element carries in its `data-value` attribute.
pub fn data_value(element: ElementRef) -> f64 {
    element.value().attr("data-value").unwrap().parse().unwrap()
}

/// The page has one chart per conversation and policy, each with one
/// marker per applied step, and its totals are the summary's. Returns the
/// number of markers.
pub fn check_replay_page(html: &str, summary: &ReplaySummary) -> usize {
    let doc = Html::parse_document(html);
    assert!(
        doc.errors.is_empty() || doc.errors.iter().all(|e| !e.contains("Unexpected token")),
        "{:?}",
        doc.errors
    );
    let conversations: Vec<_> = doc.select(&sel("section.conversation")).collect();
    assert_eq!(conversations.len(), summary.conversations.len());
    let charts = doc
        .select(&sel("section.conversation figure.chart"))
        .count();
    assert_eq!(charts, summary.conversations.len() * summary.policies.len());
    let mut markers = 0;
    // Ids may repeat across files (two exports of one session): match in order.
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for section in &conversations {
        let id = section.value().attr("data-id").unwrap().to_string();
        let nth = seen.entry(id.clone()).or_default();
        let row = summary
            .conversations
            .iter()
            .filter(|r| r.id == id)
            .nth(*nth)
            .expect("every section is a conversation of the replay");
        *nth += 1;
        let figures: Vec<_> = section.select(&sel("figure.chart")).collect();
        assert_eq!(figures.len(), row.reports.len(), "{id}");
        for (figure, report) in figures.iter().zip(&row.reports) {
            assert_eq!(
                figure.value().attr("data-policy"),
                Some(report.policy.as_str())
            );
            assert_eq!(figure.select(&sel("svg")).count(), 1, "{id}");
            let drawn = figure.select(&sel("circle.step-marker")).count();
            let applied: u64 = report.steps.values().sum();
            assert_eq!(drawn as u64, applied, "{id} / {}", report.policy);
            // Every marker says what the step did.
            for title in figure.select(&sel("circle.step-marker title")) {
                assert!(title.text().collect::<String>().contains(" -> "));
            }
            markers += drawn;
        }
    }
    for total in &summary.totals {
        let cell = doc
            .select(&sel(&format!("td.cost[data-policy=\"{}\"]", total.policy)))
            .next()
            .expect("a cost per policy");
        let shown: f64 = cell.value().attr("data-value").unwrap().parse().unwrap();
        assert!(
            (shown - total.cost_usd).abs() <= 1e-9 * total.cost_usd.max(1.0),
            "{shown} vs {}",
            total.cost_usd
        );
    }
    let rows = doc.select(&sel("table#conversations tbody tr")).count();
    assert_eq!(rows, summary.conversations.len());
    markers
}
