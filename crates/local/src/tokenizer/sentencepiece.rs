//! `llama`: SentencePiece BPE. Spaces become `▁`, the adjacent pair whose joined text is
//! the best-scored token merges first, and what no token covers falls back to byte tokens.

use super::vocabulary::{SpecialIds, TokenKind, parse_byte_token};
use super::{Model, Tokenizer};
use crate::error::LocalError;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// SentencePiece's visible space.
pub(super) const SPM_SPACE: char = '\u{2581}';

impl Tokenizer {
    /// A SentencePiece tokenizer: normal tokens store `▁` for spaces, bytes are
    /// `<0xNN>` tokens.
    pub(super) fn build_spm(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        scores: Vec<f32>,
        add_space_prefix: bool,
        specials: SpecialIds,
    ) -> Result<Self, LocalError> {
        let mut vocab = HashMap::with_capacity(tokens.len());
        let mut token_bytes = Vec::with_capacity(tokens.len());
        let mut byte_tokens = [None; 256];
        for (i, (tok, kind)) in tokens.iter().zip(&kinds).enumerate() {
            vocab.entry(tok.clone()).or_insert(i as u32);
            let bytes = match kind {
                TokenKind::Byte => match parse_byte_token(tok) {
                    Some(b) => {
                        byte_tokens[usize::from(b)].get_or_insert(i as u32);
                        vec![b]
                    }
                    None => tok.as_bytes().to_vec(),
                },
                TokenKind::Normal => tok.replace(SPM_SPACE, " ").into_bytes(),
                _ => tok.as_bytes().to_vec(),
            };
            token_bytes.push(bytes);
        }
        let model = Model::Spm {
            scores,
            add_space_prefix,
        };
        Self::finish(
            tokens,
            token_bytes,
            kinds,
            vocab,
            model,
            byte_tokens,
            specials,
        )
    }

    /// SentencePiece BPE over the characters of `text` (spaces already `▁`): the
    /// adjacent pair whose joined text is the best-scored token merges first,
    /// leftmost on ties; characters no token covers become byte tokens.
    pub(super) fn spm(
        &self,
        text: &str,
        scores: &[f32],
        out: &mut Vec<u32>,
    ) -> Result<(), LocalError> {
        let mut symbols: Vec<SpmSymbol> = Vec::new();
        for (start, c) in text.char_indices() {
            let i = symbols.len();
            symbols.push(SpmSymbol {
                start,
                end: start + c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if let Some(p) = i.checked_sub(1) {
                symbols[p].next = Some(i);
            }
        }
        let mut queue = BinaryHeap::new();
        let bigram = |symbols: &[SpmSymbol], left: usize, right: usize| -> Option<SpmMerge> {
            let (l, r) = (&symbols[left], &symbols[right]);
            let id = *self.vocab.get(text.get(l.start..r.end)?)?;
            Some(SpmMerge {
                score: *scores.get(id as usize)?,
                left,
                right,
                len: r.end - l.start,
            })
        };
        for i in 1..symbols.len() {
            queue.extend(bigram(&symbols, i - 1, i));
        }
        while let Some(m) = queue.pop() {
            let (l, r) = (&symbols[m.left], &symbols[m.right]);
            // Stale: one side merged since this pair was queued.
            if l.next != Some(m.right) || r.end - l.start != m.len {
                continue;
            }
            let after = r.next;
            symbols[m.left].end = symbols[m.right].end;
            symbols[m.left].next = after;
            symbols[m.right].start = symbols[m.right].end;
            if let Some(a) = after {
                symbols[a].prev = Some(m.left);
                queue.extend(bigram(&symbols, m.left, a));
            }
            if let Some(p) = symbols[m.left].prev {
                queue.extend(bigram(&symbols, p, m.left));
            }
        }
        let mut at = (!symbols.is_empty()).then_some(0);
        while let Some(i) = at {
            let piece = &text[symbols[i].start..symbols[i].end];
            match self.vocab.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for b in piece.bytes() {
                        match self.byte_tokens[usize::from(b)].or(self.unknown) {
                            Some(id) => out.push(id),
                            None => {
                                return Err(LocalError::Tokenizer(format!(
                                    "byte 0x{b:02x} has no token and the vocabulary has no unknown token"
                                )));
                            }
                        }
                    }
                }
            }
            at = symbols[i].next;
        }
        Ok(())
    }
}

/// A run of `text[start..end]` in the SentencePiece merge list.
struct SpmSymbol {
    start: usize,
    end: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct SpmMerge {
    score: f32,
    left: usize,
    right: usize,
    /// The joined length when queued, to spot stale entries.
    len: usize,
}

impl PartialEq for SpmMerge {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SpmMerge {}

impl Ord for SpmMerge {
    /// `BinaryHeap` pops the highest score, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for SpmMerge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SentencePiece vocabulary: specials, 256 byte tokens, words scored so
    /// that "hello world" merges to two tokens.
    fn tiny_spm(add_space_prefix: bool) -> Tokenizer {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        let mut kinds = vec![TokenKind::Unknown, TokenKind::Control, TokenKind::Control];
        let mut scores = vec![0.0; 3];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            kinds.push(TokenKind::Byte);
            scores.push(0.0);
        }
        let words = [
            "\u{2581}",
            "h",
            "e",
            "l",
            "o",
            "w",
            "r",
            "d",
            "he",
            "ll",
            "\u{2581}w",
            "or",
            "hell",
            "\u{2581}wor",
            "hello",
            "\u{2581}worl",
            "\u{2581}world",
            "\u{2581}hello",
        ];
        for (i, w) in words.iter().enumerate() {
            tokens.push((*w).to_string());
            kinds.push(TokenKind::Normal);
            scores.push(-(i as f32));
        }
        let specials = SpecialIds {
            bos: Some(1),
            eos: Some(2),
            eot: None,
            unknown: Some(0),
            add_bos: true,
        };
        Tokenizer::build_spm(tokens, kinds, scores, add_space_prefix, specials).unwrap()
    }

    fn token_strs(t: &Tokenizer, text: &str) -> Vec<String> {
        let ids = t.encode(text).unwrap();
        ids.iter()
            .map(|i| t.token(*i).unwrap().to_string())
            .collect()
    }

    #[test]
    fn sentencepiece_merges_by_score_and_falls_back_to_bytes() {
        let t = tiny_spm(true);
        assert_eq!(
            token_strs(&t, "hello world"),
            ["\u{2581}hello", "\u{2581}world"]
        );
        // After a special token the space prefix comes back.
        assert_eq!(token_strs(&t, "<s>hello"), ["<s>", "\u{2581}hello"]);
        // Characters no token covers become their UTF-8 bytes.
        assert_eq!(token_strs(&t, "hé"), ["\u{2581}", "h", "<0xC3>", "<0xA9>"]);
        for text in ["hello world", "héllo\nwörld 🦀", "  two  spaces"] {
            let ids = t.encode(text).unwrap();
            assert_eq!(t.decode(&ids), format!(" {text}"));
            let mut stream = t.stream();
            let mut shown: String = ids.iter().map(|&id| stream.push(id)).collect();
            shown.push_str(&stream.finish());
            assert_eq!(shown, text, "the leading space is not shown");
        }
        let plain = tiny_spm(false);
        assert_eq!(token_strs(&plain, "hello"), ["hello"]);
        assert!(plain.adds_bos());
    }
}
