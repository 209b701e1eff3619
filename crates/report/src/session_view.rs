//! A whittle session log's page data: context size from the usage the
//! provider reported, cost so far, and a timeline of compactions with links
//! to what each one moved out of the context.

use crate::chart::{ContextCurve, Marker, context_chart, cumulative_cost};
use crate::error::ReportError;
use crate::links::Link;
use serde::Serialize;
use std::path::{Path, PathBuf};
use whittle_context::session::{OutputRef, SessionRecord, parse_records};
use whittle_llm::{ModelSpec, Prices, model_facts};

/// What the log does not say about its session.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// The model's window, in tokens; default: the model's known window.
    pub window_tokens: Option<u64>,
    /// Where compaction starts, in tokens; default: none drawn.
    pub limit_tokens: Option<u64>,
    /// The prices; default: those of the session's provider.
    pub prices: Option<Prices>,
}

/// One compaction in the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct CompactionView {
    /// Model calls made before it.
    pub call: u64,
    /// Whether a call came after it (then it is marked on the chart).
    pub marked: bool,
    /// The step (`micro_compact`, `a+b` when several ran).
    pub step: String,
    /// The first step's name, which picks the colour.
    pub kind: String,
    /// Why it ran.
    pub trigger: String,
    /// Size before, in `unit`.
    pub before: u64,
    /// Size after, in `unit`.
    pub after: u64,
    /// Tokens or chars.
    pub unit: String,
    /// Messages it took out of the history.
    pub removed_messages: usize,
    /// Messages it put in their place (placeholders, a summary).
    pub replaced_by: usize,
    /// Where what it took out went: persisted outputs, transcripts.
    pub links: Vec<Link>,
}

/// A compaction step that failed and left the history as it was.
#[derive(Clone, Debug, Serialize)]
pub struct FailureView {
    /// Model calls made before it.
    pub call: u64,
    /// The step.
    pub step: String,
    /// What went wrong.
    pub reason: String,
}

/// A checkpoint of the workspace's files in the timeline (`/rewind` can
/// go back to it).
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointView {
    /// Model calls made before it.
    pub call: u64,
    /// Its id in the checkpoint store.
    pub id: String,
    /// The tool call it followed; `None` at a turn's start.
    pub tool_call_id: Option<String>,
    /// Files changed since the previous checkpoint.
    pub files_changed: u64,
    /// Lines added since then.
    pub insertions: u64,
    /// Lines removed since then.
    pub deletions: u64,
    /// Why it was made, when not for a turn or a tool call.
    pub note: Option<String>,
}

/// Everything the page shows of one session.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// Anchor of its section in the page.
    pub anchor: String,
    /// The session id.
    pub id: String,
    /// `PROVIDER:MODEL`.
    pub model: String,
    /// The workspace.
    pub cwd: String,
    /// The log itself.
    pub log: Link,
    /// Model calls.
    pub calls: u64,
    /// The largest context the provider reported, in tokens.
    pub peak_tokens: u64,
    /// The window drawn.
    pub window_tokens: Option<u64>,
    /// Estimated cost in dollars.
    pub cost_usd: f64,
    /// Context tokens per call, an SVG element.
    pub context_svg: String,
    /// Cost so far per call, an SVG element.
    pub cost_svg: String,
    /// Compactions, in order.
    pub compactions: Vec<CompactionView>,
    /// Failed compaction steps.
    pub failures: Vec<FailureView>,
    /// Tool outputs saved in the store as they arrived.
    pub saved_outputs: Vec<Link>,
    /// Checkpoints of the workspace's files, in order.
    pub checkpoints: Vec<CheckpointView>,
}

/// Reads the session log at `log` into page data whose links are relative
/// to `page_dir` (the folder the page will be written to). A last line cut
/// by a crash is ignored, as when resuming.
pub fn session_view(
    log: &Path,
    page_dir: &Path,
    options: &SessionOptions,
    anchor: String,
) -> Result<SessionView, ReportError> {
    let text = std::fs::read_to_string(log).map_err(|source| {
        ReportError::Session(whittle_context::session::SessionError::Io {
            path: log.to_path_buf(),
            source,
        })
    })?;
    let log = std::path::absolute(log).unwrap_or_else(|_| log.to_path_buf());
    // Logs live in ROOT/sessions/; the files they name are under ROOT.
    let root = log
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let records: Vec<SessionRecord> = parse_records(&log, &text)?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let Some(SessionRecord::Session { id, model, cwd, .. }) = records.first() else {
        return Err(
            whittle_context::session::SessionError::NotASession { path: log.clone() }.into(),
        );
    };
    let spec = model.parse::<ModelSpec>().ok();
    let prices = options.prices.unwrap_or_else(|| {
        spec.as_ref()
            .map_or_else(Prices::default, |s| Prices::for_provider(s.provider))
    });
    let window = options
        .window_tokens
        .or_else(|| spec.as_ref().map(|s| model_facts(&s.model).context_window));
    let link = |p: &Path| Link::to(&root, p, page_dir);

    let mut tokens: Vec<u64> = Vec::new();
    let mut dollars: Vec<f64> = Vec::new();
    let mut spent = 0.0;
    let mut history_len = 0usize;
    let mut compactions = Vec::new();
    let mut failures = Vec::new();
    let mut saved_outputs = Vec::new();
    let mut checkpoints = Vec::new();
    for record in &records[1..] {
        let calls = tokens.len() as u64;
        match record {
            SessionRecord::Message { refs, .. } => {
                history_len += 1;
                saved_outputs.extend(refs.iter().map(|r: &OutputRef| link(&r.path)));
            }
            SessionRecord::Compaction {
                step,
                trigger,
                before,
                after,
                unit,
                paths,
                from,
                keep_last,
                messages,
                refs,
                ..
            } => {
                let removed = history_len.saturating_sub(from + keep_last);
                history_len = from + messages.len() + keep_last;
                let mut links: Vec<Link> = paths.iter().map(|p| link(p)).collect();
                for r in refs {
                    let l = link(&r.path);
                    if !links.contains(&l) {
                        links.push(l);
                    }
                }
                compactions.push(CompactionView {
                    call: calls,
                    marked: false,
                    step: step.clone(),
                    kind: step.split('+').next().unwrap_or_default().to_string(),
                    trigger: trigger.clone(),
                    before: *before,
                    after: *after,
                    unit: unit.clone(),
                    removed_messages: removed,
                    replaced_by: messages.len(),
                    links,
                });
            }
            SessionRecord::CompactionFailed { step, reason, .. } => failures.push(FailureView {
                call: calls,
                step: step.clone(),
                reason: whittle_protocol::collapse_whitespace(reason),
            }),
            SessionRecord::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
            } => {
                tokens.push(*input_tokens);
                let uncached = input_tokens.saturating_sub(cache_read_tokens + cache_write_tokens);
                spent += prices.cost_usd(
                    uncached,
                    *cache_read_tokens,
                    *cache_write_tokens,
                    0,
                    *output_tokens,
                );
                dollars.push(spent);
            }
            SessionRecord::Clear => history_len = 0,
            SessionRecord::Checkpoint {
                id,
                tool_call_id,
                files_changed,
                insertions,
                deletions,
                note,
                ..
            } => checkpoints.push(CheckpointView {
                call: calls,
                id: id.clone(),
                tool_call_id: tool_call_id.clone(),
                files_changed: *files_changed,
                insertions: *insertions,
                deletions: *deletions,
                note: note.clone(),
            }),
            _ => {}
        }
    }
    let calls = tokens.len() as u64;
    for c in &mut compactions {
        c.marked = c.call < calls;
    }
    let markers: Vec<Marker> = compactions
        .iter()
        .filter(|c| c.marked)
        .map(|c| Marker {
            call: c.call,
            step: c.kind.clone(),
            label: format!(
                "before call {}: {} ({}) {} -> {} {}",
                c.call, c.step, c.trigger, c.before, c.after, c.unit
            ),
        })
        .collect();
    let peak_tokens = tokens.iter().copied().max().unwrap_or(0);
    let context_svg = context_chart(&ContextCurve {
        name: id,
        tokens: &tokens,
        window,
        limit: options.limit_tokens,
        markers: &markers,
        y_max: peak_tokens,
    })?;
    let cost_svg = cumulative_cost(id, &dollars)?;
    Ok(SessionView {
        anchor,
        id: id.clone(),
        model: model.clone(),
        cwd: cwd.clone(),
        log: link(&log),
        calls,
        peak_tokens,
        window_tokens: window,
        cost_usd: spent,
        context_svg,
        cost_svg,
        compactions,
        failures,
        saved_outputs,
        checkpoints,
    })
}
