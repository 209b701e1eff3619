//! The stated stand-in for the summarizer: replay needs no model, and its
//! numbers are reproducible, because every summary has the same size.

use whittle_context::{SummarizeError, Summarizer, SummaryInput};

/// A summarizer for replay that returns a fixed-size text, so that numbers
/// are reproducible and no model is needed.
#[derive(Clone, Debug)]
pub struct StandInSummarizer {
    /// Characters of every summary.
    pub summary_chars: usize,
}

impl Default for StandInSummarizer {
    fn default() -> Self {
        StandInSummarizer {
            summary_chars: 2_000,
        }
    }
}

impl Summarizer for StandInSummarizer {
    fn summarize(
        &mut self,
        _: SummaryInput<'_>,
        focus: Option<&str>,
        _ledger: &str,
    ) -> Result<String, SummarizeError> {
        let mut s = String::from("Stand-in summary of the conversation so far");
        if let Some(f) = focus {
            s.push_str(" (focus: ");
            s.push_str(f);
            s.push(')');
        }
        s.push_str(". ");
        while s.len() < self.summary_chars {
            s.push_str("Goal, decisions, files, remaining work. ");
        }
        s.truncate(self.summary_chars);
        Ok(s)
    }
}
