//! `whittle report`, `whittle replay --html`, `/report` and the REPL's
//! status line, on the replay fixtures and on a real session of ours with a
//! compaction in it.

use crate::{Harness, assert_success, five_files_to_read, stderr, stdout};
use scraper::{Html, Selector};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::Reply;

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// The replay crate's fixtures: one small recorded session per format.
fn fixtures() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../replay/tests/fixtures")
}

fn whittle(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(args)
        .current_dir(cwd)
        .envs(std::env::var_os("WHITTLE_TEST_RUN").map(|v| ("WHITTLE_TEST_RUN", v)))
        .output()
        .unwrap()
}

fn data_value(doc: &Html, selector: &str) -> f64 {
    doc.select(&sel(selector))
        .next()
        .unwrap_or_else(|| panic!("no {selector}"))
        .value()
        .attr("data-value")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_report_shows_the_totals_replay_json_prints() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures();
    let fixtures = fixtures.to_str().unwrap();
    let out = whittle(
        &[
            "report",
            "--window-tokens",
            "4000",
            "-o",
            "out/page.html",
            fixtures,
        ],
        dir.path(),
    );
    assert_success(&out);
    let page_path = dir.path().join("out/page.html");
    assert_eq!(stdout(&out).trim(), "out/page.html");
    assert!(stderr(&out).contains("wrote "), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page_path).unwrap();

    let out = whittle(
        &["replay", "--json", "--window-tokens", "4000", fixtures],
        dir.path(),
    );
    assert_success(&out);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();

    let doc = Html::parse_document(&html);
    let conversations = json["conversations"].as_array().unwrap().len();
    let policies = json["policies"].as_array().unwrap().len();
    assert_eq!(
        doc.select(&sel("section.conversation")).count(),
        conversations
    );
    assert_eq!(
        doc.select(&sel("section.conversation figure.chart"))
            .count(),
        conversations * policies
    );
    for t in json["totals"].as_array().unwrap() {
        let p = t["policy"].as_str().unwrap();
        let cost = data_value(&doc, &format!("td.cost[data-policy=\"{p}\"]"));
        let expected = t["cost_usd"].as_f64().unwrap();
        assert!(
            (cost - expected).abs() <= 1e-12 * expected.max(1.0),
            "{p}: {cost} vs {expected}"
        );
    }
    let column = |class: &str| -> Vec<f64> {
        doc.select(&sel(&format!("td.{class}")))
            .map(|td| td.value().attr("data-value").unwrap().parse().unwrap())
            .collect()
    };
    let totals = json["totals"].as_array().unwrap();
    for (class, key) in [
        ("peak", "peak_tokens"),
        ("over-window", "over_window"),
        ("summaries", "summarize_calls"),
        ("calls", "calls"),
    ] {
        let expected: Vec<f64> = totals.iter().map(|t| t[key].as_f64().unwrap()).collect();
        assert_eq!(column(class), expected, "{class}");
    }
    // Every applied step is a marker.
    let steps: u64 = totals
        .iter()
        .flat_map(|t| t["steps"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        doc.select(&sel("section.conversation circle.step-marker"))
            .count() as u64,
        steps
    );
    // The whittle fixture is also shown as a session.
    assert_eq!(doc.select(&sel("section.session")).count(), 1);

    // `replay --html` writes the same page and still prints the table.
    let out = whittle(
        &[
            "replay",
            "--window-tokens",
            "4000",
            "--html",
            "again.html",
            fixtures,
        ],
        dir.path(),
    );
    assert_success(&out);
    assert!(
        stdout(&out).starts_with("whittle replay:"),
        "{}",
        stdout(&out)
    );
    let again = std::fs::read_to_string(dir.path().join("again.html")).unwrap();
    // The same replay section (the session's links are relative to each page).
    let replay_section = |html: &str| {
        Html::parse_document(html)
            .select(&sel("section#replay"))
            .next()
            .unwrap()
            .html()
    };
    assert!(
        replay_section(&again) == replay_section(&html),
        "replay --html differs from report"
    );

    // Bad input: one clear line, nothing written.
    let out = whittle(&["report", "-o", "none.html", "no-such-folder"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no-such-folder: no such file or folder"),
        "{err}"
    );
    assert!(!dir.path().join("none.html").exists());
}

#[test]
fn the_repl_reports_its_session_with_links_that_resolve_and_prints_a_status_line() {
    let h = Harness::new();
    five_files_to_read(&h);
    h.server.push(Reply::text("All five are alike."));
    h.server.push(Reply::text("Nothing else."));
    let out = h.run_with_stdin(
        &["--preset", "teaching"],
        "Read f1.txt to f5.txt and compare them.\nanything else?\n/report\n/quit\n",
    );
    assert_success(&out);
    let err = stderr(&out);
    let status: Vec<&str> = err.lines().filter(|l| l.starts_with("context ")).collect();
    assert_eq!(status.len(), 2, "one status line per turn:\n{err}");
    // The first turn compacted; the status line says so, the second does not.
    assert!(
        status[0].contains("compacts at 50,000") && status[0].contains("chars"),
        "{}",
        status[0]
    );
    assert!(
        status[0].contains("compacted: ") && status[0].contains("micro_compact"),
        "{}",
        status[0]
    );
    assert!(!status[1].contains("compacted"), "{}", status[1]);
    assert!(status.iter().all(|l| l.contains("· $")), "{status:?}");

    // /report prints the page's path; the page shows the session.
    let page = stdout(&out)
        .lines()
        .map(str::trim)
        .find(|l| l.ends_with(".html"))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no report path in {}", stdout(&out)));
    assert!(
        page.starts_with(h.state().join("reports")),
        "{}",
        page.display()
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let doc = Html::parse_document(&html);
    let session = doc.select(&sel("section.session")).next().unwrap();
    let compactions: Vec<_> = session.select(&sel("li.compaction")).collect();
    assert!(!compactions.is_empty(), "{html:.2000}");
    // Seven calls: six for the first input, one for the second.
    let chart = session
        .select(&sel("figure.session-context"))
        .next()
        .unwrap();
    assert_eq!(
        chart.select(&sel("circle.step-marker")).count(),
        compactions.len()
    );
    let mut links = 0;
    for a in session.select(&sel("li.compaction a")) {
        let href = a.value().attr("href").unwrap();
        assert!(!href.starts_with('/') && !href.contains("://"), "{href}");
        let decoded = percent_encoding::percent_decode_str(href)
            .decode_utf8()
            .unwrap();
        let target = page.parent().unwrap().join(decoded.as_ref());
        assert!(target.is_file(), "{href} -> {}", target.display());
        assert!(target.canonicalize().unwrap().starts_with(h.state()));
        links += 1;
    }
    assert!(links > 0, "the compaction saved outputs: {html:.3000}");
    let log = session.select(&sel("p.meta a")).next().unwrap();
    let log_href = log.value().attr("href").unwrap();
    assert!(
        page.parent().unwrap().join(log_href).is_file(),
        "{log_href}"
    );
    h.assert_clean();
}

#[test]
fn no_status_turns_the_status_line_off() {
    let h = Harness::new();
    h.server.push(Reply::text("Hi."));
    h.server.push(Reply::text("Hi again."));
    let out = h.run_with_stdin(&["--no-status"], "hello\n");
    assert_success(&out);
    assert!(
        !stderr(&out).lines().any(|l| l.starts_with("context ")),
        "{}",
        stderr(&out)
    );
    h.write_user_config("status_line = false\n");
    let out = h.run_with_stdin(&[], "hello\n");
    assert_success(&out);
    assert!(
        !stderr(&out).lines().any(|l| l.starts_with("context ")),
        "{}",
        stderr(&out)
    );
    // /report before anything was logged says so in one line.
    let out = h.run_with_stdin(&[], "/report\n");
    assert_success(&out);
    assert!(
        stderr(&out).contains("nothing to report yet"),
        "{}",
        stderr(&out)
    );
}
