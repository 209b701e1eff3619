//! The tokenizer, built from the GGUF's own `tokenizer.ggml.*` metadata so a model file
//! is all the engine needs.
//!
//! Only the `gpt2` tokenizer model (byte-level BPE, as in SmolLM2, Qwen2 and Llama 3) is
//! implemented. Control and user-defined tokens (`<|im_start|>`, `<tool_call>`) are
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
    /// `(left, right)` → `(rank, merged)`.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The single-byte token for each byte value.
    byte_tokens: [Option<u32>; 256],
    /// Matches any special token string, longest first.
    specials: Option<Regex>,
    pre: Vec<Regex>,
    bos: Option<u32>,
    eos: Option<u32>,
    unknown: Option<u32>,
    add_bos: bool,
    stops: Vec<u32>,
}

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
        if model != "gpt2" {
            return Err(LocalError::Unsupported(format!(
                "tokenizer model {model:?} (only \"gpt2\" byte-level BPE is implemented)"
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
        let add_bos = md
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(false);
        Self::build(tokens, kinds, &merges, pre, bos, eos, eot, unknown, add_bos)
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        merges: &[&str],
        pre: &str,
        bos: Option<u32>,
        eos: Option<u32>,
        eot: Option<u32>,
        unknown: Option<u32>,
        add_bos: bool,
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
        let mut stops: Vec<u32> = eos.into_iter().chain(eot).collect();
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
            merges: merge_map,
            byte_tokens,
            specials,
            pre,
            bos,
            eos,
            unknown,
            add_bos,
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
        if let Some(specials) = &self.specials {
            for m in specials.find_iter(text) {
                let Ok(m) = m else { break };
                self.encode_ordinary(&text[start..m.start()], &mut out)?;
                if let Some(&id) = self.vocab.get(m.as_str()) {
                    out.push(id);
                }
                start = m.end();
            }
        }
        self.encode_ordinary(&text[start..], &mut out)?;
        Ok(out)
    }

    /// Encodes text with no special-token matching.
    fn encode_ordinary(&self, text: &str, out: &mut Vec<u32>) -> Result<(), LocalError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut fragments = vec![text];
        for re in &self.pre {
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
            if let Some(&(rank, merged)) = self.merges.get(&(symbols[i].id, symbols[i + 1].id)) {
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
            if self.merges.get(&(left.id, right.id)) != Some(&(top.rank, top.merged)) {
                continue;
            }
            let after = right.next;
            symbols[right_pos].alive = false;
            symbols[top.pos].id = top.merged;
            symbols[top.pos].next = after;
            if let Some(a) = after {
                symbols[a].prev = Some(top.pos);
                if let Some(&(rank, merged)) = self.merges.get(&(top.merged, symbols[a].id)) {
                    queue.push(Merge {
                        rank,
                        pos: top.pos,
                        merged,
                    });
                }
            }
            if let Some(p) = symbols[top.pos].prev
                && let Some(&(rank, merged)) = self.merges.get(&(symbols[p].id, top.merged))
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

/// Turns generated tokens into text pieces as they arrive.
///
/// Bytes of a character split across tokens wait for the rest; bytes that can never form
/// a character become U+FFFD. Control tokens are not shown (they are chat-format markup).
pub struct TextStream<'t> {
    tokenizer: &'t Tokenizer,
    pending: Vec<u8>,
}

impl TextStream<'_> {
    /// Adds one token and returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
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
        Tokenizer::build(
            tokens,
            kinds,
            &merges,
            "smollm",
            None,
            Some(2),
            None,
            None,
            false,
        )
        .unwrap()
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
