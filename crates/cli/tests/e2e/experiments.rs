//! The seed's three experiments, with `--preset teaching`.

use crate::{
    Harness, assert_success, five_files_to_read, saved_placeholder_path, stderr, stdout,
    strip_cache_control, tool_result, walk, write_lines,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use testkit::{Reply, Step, content_text};

#[test]
fn experiment_1_earlier_results_become_saved_placeholders() {
    let h = Harness::new();
    five_files_to_read(&h);
    h.server
        .push(Reply::text("All five READMEs use numbered headings."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "-p",
        "Read f1.txt to f5.txt one by one and compare them.",
    ]);
    assert_success(&out);
    assert!(stdout(&out).contains("numbered headings"));
    let requests = h.requests();
    assert_eq!(requests.len(), 6);
    // Each result as first sent, whole.
    let first_sent: Vec<String> = (1..=5)
        .map(|i| content_text(&tool_result(&requests[i].body, &format!("r{i}"))))
        .collect();
    for (i, text) in first_sent.iter().enumerate() {
        assert!(
            text.len() > 11_000,
            "result {} is {} chars",
            i + 1,
            text.len()
        );
        assert!(text.contains(&format!("f{} line 000110", i + 1)));
    }
    let sixth = &requests[5].body;
    let now: Vec<String> = (1..=5)
        .map(|i| content_text(&tool_result(sixth, &format!("r{i}"))))
        .collect();
    let placeholders: Vec<usize> = (0..5)
        .filter(|&i| saved_placeholder_path(&now[i]).is_some())
        .collect();
    assert!(
        !placeholders.is_empty(),
        "no placeholder in the sixth request"
    );
    assert_eq!(placeholders[0], 0, "the oldest result goes first");
    assert!(
        placeholders.iter().all(|&i| i < 2),
        "the newest three stay whole: {placeholders:?}"
    );
    for i in 2..5 {
        assert_eq!(now[i], first_sent[i], "result {} is whole", i + 1);
    }
    for &i in &placeholders {
        let path = saved_placeholder_path(&now[i]).unwrap();
        assert!(
            path.starts_with(h.state().join("tool-results")),
            "{}",
            path.display()
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            first_sent[i],
            "the saved file holds the whole result"
        );
    }
    assert!(stderr(&out).contains("[auto compact]"), "{}", stderr(&out));
    assert!(stderr(&out).contains("micro_compact"));

    // The log holds only what compaction changed, yet a resumed session sees
    // exactly the compacted history the model saw last, then its answer.
    h.server.push(Reply::text("Resumed."));
    assert_success(&h.run(&["--preset", "teaching", "--continue", "-p", "go on"]));
    let without_breakpoints = |v: &Value| {
        let mut v = v.clone();
        strip_cache_control(&mut v);
        v.as_array().unwrap().clone()
    };
    let resumed = without_breakpoints(&h.requests()[6].body["messages"]);
    let last = without_breakpoints(&sixth["messages"]);
    assert!(
        resumed[..last.len()] == last[..],
        "the resumed history differs from the one last sent"
    );
    let log = walk(&h.state().join("sessions"))
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    let froms: Vec<u64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "compaction")
        .map(|r| r["from"].as_u64().unwrap())
        .collect();
    assert!(
        !froms.is_empty() && froms.iter().all(|&f| f >= 2),
        "compactions log only from the first edited message: {froms:?}"
    );
    assert!(
        log.contains("\"trigger\":\"over_limit\""),
        "the trigger is logged"
    );
    assert_eq!(
        content_text(&resumed[last.len()]),
        "All five READMEs use numbered headings."
    );
    h.assert_clean();
}

#[test]
fn experiment_2_a_large_batch_is_persisted_with_a_preview() {
    let h = Harness::new();
    // Four files of ~700 KB; read_file shows the first 60,000 chars of each,
    // so the batch (~240,000 chars) exceeds the 200,000-char budget.
    for tag in ["a", "b", "c", "d"] {
        write_lines(&h.ws().join(format!("{tag}.txt")), tag, 7_000, 100);
    }
    h.server
        .push(Reply::tool_uses(["a", "b", "c", "d"].map(|t| {
            (
                format!("big-{t}"),
                "read_file",
                json!({"path": format!("{t}.txt")}),
            )
        })));
    h.server
        .push(Reply::text("The records have id, title and body."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "--output-format",
        "stream-json",
        "-p",
        "Analyze the structure of a.txt to d.txt",
    ]);
    assert_success(&out);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "compaction"
            && e["report"]["step"] == "tool_result_budget"
            && e["report"]["outcome"] == "applied"),
        "{events:?}"
    );
    let second = &h.requests()[1].body;
    let mut persisted = 0;
    for t in ["a", "b", "c", "d"] {
        let text = content_text(&tool_result(second, &format!("big-{t}")));
        let Some(rest) = text.strip_prefix("<persisted-output>\nFull output: ") else {
            continue;
        };
        persisted += 1;
        let path = PathBuf::from(rest.split_once('\n').unwrap().0);
        assert!(path.starts_with(h.state().join("tool-results")));
        assert!(
            text.contains(&format!("{t} line 000001")),
            "a preview: {text}"
        );
        assert!(
            !text.contains(&format!("{t} line 000500")),
            "only a preview"
        );
        let full = std::fs::read_to_string(&path).unwrap();
        assert!(full.chars().count() > 50_000, "{} chars", full.len());
        assert!(
            full.contains(&format!("{t} line 000500")),
            "the full text on disk"
        );
    }
    assert!(persisted >= 1, "no persisted output in {second}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["subtype"], "success");
    h.assert_clean();
}

#[test]
fn experiment_3_long_text_is_summarized_with_the_request_and_a_transcript() {
    let h = Harness::new();
    let essay = "The parser keeps state in three tables. ".repeat(1_500); // 60,000 chars
    h.server.push(Reply::text(essay.clone()).with_tool_use(
        "e1",
        "bash",
        json!({"command": "echo ok"}),
    ));
    h.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(asked.starts_with("<conversation>"), "{asked:.200}");
        Step::Reply(Reply::text(
            "Summary: the user asked to compare two files; an essay on parser tables was written.",
        ))
    });
    h.server
        .push(Reply::text("Both manage context with summaries."));
    let prompt = "Compare compact.py with memory.py.";
    let out = h.run(&["--preset", "teaching", "-p", prompt]);
    assert_success(&out);
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let first = content_text(&requests[2].body["messages"][0]);
    assert!(
        first.starts_with(&format!(
            "[Compacted]\n\nCurrent user request:\n{prompt}\n\nConversation summary"
        )),
        "{first}"
    );
    assert!(first.contains("essay on parser tables"));
    // The transcript's line; the state ledger follows it.
    let after = first.rsplit_once("Full transcript: ").unwrap().1;
    let transcript = PathBuf::from(after.lines().next().unwrap().trim());
    assert!(after.contains("<state-ledger>") && after.contains(prompt));
    let saved = std::fs::read_to_string(&transcript).unwrap();
    assert!(saved.contains("The parser keeps state in three tables."));
    assert!(saved.len() > 60_000);
    let err = stderr(&out);
    assert!(
        err.contains("[auto compact]") && err.contains("compact_history"),
        "{err}"
    );
    assert!(err.contains("transcript: .whittle/transcripts/"), "{err}");
    h.assert_clean();
}
