//! Searches in a ledger's text and a result's, by byte with memchr.
//!
//! `str`'s substring searches set a searcher up on every call (a few
//! hundred instructions before the first byte is read); a ledger read back
//! asks a few thousand short questions of short lines, and the exit status
//! of every result is looked for from its end. These give the same
//! answers (property tests below) from the needle's first or last byte.

/// `text.split_once(a b)` for two ASCII bytes: found from `a`s with
/// memchr, not by a substring searcher (set up anew on every call: most
/// of what reading a ledger's lines cost).
pub(super) fn split_once_pair(text: &str, a: u8, b: u8) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(k) = memchr::memchr(a, &bytes[from..]) {
        let at = from + k;
        if bytes.get(at + 1) == Some(&b) {
            // Both ASCII: the cut is on character boundaries.
            return Some((&text[..at], &text[at + 2..]));
        }
        from = at + 1;
    }
    None
}

/// `text.split(a b)` for two ASCII bytes (see [`split_once_pair`]).
pub(super) fn split_pairs(text: &str, a: u8, b: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        match split_once_pair(r, a, b) {
            Some((piece, after)) => {
                rest = Some(after);
                Some(piece)
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// `text.rsplit_once(a b)` for two ASCII bytes, found from `b`s with
/// memrchr (see [`split_once_pair`]).
pub(super) fn rsplit_once_pair(text: &str, a: u8, b: u8) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    while let Some(k) = memchr::memrchr(b, &bytes[..end]) {
        if k > 0 && bytes[k - 1] == a {
            return Some((&text[..k - 1], &text[k + 1..]));
        }
        end = k;
    }
    None
}

/// `text.rsplit_once(" ×")`, found from the last byte of `×` with memrchr
/// (see [`split_once_pair`]).
pub(super) fn rsplit_once_times(text: &str) -> Option<(&str, &str)> {
    const TIMES: &[u8] = " ×".as_bytes();
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    while let Some(k) = memchr::memrchr(TIMES[TIMES.len() - 1], &bytes[..end]) {
        let last = k + 1;
        if last >= TIMES.len() && &bytes[last - TIMES.len()..last] == TIMES {
            return Some((&text[..last - TIMES.len()], &text[last..]));
        }
        end = k;
    }
    None
}

/// `text.rfind(needle)`: candidates found from `needle`'s first byte with
/// memrchr, from the end.
pub(super) fn rfind_str(text: &str, needle: &str) -> Option<usize> {
    let (bytes, first) = (text.as_bytes(), *needle.as_bytes().first()?);
    let mut end = bytes.len();
    while let Some(at) = memchr::memrchr(first, &bytes[..end]) {
        if bytes[at..].starts_with(needle.as_bytes()) {
            return Some(at);
        }
        end = at;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The byte-pair splits are the substring splits they replace.
        #[test]
        fn pair_splits_are_the_substring_splits(text in "([\\]x, ×é(]|\\PC)*") {
            prop_assert_eq!(split_once_pair(&text, b']', b' '), text.split_once("] "));
            prop_assert_eq!(
                split_pairs(&text, b',', b' ').collect::<Vec<_>>(),
                text.split(", ").collect::<Vec<_>>()
            );
            prop_assert_eq!(rsplit_once_times(&text), text.rsplit_once(" ×"));
            prop_assert_eq!(rsplit_once_pair(&text, b' ', b'('), text.rsplit_once(" ("));
            prop_assert_eq!(rsplit_once_pair(&text, b']', b' '), text.rsplit_once("] "));
        }

        #[test]
        fn rfind_is_str_rfind(text in "([\\[x:E ]|\\PC)*", needle in "(\\[e|E|x|:| )+") {
            prop_assert_eq!(rfind_str(&text, &needle), text.rfind(needle.as_str()));
            for needle in ["[exit code: ", "Exit code "] {
                let text = format!("{text}{needle}{text}");
                prop_assert_eq!(rfind_str(&text, needle), text.rfind(needle));
            }
        }
    }
}
