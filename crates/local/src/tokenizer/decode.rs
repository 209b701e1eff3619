//! Tokens back to text: all at once, or streamed as tokens are generated.

use super::vocabulary::TokenKind;
use super::{Model, Tokenizer};

impl Tokenizer {
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
mod tests {
    use crate::tokenizer::gpt2::byte_to_char;
    use crate::tokenizer::gpt2::tests::tiny;

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
}
