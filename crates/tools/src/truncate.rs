//! Bounded output: keep the head and the tail, say how much was cut.

use std::collections::VecDeque;

/// Collects a byte stream of any length in bounded memory, keeping the first
/// `head_cap` and the last `tail_cap` bytes.
#[derive(Debug)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    /// Bytes dropped from between head and tail.
    omitted_bytes: u64,
    /// Characters among the dropped bytes (UTF-8 lead bytes counted).
    omitted_chars: u64,
}

impl HeadTail {
    /// A collector that keeps at most `head_cap + tail_cap` bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            omitted_bytes: 0,
            omitted_chars: 0,
        }
    }

    /// Appends bytes as they arrive.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            // The whole tail and the front of `bytes` fall out.
            let (dropped, kept) = bytes.split_at(bytes.len() - self.tail_cap);
            let old: Vec<u8> = self.tail.drain(..).collect();
            self.note_dropped(&old);
            self.note_dropped(dropped);
            self.tail.extend(kept);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
            let old: Vec<u8> = self.tail.drain(..overflow).collect();
            self.note_dropped(&old);
            self.tail.extend(bytes);
        }
    }

    fn note_dropped(&mut self, bytes: &[u8]) {
        self.omitted_bytes += bytes.len() as u64;
        self.omitted_chars += bytes.iter().filter(|b| **b & 0xC0 != 0x80).count() as u64;
    }

    /// True when nothing has been collected.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty() && self.omitted_bytes == 0
    }

    /// The kept text, decoded lossily, with a marker where the middle was cut.
    /// The flag says whether any bytes were not valid UTF-8.
    pub fn finish(self) -> (String, bool) {
        let (tail_a, tail_b) = self.tail.as_slices();
        if self.omitted_bytes == 0 {
            let mut all = self.head;
            all.extend_from_slice(tail_a);
            all.extend_from_slice(tail_b);
            let lossy = std::str::from_utf8(&all).is_err();
            return (String::from_utf8_lossy(&all).into_owned(), lossy);
        }
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(tail_a);
        tail.extend_from_slice(tail_b);
        // The cut may split a character: drop the partial bytes at the seams.
        let head = trim_partial_end(&self.head);
        let tail = trim_partial_start(&tail);
        let lossy = std::str::from_utf8(head).is_err() || std::str::from_utf8(tail).is_err();
        let split_char = u64::from(head.len() < self.head.len());
        let text = format!(
            "{}\n... [{} chars omitted] ...\n{}",
            String::from_utf8_lossy(head),
            thousands(self.omitted_chars + split_char),
            String::from_utf8_lossy(tail)
        );
        (text, lossy)
    }
}

fn trim_partial_end(bytes: &[u8]) -> &[u8] {
    let mut end = bytes.len();
    // Walk back over continuation bytes to the last lead byte.
    let mut i = bytes.len();
    while i > 0 && bytes.len() - i < 4 {
        i -= 1;
        let b = bytes[i];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0x00..=0x7F => 1,
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            if bytes.len() - i < need {
                end = i;
            }
            break;
        }
    }
    &bytes[..end]
}

fn trim_partial_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| **b & 0xC0 == 0x80)
        .count();
    &bytes[skip..]
}

/// Caps a string at `max` chars, keeping head and tail around a marker.
pub fn cap_middle(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let head_n = max / 2;
    let tail_n = max - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    format!(
        "{head}\n... [{} chars omitted] ...\n{tail}",
        thousands((total - head_n - tail_n) as u64)
    )
}

/// One line of at most `max` characters, for quoting what someone else
/// wrote (a server's name, its last words) in a message: control
/// characters, line breaks included, become spaces, and a cut ends in `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.chars().nth(max).is_some() {
        line.push('…');
    }
    line
}

/// Cuts one line to `max` chars, saying how many were cut.
pub fn cap_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_owned(),
        Some((at, _)) => {
            let cut = line[at..].chars().count();
            format!("{}... [{} chars cut]", &line[..at], thousands(cut as u64))
        }
    }
}

/// `41230` -> `"41,230"`: big counts people can read at a glance.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_replaces_controls_and_marks_a_cut() {
        assert_eq!(one_line("a\nb\x1bc", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line(" M x", 10), " M x");
    }
    use proptest::prelude::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(41_230), "41,230");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn head_and_tail_survive_a_cut() {
        let mut ht = HeadTail::new(10, 10);
        let input: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        for chunk in input.as_bytes().chunks(7) {
            ht.push(chunk);
        }
        let (text, lossy) = ht.finish();
        assert!(!lossy);
        assert!(text.starts_with(&input[..10]));
        assert!(text.ends_with(&input[990..]));
        assert!(text.contains("[980 chars omitted]"), "{text}");
    }

    #[test]
    fn lines_are_cut_with_a_count() {
        assert_eq!(cap_line("abcdef", 3), "abc... [3 chars cut]");
        assert_eq!(cap_line("héllo", 10), "héllo");
        assert_eq!(cap_line("ééééé", 2), "éé... [3 chars cut]");
    }

    proptest! {
        #[test]
        fn head_tail_is_exact_or_marked(s in "\\PC{0,300}", head in 0usize..50, tail in 0usize..50, chunk in 1usize..20) {
            let mut ht = HeadTail::new(head, tail);
            for c in s.as_bytes().chunks(chunk) { ht.push(c); }
            let (text, lossy) = ht.finish();
            if s.len() <= head + tail {
                prop_assert_eq!(&text, &s);
                prop_assert!(!lossy);
            } else {
                prop_assert!(text.contains("chars omitted"));
                prop_assert!(!lossy, "a cut split a character: {}", text);
            }
        }

        #[test]
        fn cap_middle_bounds_length(s in "\\PC{0,300}", max in 0usize..100) {
            let capped = cap_middle(&s, max);
            if s.chars().count() <= max { prop_assert_eq!(capped, s); }
            else { prop_assert!(capped.chars().count() <= max + 40); }
        }
    }
}
