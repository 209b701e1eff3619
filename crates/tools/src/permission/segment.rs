//! One command that will run, after unwrapping, as the rules read it: its
//! program name, its options and its operands.

use whittle_shell::Redirect;

/// One command that will run, after unwrapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The command as written (assignments dropped), for allow rules.
    pub text: String,
    /// The command that actually runs, wrappers removed.
    pub argv: Vec<String>,
    /// Redirections of the command as written.
    pub redirects: Vec<Redirect>,
    /// Fed by a pipe.
    pub piped_in: bool,
}

impl Segment {
    /// The unwrapped command as one line, for allow rules.
    pub fn inner_text(&self) -> String {
        self.argv.join(" ")
    }

    /// The program name: the basename of `argv[0]`, without a leading `\`.
    pub fn name(&self) -> &str {
        program_name(self.argv.first().map_or("", String::as_str))
    }
}

/// The basename of a program word, without a leading `\`.
pub(super) fn program_name(word: &str) -> &str {
    let word = word.trim_start_matches('\\');
    word.rsplit('/').next().unwrap_or(word)
}

/// True for `-r`, `-R`, `-rf`, `-fr`, `--recursive` and friends.
pub(super) fn has_recursive_flag(args: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| {
        a == "--recursive" || (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
    })
}

/// The non-option arguments (everything after `--` counts).
pub(super) fn operands(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut after_dashdash = false;
    for a in args {
        if !after_dashdash && a == "--" {
            after_dashdash = true;
        } else if after_dashdash || !a.starts_with('-') || a == "-" {
            out.push(a.as_str());
        }
    }
    out
}
