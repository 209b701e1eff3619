//! The tokenizer, built from the GGUF's own `tokenizer.ggml.*` metadata so a model file
//! is all the engine needs.
//!
//! Two tokenizer models: `gpt2` (byte-level BPE with merges, as in SmolLM2, Qwen2 and
//! Llama 3) and `llama` (SentencePiece BPE by token scores with byte fallback, as in
//! Llama 2, Mistral and TinyLlama). Control and user-defined tokens (`<|im_start|>`, `<tool_call>`) are
//! matched literally in the text before BPE, so a rendered chat template encodes them as
//! single tokens. Decoding streams: bytes of a UTF-8 character split across tokens are held
//! back until the character is complete.

mod decode;
mod gpt2;
mod sentencepiece;
mod vocabulary;

use crate::error::LocalError;
use fancy_regex::Regex;
use std::collections::HashMap;

pub use decode::TextStream;
use gpt2::split_keeping_gaps;
use sentencepiece::SPM_SPACE;
pub use vocabulary::TokenKind;

/// A tokenizer read from GGUF metadata: byte-level BPE (`gpt2`) or SentencePiece (`llama`).
#[derive(Debug)]
pub struct Tokenizer {
    /// Token strings as stored in the file (byte-level form for normal tokens).
    tokens: Vec<String>,
    /// What each token decodes to.
    token_bytes: Vec<Vec<u8>>,
    kinds: Vec<TokenKind>,
    vocab: HashMap<String, u32>,
    /// How ordinary text becomes tokens.
    model: Model,
    /// The single-byte token for each byte value (`Ġ`-style for `gpt2`, `<0x0A>` for
    /// `llama`).
    byte_tokens: [Option<u32>; 256],
    /// Matches any special token string, longest first.
    specials: Option<Regex>,
    bos: Option<u32>,
    eos: Option<u32>,
    unknown: Option<u32>,
    add_bos: bool,
    stops: Vec<u32>,
}

/// The tokenizer model, from `tokenizer.ggml.model`.
#[derive(Debug)]
enum Model {
    /// `gpt2`: pre-tokenizer splits, then merges by rank.
    Gpt2 {
        /// `(left, right)` → `(rank, merged)`.
        merges: HashMap<(u32, u32), (u32, u32)>,
        pre: Vec<Regex>,
    },
    /// `llama`: spaces as `▁`, then the adjacent pair whose merged text is the
    /// highest-scored token merges first; what is left unknown falls back to bytes.
    Spm {
        scores: Vec<f32>,
        /// A space goes before the text and after each special token.
        add_space_prefix: bool,
    },
}

fn regex(pattern: &str) -> Result<Regex, LocalError> {
    Regex::new(pattern).map_err(|e| LocalError::Tokenizer(format!("bad split pattern: {e}")))
}

impl Tokenizer {
    /// Encodes text, turning the strings of control and user-defined tokens into those
    /// tokens and everything else into the model's BPE tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut start = 0;
        // True at the start and after a special token.
        let mut after_special = true;
        if let Some(specials) = &self.specials {
            for m in specials.find_iter(text) {
                let Ok(m) = m else { break };
                let before = &text[start..m.start()];
                if !before.is_empty() {
                    self.encode_ordinary(before, after_special, &mut out)?;
                }
                if let Some(&id) = self.vocab.get(m.as_str()) {
                    out.push(id);
                    after_special = true;
                }
                start = m.end();
            }
        }
        self.encode_ordinary(&text[start..], after_special, &mut out)?;
        Ok(out)
    }

    /// Encodes text with no special-token matching. `after_special`: the text
    /// starts the input or follows a special token (SentencePiece puts a space
    /// there).
    fn encode_ordinary(
        &self,
        text: &str,
        after_special: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), LocalError> {
        if text.is_empty() {
            return Ok(());
        }
        let pre = match &self.model {
            Model::Gpt2 { pre, .. } => pre,
            Model::Spm {
                scores,
                add_space_prefix,
            } => {
                let mut escaped = String::with_capacity(text.len() + 3);
                if *add_space_prefix && after_special {
                    escaped.push(SPM_SPACE);
                }
                escaped.extend(text.chars().map(|c| if c == ' ' { SPM_SPACE } else { c }));
                return self.spm(&escaped, scores, out);
            }
        };
        let mut fragments = vec![text];
        for re in pre {
            let mut next = Vec::with_capacity(fragments.len() * 2);
            for fragment in fragments {
                split_keeping_gaps(re, fragment, &mut next);
            }
            fragments = next;
        }
        for piece in fragments {
            self.bpe(piece, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpt2::tests::tiny;

    #[test]
    fn specials_are_single_tokens_and_round_trip() {
        let t = tiny();
        let text = "<|im_start|>user\nhello<tool_call><|im_end|>";
        let ids = t.encode(text).unwrap();
        assert_eq!(ids[0], 1);
        assert_eq!(*ids.last().unwrap(), 2);
        assert!(ids.contains(&t.token_id("<tool_call>").unwrap()));
        assert_eq!(t.decode(&ids), text);
    }

    proptest::proptest! {
        #[test]
        fn encode_decode_round_trips(text in "\\PC{0,40}|[ \n\t]{0,20}|(hello|world| |<\\|im_end\\|>|1){0,12}") {
            let t = tiny();
            let ids = t.encode(&text).unwrap();
            proptest::prop_assert_eq!(t.decode(&ids), text);
        }
    }
}
