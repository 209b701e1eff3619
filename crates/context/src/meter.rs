//! How big a context is: in characters (exact, the seed's unit) or in tokens
//! (the provider's last count plus an estimate for what was added since).

use crate::history::History;

/// The unit a meter measures in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Characters of the history's compact JSON.
    Chars,
    /// Model tokens (estimated between provider reports).
    Tokens,
}

impl Unit {
    /// Short name for reports ("chars", "tokens").
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Chars => "chars",
            Unit::Tokens => "tokens",
        }
    }
}

/// Measures a history. Implementations must be O(1) or close: the pipeline
/// measures after every edit.
pub trait Meter {
    /// The size of the history (plus any fixed overhead the meter knows of).
    fn measure(&self, history: &History) -> u64;
    /// Converts a number of characters to this meter's unit.
    fn chars_to_units(&self, chars: usize) -> u64;
    /// The unit of every size this meter returns; reports carry it, since a
    /// size in tokens and one in characters differ about fourfold.
    fn unit(&self) -> Unit;
    /// Learns from the provider's count of input tokens for a request made
    /// from `history` as it is now. Meters that do not calibrate ignore it.
    fn observe(&mut self, history: &History, input_tokens: u64) {
        let _ = (history, input_tokens);
    }
    /// Sets the size of what every request carries besides the messages
    /// (system prompt, tool definitions). Meters that ignore it may.
    fn set_overhead_chars(&mut self, chars: usize) {
        let _ = chars;
    }
}

/// The seed's measure: characters of the messages' JSON, exact.
#[derive(Clone, Copy, Debug, Default)]
pub struct CharMeter;

impl Meter for CharMeter {
    fn measure(&self, history: &History) -> u64 {
        history.chars() as u64
    }
    fn chars_to_units(&self, chars: usize) -> u64 {
        chars as u64
    }
    fn unit(&self) -> Unit {
        Unit::Chars
    }
}

/// Tokens, calibrated on what the provider reports.
///
/// After a model call the provider says how many input tokens the request
/// had; [`TokenMeter::observe`] records that together with the history's
/// size at the time. Until the history is edited (anything but appends),
/// `measure` is that count plus an estimate for the characters appended since;
/// after an edit it estimates everything from characters. The chars-per-token
/// ratio is recalibrated from each observation.
#[derive(Clone, Debug)]
pub struct TokenMeter {
    /// Characters of what is sent besides the messages (system prompt, tools).
    overhead_chars: usize,
    chars_per_token: f64,
    observed: Option<Observation>,
}

#[derive(Clone, Copy, Debug)]
struct Observation {
    epoch: u64,
    len: usize,
    chars: usize,
    tokens: u64,
}

impl Default for TokenMeter {
    fn default() -> Self {
        TokenMeter::new(Self::DEFAULT_CHARS_PER_TOKEN)
    }
}

impl TokenMeter {
    /// The ratio assumed before any observation; ~4 for English and code.
    pub const DEFAULT_CHARS_PER_TOKEN: f64 = 4.0;

    /// A meter that assumes `chars_per_token` until it observes real counts.
    pub fn new(chars_per_token: f64) -> Self {
        TokenMeter {
            overhead_chars: 0,
            chars_per_token: sane_ratio(chars_per_token),
            observed: None,
        }
    }

    /// The current chars-per-token ratio.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }

    /// Forgets the last observation (e.g. after switching models).
    pub fn reset(&mut self) {
        self.observed = None;
    }

    fn estimate(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }
}

/// Keeps a calibrated ratio within what real tokenizers produce, so that one
/// odd report (e.g. an image-heavy request) cannot make the meter absurd.
fn sane_ratio(r: f64) -> f64 {
    if r.is_finite() {
        r.clamp(1.0, 8.0)
    } else {
        TokenMeter::DEFAULT_CHARS_PER_TOKEN
    }
}

impl Meter for TokenMeter {
    fn measure(&self, history: &History) -> u64 {
        match self.observed {
            Some(o)
                if o.epoch == history.epoch()
                    && history.len() >= o.len
                    && history.chars() >= o.chars =>
            {
                o.tokens
                    .saturating_add(self.estimate(history.chars() - o.chars))
            }
            _ => self.estimate(history.chars() + self.overhead_chars),
        }
    }
    fn chars_to_units(&self, chars: usize) -> u64 {
        self.estimate(chars)
    }
    fn unit(&self) -> Unit {
        Unit::Tokens
    }
    fn observe(&mut self, history: &History, input_tokens: u64) {
        if input_tokens == 0 {
            return;
        }
        let chars = history.chars();
        self.chars_per_token =
            sane_ratio((chars + self.overhead_chars) as f64 / input_tokens as f64);
        self.observed = Some(Observation {
            epoch: history.epoch(),
            len: history.len(),
            chars,
            tokens: input_tokens,
        });
    }
    fn set_overhead_chars(&mut self, chars: usize) {
        self.overhead_chars = chars;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    #[test]
    fn token_meter_adds_estimate_to_last_report_until_an_edit() {
        let mut h = History::new(vec![Message::user("x".repeat(4000))]);
        let mut m = TokenMeter::default();
        assert_eq!(m.measure(&h), (h.chars() as f64 / 4.0).ceil() as u64);
        m.observe(&h, 2000); // the provider says 2000: ratio ≈ 2
        assert_eq!(m.measure(&h), 2000);
        h.push(Message::assistant("y".repeat(400)));
        let added = h.chars_from(1);
        assert_eq!(
            m.measure(&h),
            2000 + (added as f64 / m.chars_per_token()).ceil() as u64
        );
        h.pop();
        assert_eq!(
            m.measure(&h),
            (h.chars() as f64 / m.chars_per_token()).ceil() as u64
        );
    }

    #[test]
    fn absurd_reports_do_not_break_the_ratio() {
        let h = History::new(vec![Message::user("x")]);
        let mut m = TokenMeter::default();
        m.observe(&h, 1_000_000);
        assert!(m.chars_per_token() >= 1.0);
        m.observe(&h, 0);
        assert!(m.measure(&h) > 0);
    }
}
