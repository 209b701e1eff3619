//! Compaction that remembers, end to end: after a bland summary the next
//! request still has every message the person wrote and the files touched
//! (the state ledger), `recall` finds a detail that only a summarized tool
//! output held, and `/uncompact` brings the conversation back.

use crate::{Harness, assert_success, stdout};
use serde_json::{Value, json};
use testkit::{Reply, content_text};

const SAID: [&str; 3] = [
    "Read notes/alpha.txt and keep the code word in mind.",
    "Now look at the log: cat notes/beta.log",
    "Write a short summary to out/summary.md please.",
];

fn all_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(content_text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_bland_summary_keeps_what_the_person_said_and_recall_finds_the_rest() {
    let h = Harness::new();
    std::fs::create_dir_all(h.ws().join("notes")).unwrap();
    let filler = "lorem ipsum dolor sit amet ".repeat(120);
    std::fs::write(
        h.ws().join("notes/alpha.txt"),
        format!("{filler}\ncodeword: PELICAN-7731\n{filler}\n"),
    )
    .unwrap();
    std::fs::write(h.ws().join("notes/beta.log"), format!("{filler}\nok\n")).unwrap();

    let s = &h.server;
    s.push(Reply::tool_use(
        "r1",
        "read_file",
        json!({"path": "notes/alpha.txt"}),
    ));
    s.push(Reply::text("I read it."));
    s.push(Reply::tool_use(
        "b1",
        "bash",
        json!({"command": "cat notes/beta.log"}),
    ));
    s.push(Reply::text("The log says ok."));
    s.push(Reply::tool_use(
        "w1",
        "write_file",
        json!({"path": "out/summary.md", "content": "All fine.\n"}),
    ));
    s.push(Reply::text("Written."));
    // The summary says nothing useful: only what the harness keeps counts.
    s.push(Reply::text("Work is in progress."));
    s.push(Reply::tool_use(
        "k1",
        "recall",
        json!({"query": "pelican-7731"}),
    ));
    s.push(Reply::text("The code word is PELICAN-7731."));
    s.push(Reply::text("You are welcome."));

    let input = format!(
        "{}\n{}\n{}\n/compact\nWhat was the code word?\n/uncompact\nthanks\n/quit\n",
        SAID[0], SAID[1], SAID[2]
    );
    let out = h.run_with_stdin(
        &["--preset", "teaching", "--permission-mode", "accept-edits"],
        &input,
    );
    assert_success(&out);
    let requests = h.requests();
    assert_eq!(
        requests.len(),
        10,
        "{}\n{}",
        stdout(&out),
        crate::stderr(&out)
    );

    // The first request after the summary: one [Compacted] message whose
    // ledger has all three messages and the three files.
    let after = &requests[7].body;
    let first = content_text(&after["messages"][0]);
    assert!(first.starts_with("[Compacted]"), "{first}");
    assert!(first.contains("Work is in progress."));
    let context = all_text(after);
    for said in SAID {
        assert!(context.contains(said), "{said} missing from:\n{context}");
    }
    for path in ["notes/alpha.txt", "notes/beta.log", "out/summary.md"] {
        assert!(context.contains(path), "{path} missing from:\n{context}");
    }
    assert!(!context.contains("PELICAN-7731"), "the summary dropped it");

    // recall finds it in what left the context, with path:line.
    let answered: String = requests[8].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let line = answered
        .lines()
        .find(|l| l.contains("PELICAN-7731") && l.contains(".whittle/"))
        .unwrap_or_else(|| panic!("no recall hit in:\n{answered}"));
    let (path, rest) = line.split_once(":").unwrap();
    let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
    assert!(!number.is_empty(), "{line}");
    let hit = std::fs::read_to_string(path.trim()).unwrap();
    let at: usize = number.parse().unwrap();
    assert!(
        hit.lines().nth(at - 1).unwrap().contains("PELICAN-7731"),
        "{line}"
    );

    // /uncompact: the next request starts with the first thing the person said.
    let text = stdout(&out);
    assert!(
        text.contains("restored the conversation as it was before the last compaction"),
        "{text}"
    );
    let restored = &requests[9].body;
    assert_eq!(content_text(&restored["messages"][0]), SAID[0]);
    let restored_text = all_text(restored);
    assert!(
        restored_text.contains("PELICAN-7731"),
        "the read result is back"
    );
    assert!(
        restored_text.contains("What was the code word?"),
        "and what came after"
    );
    h.assert_clean();
}
