//! The vocabulary as the GGUF stores it: token strings, their kinds, the special ids
//! (BOS, EOS, end of turn, unknown) and what each token decodes to; the tokenizer models
//! in the sibling modules turn it into a [`Tokenizer`].

use super::{Model, Tokenizer, regex};
use crate::error::LocalError;
use crate::gguf::Metadata;
use std::collections::HashMap;

/// What a vocabulary entry is, from `tokenizer.ggml.token_type` (llama.cpp's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// An ordinary BPE token, stored in byte-level form (`Ġthe`).
    Normal,
    /// The unknown token.
    Unknown,
    /// A control token such as `<|im_start|>`: matched in prompts, hidden in streamed output.
    Control,
    /// An added token such as `<tool_call>`: matched in prompts and shown in output.
    UserDefined,
    /// A reserved slot no text maps to.
    Unused,
    /// A raw byte token (`<0x0A>`), used by SentencePiece vocabularies.
    Byte,
}

impl TokenKind {
    fn from_code(code: i64) -> Self {
        match code {
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => TokenKind::Normal,
        }
    }

    /// Whether prompt text containing this token's string encodes to the token itself.
    fn is_special(self) -> bool {
        matches!(self, TokenKind::Control | TokenKind::UserDefined)
    }
}

/// Names of end-of-turn tokens across common chat formats; generation stops on any of them.
const END_OF_TURN_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
];

/// The vocabulary's special ids and the BOS rule, as read from metadata.
pub(super) struct SpecialIds {
    pub(super) bos: Option<u32>,
    pub(super) eos: Option<u32>,
    pub(super) eot: Option<u32>,
    pub(super) unknown: Option<u32>,
    pub(super) add_bos: bool,
}

fn meta_err(key: &str, message: impl Into<String>) -> LocalError {
    LocalError::Metadata {
        key: key.to_string(),
        message: message.into(),
    }
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF's metadata.
    pub(crate) fn from_metadata(md: &Metadata<'_>) -> Result<Self, LocalError> {
        let model = md.string("tokenizer.ggml.model")?;
        if model != "gpt2" && model != "llama" {
            return Err(LocalError::Unsupported(format!(
                "tokenizer model {model:?} (\"gpt2\" byte-level BPE and \"llama\" SentencePiece are implemented)"
            )));
        }
        let tokens: Vec<String> = md
            .opt_strings("tokenizer.ggml.tokens")?
            .ok_or_else(|| meta_err("tokenizer.ggml.tokens", "missing"))?
            .into_iter()
            .map(str::to_string)
            .collect();
        if tokens.is_empty() || u32::try_from(tokens.len()).is_err() {
            return Err(meta_err("tokenizer.ggml.tokens", "empty or too large"));
        }
        let kinds: Vec<TokenKind> = match md.opt_ints("tokenizer.ggml.token_type")? {
            Some(codes) if codes.len() == tokens.len() => {
                codes.into_iter().map(TokenKind::from_code).collect()
            }
            Some(_) => {
                return Err(meta_err(
                    "tokenizer.ggml.token_type",
                    "length differs from tokenizer.ggml.tokens",
                ));
            }
            None => vec![TokenKind::Normal; tokens.len()],
        };
        let merges: Vec<&str> = md.opt_strings("tokenizer.ggml.merges")?.unwrap_or_default();
        let pre = md.opt_string("tokenizer.ggml.pre")?.unwrap_or("default");
        let id = |key: &str| -> Result<Option<u32>, LocalError> {
            match md.opt_usize(key)? {
                None => Ok(None),
                Some(i) if i < tokens.len() => Ok(u32::try_from(i).ok()),
                Some(i) => Err(meta_err(
                    key,
                    format!("token id {i} is outside the vocabulary"),
                )),
            }
        };
        let bos = id("tokenizer.ggml.bos_token_id")?;
        let eos = id("tokenizer.ggml.eos_token_id")?;
        let eot = id("tokenizer.ggml.eot_token_id")?;
        let unknown = id("tokenizer.ggml.unknown_token_id")?;
        let spm = model == "llama";
        // SentencePiece models start with BOS unless the file says otherwise.
        let add_bos = md.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(spm);
        let specials = SpecialIds {
            bos,
            eos,
            eot,
            unknown,
            add_bos,
        };
        if spm {
            let scores = md
                .opt_floats("tokenizer.ggml.scores")?
                .ok_or_else(|| meta_err("tokenizer.ggml.scores", "missing"))?;
            if scores.len() != tokens.len() {
                return Err(meta_err(
                    "tokenizer.ggml.scores",
                    "length differs from tokenizer.ggml.tokens",
                ));
            }
            let add_space_prefix = md
                .opt_bool("tokenizer.ggml.add_space_prefix")?
                .unwrap_or(true);
            return Self::build_spm(tokens, kinds, scores, add_space_prefix, specials);
        }
        Self::build_gpt2(tokens, kinds, &merges, pre, specials)
    }

    pub(super) fn finish(
        tokens: Vec<String>,
        token_bytes: Vec<Vec<u8>>,
        kinds: Vec<TokenKind>,
        vocab: HashMap<String, u32>,
        model: Model,
        byte_tokens: [Option<u32>; 256],
        ids: SpecialIds,
    ) -> Result<Self, LocalError> {
        let mut special: Vec<&str> = tokens
            .iter()
            .zip(&kinds)
            .filter(|(t, k)| k.is_special() && !t.is_empty())
            .map(|(t, _)| t.as_str())
            .collect();
        special.sort_by_key(|t| std::cmp::Reverse(t.len()));
        special.dedup();
        let specials = if special.is_empty() {
            None
        } else {
            let alternation: Vec<String> = special
                .iter()
                .map(|s| fancy_regex::escape(s).into_owned())
                .collect();
            Some(regex(&alternation.join("|"))?)
        };
        let mut stops: Vec<u32> = ids.eos.into_iter().chain(ids.eot).collect();
        for name in END_OF_TURN_NAMES {
            if let Some(&i) = vocab.get(*name)
                && kinds[i as usize] == TokenKind::Control
            {
                stops.push(i);
            }
        }
        stops.sort_unstable();
        stops.dedup();
        Ok(Tokenizer {
            tokens,
            token_bytes,
            kinds,
            vocab,
            model,
            byte_tokens,
            specials,
            bos: ids.bos,
            eos: ids.eos,
            unknown: ids.unknown,
            add_bos: ids.add_bos,
            stops,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of a token given its stored string (`"<|im_start|>"`, `"Ġthe"`).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    /// The stored string of a token.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The text an ordinary or added token stands for on its own (`None` for control,
    /// unused and unknown tokens, and for a byte that is only part of a character): what
    /// a grammar checks before letting the model write it.
    pub fn piece(&self, id: u32) -> Option<&str> {
        match self.kind(id)? {
            TokenKind::Normal | TokenKind::UserDefined | TokenKind::Byte => {
                std::str::from_utf8(self.token_bytes.get(id as usize)?).ok()
            }
            TokenKind::Control | TokenKind::Unknown | TokenKind::Unused => None,
        }
    }

    /// What kind of token `id` is.
    pub fn kind(&self, id: u32) -> Option<TokenKind> {
        self.kinds.get(id as usize).copied()
    }

    /// The beginning-of-sequence token, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token, if the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether prompts must start with the BOS token (`tokenizer.ggml.add_bos_token`).
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether generating `id` ends the turn: EOS, EOT, or a known end-of-turn control token.
    pub fn is_stop(&self, id: u32) -> bool {
        self.stops.binary_search(&id).is_ok()
    }
}

/// Parses `<0x0A>` into its byte.
pub(super) fn parse_byte_token(tok: &str) -> Option<u8> {
    let hex = tok.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}
