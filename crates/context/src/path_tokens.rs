//! Path-like words in free text: what the ledger lists as files a tool
//! call mentioned, and what replay's survival probe counts as a path. One
//! definition, so that what is kept and what is measured agree on what a
//! path is.

use serde_json::Value;

/// Tool input fields that hold file contents or lists, not names: their
/// words are code, not paths the agent used.
pub const CONTENT_FIELDS: &[&str] = &[
    "content",
    "old_string",
    "new_string",
    "old_str",
    "new_str",
    "file_text",
    "new_source",
    "edits",
    "todos",
];

/// File extensions that make a dotted word a file name: without a list,
/// `django.conf` and `sys.path` in a `python -c` script would count, and
/// they are modules and attributes, not files.
const EXTENSIONS: &[&str] = &[
    "py",
    "pyi",
    "pyx",
    "ipynb",
    "rs",
    "go",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cxx",
    "java",
    "kt",
    "scala",
    "rb",
    "php",
    "js",
    "jsx",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "vue",
    "svelte",
    "swift",
    "m",
    "cs",
    "fs",
    "lua",
    "pl",
    "r",
    "jl",
    "ex",
    "exs",
    "erl",
    "hs",
    "ml",
    "zig",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "bat",
    "json",
    "jsonl",
    "toml",
    "yaml",
    "yml",
    "xml",
    "ini",
    "cfg",
    "env",
    "lock",
    "md",
    "rst",
    "txt",
    "adoc",
    "tex",
    "html",
    "htm",
    "css",
    "scss",
    "less",
    "sql",
    "csv",
    "tsv",
    "log",
    "out",
    "diff",
    "patch",
    "proto",
    "graphql",
    "mk",
    "cmake",
    "gradle",
    "properties",
    "dockerfile",
    "tf",
    "nix",
    "svg",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "pdf",
    "zip",
    "gz",
    "tgz",
    "tar",
    "whl",
    "so",
    "o",
    "a",
    "wasm",
    "bin",
    "db",
    "sqlite",
    "pem",
];

/// The path-like words of `text`: split at whitespace, quotes and shell
/// operators, trimmed of punctuation, kept when made of path characters and
/// holding a `/` or ending in a known file extension.
pub fn path_tokens(text: &str) -> Vec<&str> {
    const LEADING: &[char] = &['[', '{', ':', '!', '?', '*', '@', '#'];
    const TRAILING: &[char] = &[']', '}', ':', '.', '!', '?', '*', '\\'];
    words(text)
        .map(|t| t.trim_start_matches(LEADING).trim_end_matches(TRAILING))
        .filter(|t| is_path_like(t))
        .collect()
}

/// Where [`path_tokens`] splits text besides whitespace: quotes and shell
/// operators.
const SPLIT: &[char] = &['"', '\'', '`', ';', '|', '&', '<', '>', '(', ')', '=', ','];

/// ASCII bytes that split words: whitespace as `char::is_whitespace` says
/// (tab to carriage return, and space) and [`SPLIT`].
const SPLITS_ASCII: [bool; 128] = {
    let mut table = [false; 128];
    let mut b = 0x09;
    while b <= 0x0D {
        table[b] = true;
        b += 1;
    }
    table[b' ' as usize] = true;
    let mut k = 0;
    while k < SPLIT.len() {
        table[SPLIT[k] as usize] = true;
        k += 1;
    }
    table
};

/// `text.split(|c| c.is_whitespace() || SPLIT.contains(&c))`, with an
/// ASCII byte looked up in a table rather than decoded and compared with
/// each of [`SPLIT`]: every string of every tool call's input is split.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut at = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        while at < bytes.len() {
            let b = bytes[at];
            let (splits, len) = if b < 0x80 {
                (SPLITS_ASCII[usize::from(b)], 1)
            } else {
                let c = text[at..].chars().next().unwrap_or(' ');
                (c.is_whitespace(), c.len_utf8())
            };
            if splits {
                let word = &text[start..at];
                at += len;
                start = at;
                return Some(word);
            }
            at += len;
        }
        done = true;
        Some(&text[start..])
    })
}

/// Whether one word looks like a path (see [`path_tokens`]).
pub fn is_path_like(token: &str) -> bool {
    let allowed = |c: char| c.is_alphanumeric() || "/._-~+@:%".contains(c);
    // Neither a `/` nor a `.` (an extension's): not a path, known in one
    // pass over the bytes (most words of a command or a script).
    if !token.bytes().any(|b| b == b'/' || b == b'.') {
        return false;
    }
    !token.starts_with('-')
        && token.chars().any(char::is_alphanumeric)
        && token.chars().all(allowed)
        && (token.contains('/') || has_file_extension(token))
}

/// `main.rs`, `Cargo.lock`, `notes.md`; not `1.5`, `v2.0` or `sys.path`.
fn has_file_extension(token: &str) -> bool {
    let Some((stem, ext)) = token.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && !stem.ends_with('/')
        && EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext))
}

/// The string values of a tool input but for file contents, in order.
pub fn tool_input_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| tool_input_strings(v, out)),
        Value::Object(fields) => {
            for (key, v) in fields {
                if !CONTENT_FIELDS.contains(&key.as_str()) {
                    tool_input_strings(v, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{SPLIT, path_tokens, words};
    use proptest::prelude::*;

    proptest! {
        /// Split with the table, words are those the character test gives.
        #[test]
        fn words_are_split_as_by_the_character_test(
            text in "([ \t\n\u{b}\u{c}\r\u{85}\u{a0}\u{2028}\u{3000}\"'`;|&<>()=,/._a-z]|\\PC)*"
        ) {
            let by_char: Vec<&str> =
                text.split(|c: char| c.is_whitespace() || SPLIT.contains(&c)).collect();
            prop_assert_eq!(words(&text).collect::<Vec<_>>(), by_char);
        }
    }

    #[test]
    fn paths_are_words_with_a_slash_or_a_file_extension() {
        assert_eq!(
            path_tokens("cat src/main.rs | grep -n 'fn main' > /tmp/out.txt"),
            ["src/main.rs", "/tmp/out.txt"]
        );
        assert_eq!(
            path_tokens("cd crates/replay && cargo test --test=traces 2>/dev/null"),
            ["crates/replay", "/dev/null"]
        );
        assert_eq!(
            path_tokens("python3 \"scripts/run tests.py\" setup.cfg, (notes.md)."),
            ["scripts/run", "tests.py", "setup.cfg", "notes.md"]
        );
        assert_eq!(
            path_tokens("sed -i 's/a/b/' ./lib/x.py ~/.bashrc"),
            ["s/a/b/", "./lib/x.py", "~/.bashrc"]
        );
    }

    #[test]
    fn numbers_flags_globs_modules_and_prose_are_not_paths() {
        assert!(path_tokens("sleep 2.5 && echo v1.2 --out=3.14").is_empty());
        assert!(path_tokens("ls -la **/*.rs $HOME/x* --foo.bar").is_empty());
        assert!(path_tokens("grep -rn 'a\\.b' / .").is_empty());
        assert!(path_tokens("Run the tests and report").is_empty());
        assert!(path_tokens("import django.conf; sys.path.append(x); test@example.com").is_empty());
        assert_eq!(
            path_tokens("find . -name '*.py' -o -name x.toml"),
            ["x.toml"]
        );
    }
}
