//! Running replay over trace files and folders: import each, replay every
//! conversation under every policy, and total the reports.

use crate::conversation::replay_conversation;
use crate::import::import_tree;
use crate::policy::{Policy, ReplayConfig};
use crate::report::{ConversationRow, ReplayReport, ReplaySummary};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use tempfile::TempDir;
use whittle_context::Summarizer;

/// Imports every trace under `paths` and replays each conversation under
/// each policy. Each replay gets its own scratch store, removed afterwards.
/// `summarizer` makes a fresh summarizer for each replay.
pub fn replay_paths(
    paths: &[PathBuf],
    policies: &[Policy],
    config: &ReplayConfig,
    summarizer: &mut dyn FnMut() -> Box<dyn Summarizer>,
    summarizer_name: &str,
) -> ReplaySummary {
    let mut summary = ReplaySummary {
        window_tokens: config.window_tokens,
        prices: config.prices,
        summarizer: summarizer_name.to_string(),
        policies: policies.iter().map(|p| p.name().to_string()).collect(),
        conversations: Vec::new(),
        totals: policies
            .iter()
            .map(|p| ReplayReport {
                conversation: "total".into(),
                policy: p.name().into(),
                ..ReplayReport::default()
            })
            .collect(),
        errors: Vec::new(),
    };
    for path in paths {
        for file in import_tree(path) {
            let conversations = match file.result {
                Ok(c) => c,
                Err(e) => {
                    summary.errors.push(e.to_string());
                    continue;
                }
            };
            for c in conversations {
                let mut row = ConversationRow {
                    id: c.id.clone(),
                    source: c.source.clone(),
                    format: c.format.name().to_string(),
                    messages: c.messages.len(),
                    reports: Vec::new(),
                };
                for (k, policy) in policies.iter().enumerate() {
                    let scratch = match scratch_store() {
                        Ok(s) => s,
                        Err(e) => {
                            summary
                                .errors
                                .push(format!("cannot make a scratch folder: {e}"));
                            return summary;
                        }
                    };
                    let mut s = summarizer();
                    let report = replay_conversation(
                        &c.id,
                        &c.messages,
                        c.system.as_deref(),
                        *policy,
                        config,
                        s.as_mut(),
                        scratch.path(),
                    );
                    summary.totals[k].absorb(&report);
                    row.reports.push(report);
                }
                summary.conversations.push(row);
            }
        }
    }
    summary
}

/// A fresh, empty folder for one replay's store, removed when dropped.
///
/// Named `whittle-replay-<pid>-<n>` rather than randomly: placeholders quote
/// the store's paths, so the length of the name is part of every measured
/// size, and this keeps the numbers those of earlier versions.
fn scratch_store() -> std::io::Result<TempDir> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    tempfile::Builder::new()
        .prefix(&format!("whittle-replay-{}-{n}", std::process::id()))
        .rand_bytes(0)
        .tempdir()
}
