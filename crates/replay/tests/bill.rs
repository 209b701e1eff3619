//! Issue 24's invariant on Claude Code logs with branches: whatever the
//! person rewound, edited or compacted, the recorded bill holds every billed
//! response exactly once (by `message.id`), split into the calls replay
//! makes (the thread that was last sent) and the abandoned branches.

use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use whittle_llm::Prices;
use whittle_replay::{RecordedTotals, import_path};

/// One step of a generated session.
#[derive(Clone, Debug)]
enum Step {
    /// The person asks; one response answers, logged in `parts` records.
    Ask { parts: usize },
    /// The person goes back to the `n`th exchange (modulo those made) and
    /// asks again from there: what followed becomes an abandoned branch.
    Rewind { to: usize },
    /// Claude Code compacts; its boundary names a logical parent that is
    /// in the file, or not.
    Compact { parent_in_file: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..4).prop_map(|parts| Step::Ask { parts }),
        1 => (0usize..50).prop_map(|to| Step::Rewind { to }),
        1 => any::<bool>().prop_map(|parent_in_file| Step::Compact { parent_in_file }),
    ]
}

/// The log of `steps`, and the ids of the responses on the last thread and of all billed ones.
fn session(steps: &[Step]) -> (String, BTreeSet<String>, BTreeSet<String>) {
    let mut lines: Vec<Value> = Vec::new();
    // Per event made so far: (uuid, parent index, message id if a response).
    let mut events: Vec<(String, Option<usize>, Option<String>)> = Vec::new();
    // Indices of the last record of each exchange, where a rewind may go back to.
    let mut exchanges: Vec<usize> = Vec::new();
    let mut leaf: Option<usize> = None;
    let mut n = 0;
    let mut billed = BTreeSet::new();
    let push = |lines: &mut Vec<Value>,
                events: &mut Vec<(String, Option<usize>, Option<String>)>,
                mut e: Value,
                parent: Option<usize>,
                id: Option<String>| {
        let uuid = format!("e{}", events.len());
        e["uuid"] = json!(uuid);
        e["sessionId"] = json!("s");
        e["isSidechain"] = json!(false);
        if e.get("parentUuid").is_none() {
            e["parentUuid"] = json!(parent.map(|p| events[p].0.clone()));
        }
        lines.push(e);
        events.push((uuid, parent, id));
        events.len() - 1
    };
    for s in steps {
        match s {
            Step::Ask { parts } => {
                n += 1;
                let u = push(
                    &mut lines,
                    &mut events,
                    json!({"type": "user", "message": {"role": "user", "content": format!("ask {n}")}}),
                    leaf,
                    None,
                );
                let id = format!("msg_{n}");
                billed.insert(id.clone());
                let mut at = u;
                for p in 0..*parts {
                    at = push(
                        &mut lines,
                        &mut events,
                        json!({"type": "assistant", "message": {
                            "id": id, "role": "assistant", "model": "m",
                            "content": [{"type": "text", "text": format!("answer {n} part {p}")}],
                            "usage": {"input_tokens": 3, "cache_read_input_tokens": 1000 * n,
                                      "cache_creation_input_tokens": 100, "output_tokens": 10 + p}}}),
                        Some(at),
                        Some(id.clone()),
                    );
                }
                exchanges.push(at);
                leaf = Some(at);
            }
            Step::Rewind { to } => {
                if !exchanges.is_empty() {
                    leaf = Some(exchanges[to % exchanges.len()]);
                }
            }
            Step::Compact { parent_in_file } => {
                let Some(l) = leaf else { continue };
                let logical = if *parent_in_file {
                    events[l].0.clone()
                } else {
                    "not-in-this-file".to_string()
                };
                let b = push(
                    &mut lines,
                    &mut events,
                    json!({"type": "system", "subtype": "compact_boundary", "parentUuid": null,
                           "logicalParentUuid": logical,
                           "compactMetadata": {"trigger": "auto", "preTokens": 1000}}),
                    None,
                    None,
                );
                // With the parent missing, the thread continues the newest event before the boundary.
                events[b].1 = if *parent_in_file {
                    Some(l)
                } else {
                    Some(b - 1)
                };
                let summary = push(
                    &mut lines,
                    &mut events,
                    json!({"type": "user", "isCompactSummary": true,
                           "message": {"role": "user", "content": "This session is being continued"}}),
                    Some(b),
                    None,
                );
                leaf = Some(summary);
                exchanges.clear();
            }
        }
    }
    // The thread: from the newest conversation event back to the root.
    let mut on_thread = BTreeSet::new();
    let mut at = events.len().checked_sub(1);
    while let Some(i) = at {
        if let Some(id) = &events[i].2 {
            on_thread.insert(id.clone());
        }
        at = events[i].1;
    }
    let text = lines.iter().map(|l| format!("{l}\n")).collect();
    (text, on_thread, billed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_billed_response_is_in_the_bill_once_replayed_or_abandoned(
        steps in proptest::collection::vec(step(), 1..24)
    ) {
        let (text, on_thread, billed) = session(&steps);
        prop_assume!(!on_thread.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, text).unwrap();
        let all = import_path(&path).unwrap();
        prop_assert_eq!(all.len(), 1);
        let c = &all[0];
        let totals = RecordedTotals::of(c, &Prices::default()).unwrap();
        prop_assert_eq!(totals.calls, billed.len() as u64);
        prop_assert_eq!(totals.replayed().calls, c.calls.iter().filter(|k| k.usage.is_some()).count() as u64);
        prop_assert_eq!(c.calls.len(), on_thread.len());
        prop_assert_eq!(totals.abandoned.calls as usize, billed.len() - on_thread.len());
        prop_assert_eq!(c.abandoned.len(), billed.len() - on_thread.len());
        // A response logged in parts is billed with its last part's output.
        prop_assert!(totals.output_tokens >= 10 * totals.calls);
    }
}
