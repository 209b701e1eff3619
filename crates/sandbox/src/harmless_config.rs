//! Whether a git config file a command wrote can make git run a program.
//!
//! git has dozens of settings that name a program (`core.fsmonitor`,
//! `core.hooksPath`, filter and diff drivers, `!` aliases, includes that
//! pull in another file...) and gains new ones; a list of the dangerous
//! ones would miss the next. So the rule is the other way round: a config
//! is harmless only when every setting in it is one `git init`, `git clone`
//! or ordinary work writes and none of them runs anything. Anything else,
//! or anything this reader does not understand, counts as dangerous.

/// Settings that run nothing, as `section.key` (lowercase; `*` stands for
/// any subsection: `remote.origin.url` is `remote.*.url`).
const HARMLESS: &[&str] = &[
    // What `git init` writes.
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    // What `git clone` and branches write.
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "remote.*.mirror",
    "branch.*.remote",
    "branch.*.merge",
    "branch.*.rebase",
    "submodule.*.url",
    "submodule.*.active",
    // What git-lfs writes on clone and pull (its filters live in the
    // person's own config, not here).
    "lfs.repositoryformatversion",
    // What a command commonly sets.
    "user.name",
    "user.email",
    "init.defaultbranch",
    "core.autocrlf",
    "core.eol",
    "core.quotepath",
    "commit.gpgsign",
    "tag.gpgsign",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "advice.detachedhead",
    "color.ui",
    "gc.auto",
    "receive.denycurrentbranch",
];

/// True when every setting in `text` is one of [`HARMLESS`]. A line this
/// reader does not understand (a value continued on the next line, a
/// setting on a section's line) makes it false.
#[cfg(test)]
fn is_harmless_config(text: &[u8]) -> bool {
    harmless_part(text).is_some_and(|part| !part.dropped)
}

/// The settings of a config that run nothing, kept, and whether anything
/// else was dropped.
pub(crate) struct HarmlessPart {
    /// The harmless settings with their section lines, comments and empty
    /// lines, in order: a config git reads as those settings alone.
    pub text: String,
    /// Whether a setting or a line this reader does not understand was
    /// left out.
    pub dropped: bool,
}

/// What of `text` is harmless: each line kept is a comment, an empty line,
/// a section line of a form this reader takes, or one [`HARMLESS`]
/// setting under such a section, on one line. A setting whose value goes
/// on past its line, and every line of a section this reader does not
/// take, are dropped. `None` when `text` is not UTF-8.
pub(crate) fn harmless_part(text: &[u8]) -> Option<HarmlessPart> {
    let text = std::str::from_utf8(text).ok()?;
    let mut part = HarmlessPart {
        text: String::new(),
        dropped: false,
    };
    let mut section: Option<String> = None;
    // A section's line is written with the first setting kept under it:
    // a section left empty is left out.
    let mut header: Option<&str> = None;
    let mut continued = false;
    for raw in text.lines() {
        let line = raw.trim();
        let was_continued = std::mem::replace(&mut continued, line.ends_with('\\'));
        if was_continued {
            part.dropped = true;
        } else if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            if header.is_none() {
                part.text.push_str(raw);
                part.text.push('\n');
            }
        } else if line.starts_with('[') {
            section = section_name(line);
            header = Some(raw);
            part.dropped |= section.is_none();
        } else if section
            .as_deref()
            .is_some_and(|section| setting_is_harmless(section, line))
        {
            for kept in header.take().into_iter().chain([raw]) {
                part.text.push_str(kept);
                part.text.push('\n');
            }
        } else {
            part.dropped = true;
        }
    }
    Some(part)
}

/// `[core]` → `core`, `[remote "origin"]` → `remote.*`; `None` for what
/// this reader does not take: a setting after the `]`, the old
/// `[section.sub]` form, anything else.
fn section_name(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let (name, sub) = match inner.split_once(' ') {
        Some((name, sub)) => (name, Some(sub.trim())),
        None => (inner, None),
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let name = name.to_ascii_lowercase();
    match sub {
        None => Some(name),
        Some(sub)
            if sub.len() >= 2
                && sub.starts_with('"')
                && sub.ends_with('"')
                && !sub[1..sub.len() - 1].contains(['"', '\\', ']'])
                && !sub.chars().any(char::is_control) =>
        {
            Some(format!("{name}.*"))
        }
        Some(_) => None,
    }
}

/// Whether `line` (`key = value`, or a bare `key`) in `section` sets one
/// of [`HARMLESS`] on one line.
fn setting_is_harmless(section: &str, line: &str) -> bool {
    let key = line.split(['=', ' ', '\t']).next().unwrap_or_default();
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return false;
    }
    // A value continued on the next line would be read as a setting here;
    // a control character (a NUL, a lone carriage return) is not something
    // this reader knows how git takes.
    if line.ends_with('\\') || line.chars().any(|c| c.is_control() && c != '\t') {
        return false;
    }
    let full = format!("{section}.{}", key.to_ascii_lowercase());
    HARMLESS.contains(&full.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_git_init_and_clone_write_is_harmless() {
        let init = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert!(is_harmless_config(init));
        let clone = "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n# a comment\n[user]\n\temail = a@b\n";
        assert!(is_harmless_config(clone.as_bytes()));
        let lfs = "[core]\n\tbare = false\n[lfs]\n\trepositoryformatversion = 0\n";
        assert!(is_harmless_config(lfs.as_bytes()));
        assert!(is_harmless_config(b""));
    }

    #[test]
    fn a_setting_that_runs_a_program_or_is_not_understood_is_not() {
        for text in [
            "[core]\n\tfsmonitor = /tmp/evil\n",
            "[core]\n\thooksPath = ../h\n",
            "[CORE]\n\tPager = evil\n",
            "[alias]\n\tst = !evil\n",
            "[include]\n\tpath = ../other\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[filter \"x\"]\n\tclean = evil\n",
            "[remote \"o\"]\n\tuploadpack = evil\n",
            "[submodule \"s\"]\n\tupdate = !evil\n",
            // Forms this reader does not take.
            "[core] fsmonitor = evil\n",
            "[core.x]\n\turl = y\n",
            "[user]\n\tname = a \\\n\tfsmonitor = evil\n",
            "bare = false\n",
            "[core]\n\t\"quoted\" = 1\n",
            "[user]\n\temail = a\0b\n",
            "[user]\n\temail = a\rfsmonitor = evil\n",
        ] {
            assert!(!is_harmless_config(text.as_bytes()), "{text}");
        }
        assert!(!is_harmless_config(b"[core]\n\xff\n"));
    }

    #[test]
    fn the_harmless_part_keeps_only_settings_that_run_nothing() {
        let text = "# made by a command\n[core]\n\tbare = false\n\tfsmonitor = evil\n\tpager = a \\\n\tmore\n[remote \"origin\"]\n\turl = https://x\n[alias]\n\tst = !evil\n\tco = checkout\n[remote \"a\"] [core\"]\n\turl = y\n[user]\n\temail = a@b\n";
        let part = harmless_part(text.as_bytes()).unwrap();
        assert!(part.dropped);
        assert_eq!(
            part.text,
            "# made by a command\n[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://x\n[user]\n\temail = a@b\n"
        );
        // What is kept is harmless as a whole, and kept whole again.
        assert!(is_harmless_config(part.text.as_bytes()));
        let again = harmless_part(part.text.as_bytes()).unwrap();
        assert!(!again.dropped);
        assert_eq!(again.text, part.text);
    }
}
