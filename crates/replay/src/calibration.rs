//! How one recording's characters become tokens, and how big the part of
//! every request that is not the conversation (system prompt, tools,
//! injected reminders) was: learned from the usage the provider billed, as
//! the live `TokenMeter` learns from each response.

use crate::import::Conversation;
use crate::policy::ReplayConfig;
use serde::Serialize;
use whittle_context::History;
use whittle_protocol::Role;

/// How a conversation's requests were measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measured {
    /// Rebuilt exactly from the agent's log of what it sent (`api-request`).
    Exact,
    /// Messages from the log; the rest of each request estimated from the
    /// billed usage (a line through every call's input tokens).
    Estimated,
    /// No billed usage: characters over the configured ratio, no overhead
    /// but the system prompt.
    #[default]
    Assumed,
}

/// What replay assumes about one conversation's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// How the requests were measured.
    pub measured: Measured,
    /// Characters per token.
    pub chars_per_token: f64,
    /// Characters every request carries besides the system text and the
    /// messages (tool definitions, injected context), as a prefix.
    pub overhead_chars: usize,
}

/// The history size before each call, for the requests as the recording
/// agent made them: the conversation up to the call, restarted at each of
/// the agent's own compactions. `(answer index, history characters)`.
pub(crate) fn history_before_calls(c: &Conversation) -> Vec<(usize, usize)> {
    let restarts: Vec<usize> = c.compaction_boundaries.iter().map(|b| b.index).collect();
    let mut history = History::default();
    let mut out = Vec::new();
    let mut answered = true;
    for (i, m) in c.messages.iter().enumerate() {
        if restarts.contains(&i) {
            history = History::default();
        }
        if m.role() == Role::Assistant && !history.is_empty() && answered {
            out.push((i, history.chars()));
        }
        answered = m.role() == Role::User;
        history.push(m.clone());
    }
    out
}

/// Calibrates `c` from its recorded calls; see [`Measured`].
pub fn calibrate(c: &Conversation, config: &ReplayConfig) -> Calibration {
    let assumed = Calibration {
        measured: Measured::Assumed,
        chars_per_token: config.chars_per_token,
        overhead_chars: 0,
    };
    let system_chars = c.system.as_deref().map_or(0, |s| s.chars().count());
    let before = history_before_calls(c);
    let history_at = |index: usize| {
        before
            .binary_search_by_key(&index, |(i, _)| *i)
            .ok()
            .map(|k| before[k].1)
    };
    // (history chars, request chars if exact, billed input tokens)
    let points: Vec<(usize, Option<usize>, u64)> = c
        .calls
        .iter()
        .filter_map(|call| {
            let tokens = call.usage?.total_input();
            let chars = history_at(call.message)?;
            let exact = call
                .request
                .as_ref()
                .map(|blocks| blocks.iter().map(|b| b.chars).sum());
            (tokens > 0).then_some((chars + system_chars, exact, tokens))
        })
        .collect();
    if points.is_empty() {
        return assumed;
    }
    if points.iter().all(|(_, exact, _)| exact.is_some()) {
        let chars: usize = points.iter().filter_map(|(_, e, _)| *e).sum();
        let tokens: u64 = points.iter().map(|(_, _, t)| t).sum();
        let ratio = sane(chars as f64 / tokens as f64).unwrap_or(config.chars_per_token);
        let (history, exact, _) = points[0];
        return Calibration {
            measured: Measured::Exact,
            chars_per_token: ratio,
            overhead_chars: exact.unwrap_or(0).saturating_sub(history),
        };
    }
    // The first call's tokens beyond its messages are the overhead; the
    // growth after it gives the ratio: tokens_i - tokens_0 = (chars_i - chars_0) / ratio.
    let (c0, _, t0) = points[0];
    let grown_chars: f64 = points.iter().map(|p| p.0 as f64 - c0 as f64).sum();
    let grown_tokens: f64 = points.iter().map(|p| p.2 as f64 - t0 as f64).sum();
    if grown_chars > 0.0 && grown_tokens <= 0.0 {
        // The conversation grew and the bill did not: the usage is not of
        // these requests (hand-written, or another agent's numbers).
        return assumed;
    }
    let ratio = (grown_tokens > 0.0)
        .then(|| grown_chars / grown_tokens)
        .and_then(sane)
        .unwrap_or(config.chars_per_token);
    let overhead_tokens = (t0 as f64 - c0 as f64 / ratio).max(0.0);
    Calibration {
        measured: Measured::Estimated,
        chars_per_token: ratio,
        overhead_chars: (overhead_tokens * ratio).round() as usize,
    }
}

/// A ratio real tokenizers produce, or none.
fn sane(ratio: f64) -> Option<f64> {
    (ratio.is_finite() && (1.0..=8.0).contains(&ratio)).then_some(ratio)
}
