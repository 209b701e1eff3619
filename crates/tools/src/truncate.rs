//! Shortened views of long text that say what was left out and where the
//! whole text is: nothing is cut without a way back to it.

use whittle_protocol::group_digits;

/// `text` at most about `max` chars, head and tail kept around a marker
/// that counts what was left out and says where the whole text is
/// (`whole_at`: a path, or how to get it).
pub fn cap_middle(text: &str, max: usize, whole_at: &str) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let head_n = max / 2;
    let tail_n = max - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    format!(
        "{head}\n... [{} chars not shown; the whole text: {whole_at}] ...\n{tail}",
        group_digits((total - head_n - tail_n) as u64)
    )
}

/// One line cut to `max` chars, saying how many were cut.
pub fn cap_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_owned(),
        Some((at, _)) => {
            let cut = line[at..].chars().count();
            format!(
                "{}... [{} chars cut]",
                &line[..at],
                group_digits(cut as u64)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    #[test]
    fn lines_are_cut_with_a_count() {
        assert_eq!(cap_line("abcdef", 3), "abc... [3 chars cut]");
        assert_eq!(cap_line("héllo", 10), "héllo");
        assert_eq!(cap_line("ééééé", 2), "éé... [3 chars cut]");
    }

    #[test]
    fn a_capped_middle_says_where_the_whole_is() {
        let s = "a".repeat(100);
        let capped = cap_middle(&s, 10, "skills/x/SKILL.md");
        assert!(capped.contains("[90 chars not shown; the whole text: skills/x/SKILL.md]"));
    }

    proptest! {
        #[test]
        fn cap_middle_bounds_length(s in "\\PC{0,300}", max in 0usize..100) {
            let capped = cap_middle(&s, max, "f");
            if s.chars().count() <= max { prop_assert_eq!(capped, s); }
            else { prop_assert!(capped.chars().count() <= max + 60); }
        }
    }
}
