//! The tokenizer, built from the GGUF's own `tokenizer.ggml.*` metadata so a model file
//! is all the engine needs.
//!
//! Two tokenizer models: `gpt2` (byte-level BPE with merges, as in SmolLM2, Qwen2 and
//! Llama 3) and `llama` (SentencePiece BPE by token scores with byte fallback, as in
//! Llama 2, Mistral and TinyLlama). Control and user-defined tokens (`<|im_start|>`, `<tool_call>`) are
//! matched literally in the text before BPE, so a rendered chat template encodes them as
//! single tokens. Decoding streams: bytes of a UTF-8 character split across tokens are held
//! back until the character is complete.

use crate::error::LocalError;
use crate::gguf::Metadata;
use fancy_regex::Regex;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

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

/// The pre-tokenizer regexes llama.cpp uses for each `tokenizer.ggml.pre` value.
const GPT2_SPLIT: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const DIGITS_SPLIT: &str = r"\p{N}";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Names of end-of-turn tokens across common chat formats; generation stops on any of them.
const END_OF_TURN_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
];

/// A byte-level BPE tokenizer read from GGUF metadata.
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

/// The vocabulary's special ids and the BOS rule, as read from metadata.
struct SpecialIds {
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    unknown: Option<u32>,
    add_bos: bool,
}

/// The tokenizer model, from `tokenizer.ggml.model`.
#[derive(Debug)]
enum Model {
    /// `gpt2`: pre-tokenizer splits, then merges by rank.
    Bpe {
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

/// SentencePiece's visible space.
const SPM_SPACE: char = '\u{2581}';

/// GPT-2's reversible map from bytes to printable characters.
fn byte_to_char() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        map[usize::from(b)] = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(256 + extra).unwrap_or('\0');
            extra += 1;
            c
        };
    }
    map
}

fn regex(pattern: &str) -> Result<Regex, LocalError> {
    Regex::new(pattern).map_err(|e| LocalError::Tokenizer(format!("bad split pattern: {e}")))
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
        Self::build(tokens, kinds, &merges, pre, specials)
    }

    fn build(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        merges: &[&str],
        pre: &str,
        specials: SpecialIds,
    ) -> Result<Self, LocalError> {
        let b2c = byte_to_char();
        let mut c2b: HashMap<char, u8> = HashMap::with_capacity(256);
        for (b, c) in b2c.iter().enumerate() {
            c2b.insert(*c, b as u8);
        }
        let mut vocab = HashMap::with_capacity(tokens.len());
        let mut token_bytes = Vec::with_capacity(tokens.len());
        for (i, (tok, kind)) in tokens.iter().zip(&kinds).enumerate() {
            vocab.entry(tok.clone()).or_insert(i as u32);
            let bytes = match kind {
                TokenKind::Normal => {
                    let mut out = Vec::with_capacity(tok.len());
                    for c in tok.chars() {
                        match c2b.get(&c) {
                            Some(b) => out.push(*b),
                            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                        }
                    }
                    out
                }
                TokenKind::Byte => parse_byte_token(tok)
                    .map(|b| vec![b])
                    .unwrap_or_else(|| tok.as_bytes().to_vec()),
                _ => tok.as_bytes().to_vec(),
            };
            token_bytes.push(bytes);
        }
        let mut byte_tokens = [None; 256];
        for (b, c) in b2c.iter().enumerate() {
            byte_tokens[b] = vocab.get(c.encode_utf8(&mut [0; 4]) as &str).copied();
        }
        let mut merge_map = HashMap::with_capacity(merges.len());
        for (rank, line) in merges.iter().enumerate() {
            let Some((left, right)) = line.split_once(' ') else {
                continue;
            };
            let (Some(&l), Some(&r), Some(&m)) = (
                vocab.get(left),
                vocab.get(right),
                vocab.get(&format!("{left}{right}")),
            ) else {
                continue;
            };
            merge_map.entry((l, r)).or_insert((rank as u32, m));
        }
        let pre = match pre {
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva" => {
                vec![regex(DIGITS_SPLIT)?, regex(GPT2_SPLIT)?]
            }
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "megrez" | "hunyuan" => {
                vec![regex(QWEN2_SPLIT)?]
            }
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" | "smaug-bpe" => {
                vec![regex(LLAMA3_SPLIT)?]
            }
            _ => vec![regex(GPT2_SPLIT)?],
        };
        let model = Model::Bpe {
            merges: merge_map,
            pre,
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

    /// A SentencePiece tokenizer: normal tokens store `▁` for spaces, bytes are
    /// `<0xNN>` tokens.
    fn build_spm(
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

    fn finish(
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

    /// Encodes text, turning the strings of control and user-defined tokens into those
    /// tokens and everything else into byte-level BPE tokens.
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
            Model::Bpe { pre, .. } => pre,
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

    /// Byte-level BPE of one pre-token: lowest-ranked merge first, leftmost on ties.
    fn bpe(&self, piece: &str, out: &mut Vec<u32>) -> Result<(), LocalError> {
        let Model::Bpe { merges, .. } = &self.model else {
            return Err(LocalError::Tokenizer(
                "BPE merges on a SentencePiece vocabulary".into(),
            ));
        };
        let mut symbols: Vec<Symbol> = Vec::with_capacity(piece.len());
        for (i, b) in piece.bytes().enumerate() {
            let id = match (self.byte_tokens[usize::from(b)], self.unknown) {
                (Some(id), _) | (None, Some(id)) => id,
                (None, None) => {
                    return Err(LocalError::Tokenizer(format!(
                        "byte 0x{b:02x} has no token and the vocabulary has no unknown token"
                    )));
                }
            };
            symbols.push(Symbol {
                id,
                prev: i.checked_sub(1),
                next: (i + 1 < piece.len()).then_some(i + 1),
                alive: true,
            });
        }
        let mut queue = BinaryHeap::new();
        for i in 0..symbols.len().saturating_sub(1) {
            if let Some(&(rank, merged)) = merges.get(&(symbols[i].id, symbols[i + 1].id)) {
                queue.push(Merge {
                    rank,
                    pos: i,
                    merged,
                });
            }
        }
        while let Some(top) = queue.pop() {
            let left = &symbols[top.pos];
            let Some(right_pos) = left.next else { continue };
            if !left.alive {
                continue;
            }
            let right = &symbols[right_pos];
            if merges.get(&(left.id, right.id)) != Some(&(top.rank, top.merged)) {
                continue;
            }
            let after = right.next;
            symbols[right_pos].alive = false;
            symbols[top.pos].id = top.merged;
            symbols[top.pos].next = after;
            if let Some(a) = after {
                symbols[a].prev = Some(top.pos);
                if let Some(&(rank, merged)) = merges.get(&(top.merged, symbols[a].id)) {
                    queue.push(Merge {
                        rank,
                        pos: top.pos,
                        merged,
                    });
                }
            }
            if let Some(p) = symbols[top.pos].prev
                && let Some(&(rank, merged)) = merges.get(&(symbols[p].id, top.merged))
            {
                queue.push(Merge {
                    rank,
                    pos: p,
                    merged,
                });
            }
        }
        out.extend(symbols.iter().filter(|s| s.alive).map(|s| s.id));
        Ok(())
    }

    /// SentencePiece BPE over the characters of `text` (spaces already `▁`): the
    /// adjacent pair whose joined text is the best-scored token merges first,
    /// leftmost on ties; characters no token covers become byte tokens.
    fn spm(&self, text: &str, scores: &[f32], out: &mut Vec<u32>) -> Result<(), LocalError> {
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

    /// Decodes tokens to text, special tokens included, invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if let Some(b) = self.token_bytes.get(id as usize) {
                bytes.extend_from_slice(b);
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A streaming decoder for generated tokens.
    pub fn stream(&self) -> TextStream<'_> {
        TextStream {
            tokenizer: self,
            pending: Vec::new(),
            trim_space: matches!(
                self.model,
                Model::Spm {
                    add_space_prefix: true,
                    ..
                }
            ),
        }
    }
}

/// Parses `<0x0A>` into its byte.
fn parse_byte_token(tok: &str) -> Option<u8> {
    let hex = tok.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// Splits `text` at every match of `re`, keeping both the matches and the text between
/// them, as llama.cpp's `unicode_regex_split` does. If the regex engine gives up (its
/// backtracking limit), the rest is kept as one piece: slower to encode, still correct bytes.
fn split_keeping_gaps<'a>(re: &Regex, text: &'a str, out: &mut Vec<&'a str>) {
    let mut start = 0;
    for m in re.find_iter(text) {
        let Ok(m) = m else { break };
        if m.start() > start {
            out.push(&text[start..m.start()]);
        }
        if m.end() > m.start() {
            out.push(m.as_str());
        }
        start = m.end();
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
}

struct Symbol {
    id: u32,
    prev: Option<usize>,
    next: Option<usize>,
    alive: bool,
}

#[derive(PartialEq, Eq)]
struct Merge {
    rank: u32,
    pos: usize,
    merged: u32,
}

impl Ord for Merge {
    /// Reversed so `BinaryHeap` pops the lowest rank, then the leftmost position.
    fn cmp(&self, other: &Self) -> Ordering {
        other.rank.cmp(&self.rank).then(other.pos.cmp(&self.pos))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
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

/// Turns generated tokens into text pieces as they arrive.
///
/// Bytes of a character split across tokens wait for the rest; bytes that can never form
/// a character become U+FFFD. Control tokens are not shown (they are chat-format markup).
pub struct TextStream<'t> {
    tokenizer: &'t Tokenizer,
    pending: Vec<u8>,
    /// Until text appears: drop the space a SentencePiece word starts with.
    trim_space: bool,
}

impl TextStream<'_> {
    /// Adds one token and returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        let mut text = self.push_bytes(id);
        if self.trim_space && !text.is_empty() {
            self.trim_space = false;
            if text.starts_with(' ') {
                text.remove(0);
            }
        }
        text
    }

    fn push_bytes(&mut self, id: u32) -> String {
        match self.tokenizer.kind(id) {
            None | Some(TokenKind::Control) | Some(TokenKind::Unused) => return String::new(),
            _ => {}
        }
        if let Some(b) = self.tokenizer.token_bytes.get(id as usize) {
            self.pending.extend_from_slice(b);
        }
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // valid_up_to bytes are UTF-8 by definition.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: an incomplete character left over becomes U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tokenizer over all 256 byte tokens, a few words and merges, and chat specials.
    pub(crate) fn tiny() -> Tokenizer {
        let b2c = byte_to_char();
        let mut tokens: Vec<String> = vec![
            "<|endoftext|>".into(),
            "<|im_start|>".into(),
            "<|im_end|>".into(),
        ];
        let mut kinds = vec![TokenKind::Control; 3];
        for c in b2c {
            tokens.push(c.to_string());
            kinds.push(TokenKind::Normal);
        }
        let merges = [
            "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d",
        ];
        for m in merges {
            tokens.push(m.replace(' ', ""));
            kinds.push(TokenKind::Normal);
        }
        tokens.push("<tool_call>".into());
        kinds.push(TokenKind::UserDefined);
        let specials = SpecialIds {
            bos: None,
            eos: Some(2),
            eot: None,
            unknown: None,
            add_bos: false,
        };
        Tokenizer::build(tokens, kinds, &merges, "smollm", specials).unwrap()
    }

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

    #[test]
    fn merges_apply_in_rank_order() {
        let t = tiny();
        let ids = t.encode("hello world").unwrap();
        let strs: Vec<&str> = ids.iter().map(|i| t.token(*i).unwrap()).collect();
        assert_eq!(strs, ["hello", "Ġworld"]);
    }

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

    #[test]
    fn digits_split_individually_for_smollm() {
        let t = tiny();
        let ids = t.encode("a 123").unwrap();
        assert_eq!(t.decode(&ids), "a 123");
        assert_eq!(ids.len(), 5, "a, space, 1, 2, 3");
    }

    #[test]
    fn stream_holds_split_utf8_and_hides_control() {
        let t = tiny();
        let ids = t.encode("é€x").unwrap();
        assert_eq!(ids.len(), 6, "byte tokens only");
        let mut s = t.stream();
        let pieces: Vec<String> = ids.iter().map(|i| s.push(*i)).collect();
        assert_eq!(pieces, ["", "é", "", "", "€", "x"]);
        assert_eq!(s.push(2), "");
        assert_eq!(s.finish(), "");
        let mut s = t.stream();
        let bad = t.token_id(&byte_level_char(0xff)).unwrap();
        assert_eq!(s.push(bad), "\u{FFFD}");
        let lead = t.token_id(&byte_level_char(0xe2)).unwrap();
        assert_eq!(s.push(lead), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    fn byte_level_char(b: u8) -> String {
        byte_to_char()[usize::from(b)].to_string()
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
