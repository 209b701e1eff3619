//! The files a shell command names: the ledger's small shell-word scan.
//!
//! It reads the command with the permission check's parser (quotes removed,
//! redirections apart, here-document bodies skipped, substitutions parsed as
//! commands of their own) and keeps the words that name files: arguments
//! with a `/` or a file extension, and redirection targets. It does not run
//! or resolve anything: a word is kept as written, so the ledger shows what
//! the command said.

use whittle_shell::{Parsed, SimpleCommand, is_assignment};

/// Programs whose first operand is a pattern or a script, not a file.
const PATTERN_FIRST: [&str; 9] = [
    "grep", "egrep", "fgrep", "rg", "sed", "awk", "gawk", "jq", "perl",
];

/// Programs whose `-c`/`-e` argument is code, not a file.
const CODE_FLAG: [&str; 10] = [
    "python", "python3", "bash", "sh", "zsh", "node", "ruby", "perl", "sed", "awk",
];

/// Devices and descriptors, which are not files a person would look for.
fn is_device(word: &str) -> bool {
    word.starts_with("/dev/") || word.starts_with("/proc/self/fd")
}

/// The words of `command` that name files, in order, each once.
pub(crate) fn command_paths(command: &str) -> Vec<String> {
    let parsed: Parsed = whittle_shell::parse(command);
    let mut out: Vec<String> = Vec::new();
    let mut keep = |w: &str| {
        let w = w.trim_end_matches([',', ';', ':', ')']);
        if !w.is_empty() && !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    };
    for simple in &parsed.commands {
        for word in operand_paths(simple) {
            keep(word);
        }
        for r in &simple.redirects {
            if (r.writes_file() || r.reads_file()) && looks_like_file(&r.target) {
                keep(&r.target);
            }
        }
    }
    out
}

/// The operands of one simple command that look like files.
fn operand_paths(simple: &SimpleCommand) -> Vec<&str> {
    let mut words = simple
        .words
        .iter()
        .map(String::as_str)
        .skip_while(|w| is_assignment(w));
    let Some(program) = words.next() else {
        return Vec::new();
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let mut paths = Vec::new();
    if looks_like_file(program) && program.contains('/') {
        // `./run.sh`, `scripts/test`: the program is a file of the workspace.
        paths.push(program);
    }
    let mut skip_next = false;
    let mut pattern_pending = PATTERN_FIRST.contains(&name);
    let code_flag = CODE_FLAG.contains(&name);
    for word in words {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if code_flag && matches!(word, "-c" | "-e" | "--eval" | "--expression") {
            // The code itself, and for sed/grep -e the pattern is given.
            skip_next = true;
            pattern_pending = false;
            continue;
        }
        if let Some(value) = word.strip_prefix("--").and_then(|w| w.split_once('=')) {
            if looks_like_file(value.1) {
                paths.push(value.1);
            }
            continue;
        }
        if word.starts_with('-') {
            continue;
        }
        if std::mem::take(&mut pattern_pending) {
            continue;
        }
        if looks_like_file(word) {
            paths.push(word);
        }
    }
    paths
}

/// A word that names a file: it has a `/` or a file extension, and is not a
/// URL, a device, an expansion, a number or a pattern.
fn looks_like_file(word: &str) -> bool {
    if word.is_empty()
        || word.len() > 300
        || word.contains("://")
        || word.contains(['$', '`', '*', '?', '{', '\n', '<', '>', '|', '\'', '"'])
        || is_device(word)
        || word.chars().any(char::is_whitespace)
    {
        return false;
    }
    if word.contains('/') {
        // `s/a/b/` (a sed script) and `origin/main` pass too; the first is
        // skipped as sed's script, the second is cheap to keep.
        return word.chars().any(|c| c.is_alphanumeric() || c == '.');
    }
    has_extension(word)
}

/// `main.rs`, `Cargo.toml`, `.env`; not `1.5`, `v2.0` or `...`.
fn has_extension(word: &str) -> bool {
    let Some((stem, ext)) = word.rsplit_once('.') else {
        return false;
    };
    let ext_ok = (1..=8).contains(&ext.len())
        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        && ext.bytes().any(|b| b.is_ascii_alphabetic());
    let stem_ok = stem.is_empty() || stem.chars().any(|c| c.is_alphabetic() || c == '_');
    ext_ok && stem_ok
}

#[cfg(test)]
mod tests {
    use super::command_paths;

    fn paths(command: &str) -> Vec<String> {
        command_paths(command)
    }

    #[test]
    fn real_commands_from_recorded_sessions() {
        // Commands as agents wrote them in the shared traces.
        assert_eq!(paths("sed -i 's/foo/bar/g' src/lib.rs"), ["src/lib.rs"]);
        assert_eq!(
            paths("cd crates/context && cargo test --lib 2>&1 | tail -20"),
            ["crates/context"]
        );
        assert_eq!(
            paths("cat > notes/plan.md <<'EOF'\n# Plan\nsee other/file.txt\nEOF"),
            ["notes/plan.md"]
        );
        assert_eq!(
            paths("python3 scripts/gen.py --out=build/out.json data.csv"),
            ["scripts/gen.py", "build/out.json", "data.csv"]
        );
        assert_eq!(
            paths("git diff HEAD~1 -- README.md \"docs/a b.md\""),
            ["README.md"]
        );
        assert_eq!(paths("grep -rn 'fn main' src/ | head -5"), ["src/"]);
        assert_eq!(paths("ls -la /tmp/x.log > /dev/null 2>&1"), ["/tmp/x.log"]);
        assert_eq!(
            paths("python3 -c 'import x; open(\"a.txt\")' && ./run.sh config.toml"),
            ["./run.sh", "config.toml"]
        );
        assert_eq!(
            paths("FOO=1 node build.js; echo $(cat VERSION.txt)"),
            ["build.js", "VERSION.txt"]
        );
        assert_eq!(
            paths("curl -s https://example.com/a.json -o out/a.json"),
            ["out/a.json"]
        );
    }

    #[test]
    fn words_that_are_not_files() {
        for command in [
            "echo 1.5 v2.0 ...",
            "cargo test -- --nocapture",
            "rm -rf $BUILD/*",
            "awk '{print $1}' ",
            "sed -e 's/a/b/' ",
            "",
            "'unterminated",
        ] {
            assert!(
                paths(command).is_empty(),
                "{command:?}: {:?}",
                paths(command)
            );
        }
    }

    #[test]
    fn each_path_once() {
        assert_eq!(paths("cp a.rs b.rs && cat a.rs"), ["a.rs", "b.rs"]);
    }
}
