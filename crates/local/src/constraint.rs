//! The tool-call grammar applied to sampling: which tokens the model may write next.
//!
//! Checking all 49k tokens of a vocabulary at every step would cost more than the step
//! itself, so, as llama.cpp does, the likeliest candidates are checked first and the whole
//! vocabulary only when none of them fits. Sampling then draws from the candidates that
//! fit, with their own logits.

use crate::grammar::{CallState, ToolCallGrammar};
use crate::tokenizer::Tokenizer;
use crate::tools::TOOL_CALL_OPEN;

/// Candidates checked before the whole vocabulary is.
const CANDIDATES: usize = 64;

/// Constrains the tool calls in one reply.
pub(crate) struct CallConstraint {
    grammar: ToolCallGrammar,
    /// Inside a call: where it stands.
    state: Option<CallState>,
    /// Outside a call: the text since the last call, to spot `<tool_call>`.
    text: String,
    /// A call was completed (the reply should end) or the constraint gave up.
    finished: bool,
}

impl CallConstraint {
    /// The reply must be a tool call from its first token.
    pub(crate) fn forced(grammar: ToolCallGrammar) -> Self {
        CallConstraint {
            state: Some(grammar.start()),
            grammar,
            text: String::new(),
            finished: false,
        }
    }

    /// The reply is free until the model opens a call; the call itself is constrained.
    pub(crate) fn on_open(grammar: ToolCallGrammar) -> Self {
        CallConstraint {
            grammar,
            state: None,
            text: String::new(),
            finished: false,
        }
    }

    /// Whether a call was completed: nothing should follow it.
    pub(crate) fn call_complete(&self) -> bool {
        self.finished && self.state.as_ref().is_some_and(CallState::is_complete)
    }

    /// Sets every token that cannot continue the call to -∞ (nothing, outside a call).
    pub(crate) fn mask(&mut self, logits: &mut [f32], tokenizer: &Tokenizer) {
        let Some(state) = self.state.as_ref().filter(|_| !self.finished) else {
            return;
        };
        let fits = |id: usize| {
            tokenizer
                .piece(id as u32)
                .is_some_and(|piece| state.accepts(piece))
        };
        let mut order: Vec<usize> = (0..logits.len()).filter(|&i| !logits[i].is_nan()).collect();
        let k = CANDIDATES.min(order.len());
        if k > 0 && k < order.len() {
            order.select_nth_unstable_by(k - 1, |a, b| logits[*b].total_cmp(&logits[*a]));
        }
        let mut allowed: Vec<usize> = order[..k].iter().copied().filter(|&i| fits(i)).collect();
        if allowed.is_empty() {
            allowed = (0..logits.len()).filter(|&i| fits(i)).collect();
        }
        if allowed.is_empty() {
            // No token continues the call (a vocabulary without the characters): the
            // reply goes on unconstrained rather than not at all.
            self.finished = true;
            self.state = None;
            return;
        }
        let kept: Vec<(usize, f32)> = allowed.iter().map(|&i| (i, logits[i])).collect();
        logits.fill(f32::NEG_INFINITY);
        for (i, l) in kept {
            // A fitting token the model finds unthinkable still beats the masked ones.
            logits[i] = if l.is_finite() { l } else { f32::MIN };
        }
    }

    /// Takes the token the sampler chose.
    pub(crate) fn advance(&mut self, id: u32, tokenizer: &Tokenizer) {
        if self.finished {
            return;
        }
        let piece = tokenizer.piece(id).unwrap_or_default();
        match self.state.as_mut() {
            Some(state) => {
                if !state.feed(piece) {
                    self.finished = true;
                    self.state = None;
                } else if state.is_complete() {
                    self.finished = true;
                }
            }
            None => {
                self.text.push_str(piece);
                if let Some(at) = self.text.find(TOOL_CALL_OPEN) {
                    let rest = self.text[at + TOOL_CALL_OPEN.len()..].to_string();
                    let mut state = self.grammar.after_open();
                    if state.feed(&rest) {
                        self.state = Some(state);
                    } else {
                        self.finished = true;
                    }
                    self.text.clear();
                } else if self.text.len() > 64 {
                    // Only a possible start of `<tool_call>` needs keeping.
                    let cut = self.text.len() - TOOL_CALL_OPEN.len();
                    let cut = (cut..self.text.len())
                        .find(|&i| self.text.is_char_boundary(i))
                        .unwrap_or(self.text.len());
                    self.text.drain(..cut);
                }
            }
        }
    }
}
