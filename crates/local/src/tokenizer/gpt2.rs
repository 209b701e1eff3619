//! `gpt2`: byte-level BPE. Every byte has a printable stand-in character, the text is
//! split by the pre-tokenizer regexes, then each piece merges by rank.

use super::vocabulary::{SpecialIds, TokenKind, parse_byte_token};
use super::{Model, Tokenizer, regex};
use crate::error::LocalError;
use fancy_regex::Regex;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// The pre-tokenizer regexes llama.cpp uses for each `tokenizer.ggml.pre` value.
const GPT2_SPLIT: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const DIGITS_SPLIT: &str = r"\p{N}";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GPT-2's reversible map from bytes to printable characters.
pub(super) fn byte_to_char() -> [char; 256] {
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

impl Tokenizer {
    /// A byte-level BPE tokenizer: normal tokens store each byte as GPT-2's printable
    /// stand-in, and merges rank in the order the file lists them.
    pub(super) fn build_gpt2(
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
        let model = Model::Gpt2 {
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

    /// Byte-level BPE of one pre-token: lowest-ranked merge first, leftmost on ties.
    pub(super) fn bpe(&self, piece: &str, out: &mut Vec<u32>) -> Result<(), LocalError> {
        let Model::Gpt2 { merges, .. } = &self.model else {
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
}

/// Splits `text` at every match of `re`, keeping both the matches and the text between
/// them, as llama.cpp's `unicode_regex_split` does. If the regex engine gives up (its
/// backtracking limit), the rest is kept as one piece: slower to encode, still correct bytes.
pub(super) fn split_keeping_gaps<'a>(re: &Regex, text: &'a str, out: &mut Vec<&'a str>) {
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

#[cfg(test)]
pub(super) mod tests {
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
        Tokenizer::build_gpt2(tokens, kinds, &merges, "smollm", specials).unwrap()
    }

    #[test]
    fn merges_apply_in_rank_order() {
        let t = tiny();
        let ids = t.encode("hello world").unwrap();
        let strs: Vec<&str> = ids.iter().map(|i| t.token(*i).unwrap()).collect();
        assert_eq!(strs, ["hello", "Ġworld"]);
    }

    #[test]
    fn digits_split_individually_for_smollm() {
        let t = tiny();
        let ids = t.encode("a 123").unwrap();
        assert_eq!(t.decode(&ids), "a 123");
        assert_eq!(ids.len(), 5, "a, space, 1, 2, 3");
    }
}
