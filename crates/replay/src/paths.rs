//! Running replay over trace files and folders: import each, replay every
//! conversation under every policy, and total the reports.

use crate::calibration::calibrate;
use crate::conversation::replay_recorded;
use crate::import::{Conversation, import_tree};
use crate::policy::{Policy, ReplayConfig};
use crate::report::{ConversationRow, ErrorPct, RecordedTotals, ReplayReport, ReplaySummary};
use crate::survival::recorded_survival;
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
        recorded: None,
        none_on_recorded: None,
        none_vs_recorded: None,
        recorded_survival: None,
    };
    let none_column = policies.iter().position(|p| *p == Policy::None);
    let mut rows = Vec::new();
    'files: for path in paths {
        for file in import_tree(path) {
            let conversations = match file.result {
                Ok(c) => c,
                Err(e) => {
                    summary.errors.push(e.to_string());
                    continue;
                }
            };
            for c in conversations {
                match replay_conversation(&c, policies, config, summarizer) {
                    Ok(row) => rows.push((c.summarizes, row)),
                    Err(e) => {
                        summary
                            .errors
                            .push(format!("cannot make a scratch folder: {e}"));
                        break 'files;
                    }
                }
            }
        }
    }
    for mut row in fold_compaction_calls(rows) {
        for (total, report) in summary.totals.iter_mut().zip(&row.reports) {
            total.absorb(report);
        }
        if let Some(s) = &row.recorded_survival {
            summary
                .recorded_survival
                .get_or_insert_with(Default::default)
                .absorb(s);
        }
        if let (Some(recorded), Some(none)) =
            (&row.recorded, none_column.and_then(|k| row.reports.get(k)))
        {
            row.none_vs_recorded = Some(ErrorPct::of(none, recorded));
            summary
                .recorded
                .get_or_insert_with(RecordedTotals::default)
                .absorb(recorded);
            summary
                .none_on_recorded
                .get_or_insert_with(|| ReplayReport {
                    conversation: "total".into(),
                    policy: Policy::None.name().into(),
                    ..ReplayReport::default()
                })
                .absorb(none);
        }
        summary.conversations.push(row);
    }
    if let (Some(recorded), Some(none)) = (&summary.recorded, &summary.none_on_recorded) {
        summary.none_vs_recorded = Some(ErrorPct::of(none, recorded));
    }
    summary
}

/// One conversation replayed under every policy, in `policies`' order.
///
/// The recording agent's own compaction call ([`Conversation::summarizes`])
/// is made under `none` only: a policy with a pipeline summarizes with its
/// own calls, in the session, and never makes this one (at a 32k window
/// it would not even fit: Claude Code's are 139k and 169k tokens long).
fn replay_conversation(
    c: &Conversation,
    policies: &[Policy],
    config: &ReplayConfig,
    summarizer: &mut dyn FnMut() -> Box<dyn Summarizer>,
) -> std::io::Result<ConversationRow> {
    let calibration = calibrate(c, config);
    let mut row = ConversationRow {
        id: c.id.clone(),
        source: c.source.clone(),
        format: c.format.name().to_string(),
        messages: c.messages.len(),
        reports: Vec::new(),
        measured: calibration.measured,
        chars_per_token: calibration.chars_per_token,
        overhead_tokens: (calibration.overhead_chars as f64 / calibration.chars_per_token).round()
            as u64,
        recorded: RecordedTotals::of(c, &config.prices),
        none_vs_recorded: None,
        recorded_survival: recorded_survival(c),
    };
    for policy in policies {
        if c.summarizes.is_some() && *policy != Policy::None {
            row.reports.push(ReplayReport {
                conversation: c.id.clone(),
                policy: policy.name().into(),
                ..ReplayReport::default()
            });
            continue;
        }
        let scratch = scratch_store()?;
        let mut s = summarizer();
        row.reports.push(replay_recorded(
            c,
            &calibration,
            *policy,
            config,
            s.as_mut(),
            scratch.path(),
        ));
    }
    Ok(row)
}

/// Each recording agent's compaction call folded into the row of the
/// session it summarizes (its calls and bill are that session's, under
/// every policy: `none` made them, the others made their own summaries
/// instead); a call whose session was not replayed stays a row of its own.
/// The other rows keep their order.
fn fold_compaction_calls(rows: Vec<(Option<String>, ConversationRow)>) -> Vec<ConversationRow> {
    let mut sessions = Vec::with_capacity(rows.len());
    let mut compactions = Vec::new();
    for (summarizes, row) in rows {
        match summarizes {
            Some(session) => compactions.push((session, row)),
            None => sessions.push(row),
        }
    }
    for (session, call) in compactions {
        match sessions.iter_mut().find(|r| r.id == session) {
            Some(parent) => parent.absorb_compaction_call(&call),
            None => sessions.push(call),
        }
    }
    sessions
}

/// The length, in characters, of every scratch store's path.
///
/// Placeholders quote the store's paths, so the path's length is part of
/// every measured size: padded to one length, the numbers do not depend on
/// where the temporary folder is (`TMPDIR`), the process id or the count.
const STORE_PATH_CHARS: usize = 64;

/// A fresh, empty folder for one replay's store, removed when dropped; its
/// path is [`STORE_PATH_CHARS`] long wherever the temporary folder is
/// (longer only when the temporary folder's own path leaves no room).
fn scratch_store() -> std::io::Result<TempDir> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let parent = std::env::temp_dir();
    let name = format!("whittle-replay-{}-{n}-", std::process::id());
    // The parent, a separator, the name, the padding.
    let used = parent.to_string_lossy().chars().count() + 1 + name.chars().count();
    let padding = "x".repeat(STORE_PATH_CHARS.saturating_sub(used).min(200));
    tempfile::Builder::new()
        .prefix(&format!("{name}{padding}"))
        .rand_bytes(0)
        .tempdir_in(parent)
}
