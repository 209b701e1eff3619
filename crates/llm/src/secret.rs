//! API keys and tokens, kept out of every log, error and Debug print.

use std::fmt;

/// The environment variables the providers read credentials from. Tool
/// processes must not inherit them, and their values are redacted from
/// everything whittle writes.
pub const KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
];

/// A credential. It has no `Display` and its `Debug` prints `[redacted]`, so
/// it cannot end up in a message, a transcript or a panic by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The credential itself, for the one place that puts it in a header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the credential replaced, for server
    /// messages that might echo what they were sent.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            // Too short to be a real key; replacing it would mangle ordinary text.
            return text.to_owned();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("sk-ant-very-secret");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some([redacted])");
        assert_eq!(
            s.scrub("bad key sk-ant-very-secret!"),
            "bad key [redacted]!"
        );
    }
}
