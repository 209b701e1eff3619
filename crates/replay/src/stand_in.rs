//! The stated stand-in for the summarizer: replay needs no model, and its
//! numbers are reproducible, because every summary has the same size: its
//! own, or less when the compaction asks for less (beside a system prompt
//! that leaves little room; a model is told the same in its request, and
//! bounded by it).
//!
//! It names the size of what it summarized, so two summaries of different
//! histories differ in their first line, as a model's would: a summary
//! that came out the same every time would let the prompt cache read a
//! new compaction marker as the old one, and make compacting on every
//! call look nearly free.

use whittle_context::{SummarizeError, Summarizer, SummaryInput};

/// A summarizer for replay that returns a fixed-size text naming the size
/// of its input, so that numbers are reproducible and no model is needed.
#[derive(Clone, Debug)]
pub struct StandInSummarizer {
    /// Characters of every summary the compaction lets be this long.
    pub summary_chars: usize,
}

impl Default for StandInSummarizer {
    fn default() -> Self {
        StandInSummarizer {
            summary_chars: whittle_context::SUMMARY_CHARS,
        }
    }
}

impl Summarizer for StandInSummarizer {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        _ledger: &str,
        max_chars: usize,
    ) -> Result<String, SummarizeError> {
        let chars = self.summary_chars.min(max_chars);
        let mut s = format!(
            "Stand-in summary of {} characters of conversation",
            input.chars()
        );
        if let Some(f) = focus {
            s.push_str(" (focus: ");
            s.push_str(f);
            s.push(')');
        }
        s.push_str(". ");
        // Counted once, then by what is added: the summary is made on every
        // compaction, inside the pipeline's measured time.
        // The filler is ASCII: one character a byte.
        const FILLER: &str = "Goal, decisions, files, remaining work. ";
        let count = s.chars().count();
        let fillers = chars.saturating_sub(count).div_ceil(FILLER.len());
        s.reserve(fillers * FILLER.len());
        for _ in 0..fillers {
            s.push_str(FILLER);
        }
        // A focus may hold any text: cut at a character, not a byte.
        let cut = if s.is_ascii() {
            chars.min(s.len())
        } else {
            s.char_indices().nth(chars).map_or(s.len(), |(at, _)| at)
        };
        s.truncate(cut);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_its_own_size_or_the_budget_if_smaller() {
        let mut stand_in = StandInSummarizer::default();
        let input = SummaryInput::Transcript("x");
        let full = stand_in.summarize(input, None, "", usize::MAX).unwrap();
        assert_eq!(full.chars().count(), stand_in.summary_chars);
        let focus = Some("é".repeat(700));
        let small = stand_in
            .summarize(input, focus.as_deref(), "", 1_000)
            .unwrap();
        assert_eq!(small.chars().count(), 1_000);
    }

    /// The summary as it was made before it was made faster: filler added
    /// and counted one at a time, cut at a character.
    fn summary_by_filler(input: &str, focus: Option<&str>, chars: usize) -> String {
        let mut s = format!(
            "Stand-in summary of {} characters of conversation",
            input.chars().count()
        );
        if let Some(f) = focus {
            s.push_str(&format!(" (focus: {f})"));
        }
        s.push_str(". ");
        while s.chars().count() < chars {
            s.push_str("Goal, decisions, files, remaining work. ");
        }
        let cut = s.char_indices().nth(chars).map_or(s.len(), |(at, _)| at);
        s.truncate(cut);
        s
    }

    proptest::proptest! {
        #[test]
        fn a_summary_is_what_adding_filler_one_at_a_time_made(
            focus in proptest::option::of("(\\PC|é){0,80}"),
            max_chars in 0usize..3_000,
        ) {
            let mut stand_in = StandInSummarizer::default();
            let input = SummaryInput::Transcript("some transcript");
            let got = stand_in.summarize(input, focus.as_deref(), "", max_chars).unwrap();
            let chars = stand_in.summary_chars.min(max_chars);
            proptest::prop_assert_eq!(got, summary_by_filler("some transcript", focus.as_deref(), chars));
        }
    }
}
