//! ANSI colors, only where they help: on a terminal, unless NO_COLOR is set.

/// Whether to color one output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Colors for a stream that is (or is not) a terminal, honouring
    /// `NO_COLOR` (any non-empty value) and `TERM=dumb`.
    pub fn detect(is_terminal: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Style {
            color: is_terminal && !no_color && !dumb,
        }
    }

    /// No colors at all.
    #[cfg(test)]
    pub fn plain() -> Style {
        Style { color: false }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Secondary information (compaction lines, tool results).
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Errors.
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Good news.
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Warnings and retries.
    pub fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Tool names.
    pub fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }

    /// Headings.
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Any SGR code, for the `/context` bar.
    pub fn code(&self, code: &str, text: &str) -> String {
        self.paint(code, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_output_has_no_escapes() {
        let s = Style::plain();
        assert_eq!(s.red("x"), "x");
        let c = Style { color: true };
        assert_eq!(c.red("x"), "\x1b[31mx\x1b[0m");
    }
}
