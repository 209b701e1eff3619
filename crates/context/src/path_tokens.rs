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
    const SPLIT: &[char] = &['"', '\'', '`', ';', '|', '&', '<', '>', '(', ')', '=', ','];
    const LEADING: &[char] = &['[', '{', ':', '!', '?', '*', '@', '#'];
    const TRAILING: &[char] = &[']', '}', ':', '.', '!', '?', '*', '\\'];
    text.split(|c: char| c.is_whitespace() || SPLIT.contains(&c))
        .map(|t| t.trim_start_matches(LEADING).trim_end_matches(TRAILING))
        .filter(|t| is_path_like(t))
        .collect()
}

/// Whether one word looks like a path (see [`path_tokens`]).
pub fn is_path_like(token: &str) -> bool {
    let allowed = |c: char| c.is_alphanumeric() || "/._-~+@:%".contains(c);
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
    use super::path_tokens;

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
