//! Small text helpers every crate of whittle shows text with: cuts at
//! character boundaries, one-line forms of multi-line text, and numbers
//! people read at a glance. One home, so that "one line" means the same thing
//! in an error, a status line and a report.

/// The first `n` characters of `s`, cut at a character boundary.
pub fn prefix_chars(s: &str, n: usize) -> &str {
    // Output is mostly ASCII, where n characters are n bytes: checked in
    // bulk rather than decoded one by one (a preview is taken of every
    // output saved on a call's path).
    if let Some(head) = s.as_bytes().get(..n)
        && head.is_ascii()
    {
        return &s[..n];
    }
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The last `n` characters of `s`, cut at a character boundary.
pub fn suffix_chars(s: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    if let Some(start) = s.len().checked_sub(n)
        && s.as_bytes()[start..].is_ascii()
    {
        return &s[start..];
    }
    match s.char_indices().rev().nth(n - 1) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

/// Runs of whitespace, line breaks included, as single spaces: multi-line
/// text (a command, a parser's message) shown on one line.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first line, trimmed: for messages whose later lines are detail (a
/// backtrace, a hint) that a one-line error does not need.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default().trim()
}

/// Control characters (line breaks, escapes) as spaces, everything else as
/// written: text quoted into a one-line message, such as a command in a
/// permission question, stays exact but cannot break the line or drive the
/// terminal.
pub fn controls_to_spaces(text: &str) -> std::borrow::Cow<'_, str> {
    // Printable ASCII, most text by far, is checked a byte at a time (the
    // ledger's rendering asks this of every path and line it shows).
    // (A fold without an early exit, which the compiler vectorizes.)
    let printable_ascii = !text
        .bytes()
        .fold(false, |other, b| other | !(b' '..=b'~').contains(&b));
    if !printable_ascii && text.contains(char::is_control) {
        text.replace(char::is_control, " ").into()
    } else {
        text.into()
    }
}

/// At most `max_chars` characters with control characters escaped (`\n`,
/// `\u{1b}`): a hostile name or key quoted into an error stays visible and
/// harmless.
pub fn escape_controls(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for c in text.chars().take(max_chars) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max_chars` characters on one line with control characters as
/// spaces and `…` where it was cut: someone else's words (a server's name,
/// its last line of stderr) quoted into a message of ours.
pub fn quote_line(text: &str, max_chars: usize) -> String {
    let mut line = controls_to_spaces(prefix_chars(text, max_chars)).into_owned();
    if text.chars().nth(max_chars).is_some() {
        line.push('…');
    }
    line
}

/// `1234567` -> `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `212345` -> `212k`, `1234567` -> `1.2M`: sizes in a one-line report.
pub fn abbreviate_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", n / 1000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cuts_respect_characters() {
        assert_eq!(prefix_chars("héllo", 2), "hé");
        assert_eq!(suffix_chars("héllo", 4), "éllo");
        assert_eq!(suffix_chars("hé", 9), "hé");
        assert_eq!(suffix_chars("hé", 0), "");
    }

    proptest! {
        /// The ASCII shortcut cuts where decoding character by character does.
        #[test]
        fn cuts_match_counting_characters(s in "(a|b|é|日|\\n){0,40}", n in 0usize..50) {
            let by_chars: String = s.chars().take(n).collect();
            prop_assert_eq!(prefix_chars(&s, n), by_chars.as_str());
            let count = s.chars().count();
            let tail: String = s.chars().skip(count.saturating_sub(n)).collect();
            prop_assert_eq!(suffix_chars(&s, n), tail.as_str());
        }
    }

    #[test]
    fn one_line_forms() {
        assert_eq!(
            collapse_whitespace("cargo test\n  --all\t-q"),
            "cargo test --all -q"
        );
        assert_eq!(first_line("  oops  \nbacktrace"), "oops");
        assert_eq!(first_line(""), "");
        assert_eq!(controls_to_spaces("rm -rf a\nb\x1b[2J"), "rm -rf a b [2J");
        assert_eq!(escape_controls("a\nb\x1b", 80), "a\\nb\\u{1b}");
        assert_eq!(escape_controls("abcdef", 3), "abc");
        assert_eq!(quote_line("a\nb\x1bc", 10), "a b c");
        assert_eq!(quote_line("abcdef", 3), "abc…");
        assert_eq!(quote_line("abc", 3), "abc");
    }

    #[test]
    fn numbers() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(abbreviate_count(9_999), "9999");
        assert_eq!(abbreviate_count(212_345), "212k");
        assert_eq!(abbreviate_count(1_234_567), "1.2M");
    }
}
