//! Secret values out of everything whittle writes: the second line of
//! defence behind keeping them out of tool processes' environments. A key
//! that still reaches a tool's output (read from a file, say) becomes
//! `[REDACTED]` before it enters the history, a session log or a saved
//! output.

use aho_corasick::{AhoCorasick, MatchKind};
use std::borrow::Cow;
use std::sync::Arc;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not secrets worth the damage of replacing
/// every occurrence of them in ordinary text.
pub const MIN_SECRET_LEN: usize = 8;

/// Replaces known secret values. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    inner: Option<Arc<Matcher>>,
}

#[derive(Debug)]
struct Matcher {
    automaton: AhoCorasick,
    /// The longest secret, in bytes: how much a stream holds back.
    longest: usize,
}

impl Redactor {
    /// A redactor for `secrets`; empty ones and ones shorter than
    /// [`MIN_SECRET_LEN`] are ignored.
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Redactor {
        let mut values: Vec<String> = secrets
            .into_iter()
            .map(|s| s.as_ref().trim().to_owned())
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        values.sort();
        values.dedup();
        let longest = values.iter().map(String::len).max().unwrap_or(0);
        let inner = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&values)
            .ok()
            .filter(|_| !values.is_empty())
            .map(|automaton| Arc::new(Matcher { automaton, longest }));
        Redactor { inner }
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.inner {
            Some(m) if m.automaton.is_match(text) => {
                let mut out = String::with_capacity(text.len());
                m.automaton.replace_all_with(text, &mut out, |_, _, dst| {
                    dst.push_str(REDACTED);
                    true
                });
                Cow::Owned(out)
            }
            _ => Cow::Borrowed(text),
        }
    }

    /// A redactor for output that arrives in pieces of bytes (not always
    /// UTF-8, cut anywhere): a secret cut in two by a piece boundary is
    /// still found.
    pub fn stream(&self) -> RedactStream {
        RedactStream {
            redactor: self.clone(),
            pending: Vec::new(),
        }
    }
}

/// Redacts bytes fed piece by piece; what it returns, concatenated with
/// [`RedactStream::finish`], equals [`Redactor::redact`] of the whole.
#[derive(Debug)]
pub struct RedactStream {
    redactor: Redactor,
    pending: Vec<u8>,
}

impl RedactStream {
    /// Takes the next piece; returns the bytes that can be written now. It
    /// holds back at most the longest secret's length less one byte.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        let Some(m) = self.redactor.inner.clone() else {
            return piece.to_vec();
        };
        self.pending.extend_from_slice(piece);
        let cut = self
            .pending
            .len()
            .saturating_sub(m.longest.saturating_sub(1));
        // A match starting before `cut` is final: every longer candidate
        // from the same start would end inside what is already here.
        let mut out = Vec::with_capacity(self.pending.len());
        let mut done = 0;
        for found in m.automaton.find_iter(&self.pending) {
            if found.start() >= cut {
                break;
            }
            out.extend_from_slice(&self.pending[done..found.start()]);
            out.extend_from_slice(REDACTED.as_bytes());
            done = found.end();
        }
        let keep_from = done.max(cut);
        out.extend_from_slice(&self.pending[done..keep_from]);
        self.pending.drain(..keep_from);
        out
    }

    /// Whatever was held back, redacted.
    pub fn finish(self) -> Vec<u8> {
        let Some(m) = &self.redactor.inner else {
            return self.pending;
        };
        let mut out = Vec::with_capacity(self.pending.len());
        let mut done = 0;
        for found in m.automaton.find_iter(&self.pending) {
            out.extend_from_slice(&self.pending[done..found.start()]);
            out.extend_from_slice(REDACTED.as_bytes());
            done = found.end();
        }
        out.extend_from_slice(&self.pending[done..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn secrets_are_replaced_and_short_values_are_not_secrets() {
        let r = Redactor::new(["sk-ant-123456789", "  ", "abc", "sk-ant-1234567890-longer"]);
        assert_eq!(
            r.redact("key=sk-ant-1234567890-longer and sk-ant-123456789!"),
            "key=[REDACTED] and [REDACTED]!"
        );
        assert!(matches!(r.redact("abc abc"), Cow::Borrowed(_)));
        assert!(Redactor::new(["", "short"]).is_empty());
        assert_eq!(Redactor::default().redact("anything"), "anything");
    }

    #[test]
    fn a_secret_cut_between_pieces_is_found() {
        let r = Redactor::new(["SECRET-VALUE-42"]);
        let mut s = r.stream();
        let mut out = s.push(b"before SECRET-");
        out.extend(s.push(b"VAL"));
        out.extend(s.push(b"UE-42 after \xff"));
        out.extend(s.finish());
        assert_eq!(out, b"before [REDACTED] after \xff");
    }

    proptest! {
        #[test]
        fn streaming_equals_redacting_the_whole(
            secrets in proptest::collection::vec("[ab]{8,12}", 1..4),
            text in "[ab é]{0,80}",
            cuts in proptest::collection::vec(0usize..80, 0..6),
        ) {
            let r = Redactor::new(&secrets);
            let whole = format!("{text}{}{text}", secrets[0]);
            // Cut anywhere, even inside a character.
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(whole.len())).collect();
            bounds.sort();
            let bytes = whole.as_bytes();
            let mut s = r.stream();
            let mut out = Vec::new();
            let mut from = 0;
            for b in bounds {
                out.extend(s.push(&bytes[from..b]));
                from = b;
            }
            out.extend(s.push(&bytes[from..]));
            out.extend(s.finish());
            let expected = r.redact(&whole).into_owned();
            prop_assert_eq!(String::from_utf8(out).unwrap(), expected.clone());
            prop_assert!(!expected.contains(&secrets[0]));
        }
    }
}
