//! Whether a person's message asks about the workspace, so the embedded model should look
//! before it answers.
//!
//! A 135M model answers "what does this project do?" from thin air, fluently. A hosted
//! model decides for itself when to read; the small one is made to call a tool first when
//! the question names something only the workspace can answer: a file, a path, code, tests,
//! the project. A greeting or a general question is left alone.

/// Words that point into the workspace.
const WORKSPACE_WORDS: &[&str] = &[
    "file",
    "files",
    "folder",
    "folders",
    "directory",
    "directories",
    "project",
    "repo",
    "repository",
    "workspace",
    "codebase",
    "code",
    "readme",
    "source",
    "src",
    "test",
    "tests",
    "function",
    "functions",
    "fn",
    "struct",
    "class",
    "module",
    "crate",
    "package",
    "defined",
    "defines",
    "define",
    "implemented",
    "implements",
    "config",
    "dependency",
    "dependencies",
    "license",
    "todo",
    "todos",
    "line",
    "lines",
    "here",
];

/// Extensions that make a word a file name.
const EXTENSIONS: &[&str] = &[
    "rs", "py", "js", "ts", "md", "toml", "json", "yaml", "yml", "txt", "c", "h", "go", "java",
    "sh", "cfg", "lock",
];

/// Whether `message` asks about the workspace (see the module doc).
pub fn asks_about_workspace(message: &str) -> bool {
    message
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | ';' | '(' | ')'))
        .map(|w| w.trim_matches(|c: char| matches!(c, '`' | '\'' | '"' | '.' | ':')))
        .filter(|w| !w.is_empty())
        .any(|word| {
            let lower = word.to_lowercase();
            WORKSPACE_WORDS.contains(&lower.as_str())
                || lower.contains('/')
                || lower
                    .rsplit_once('.')
                    .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
                || word.contains("::")
                || (word.contains('_') && word.chars().all(|c| c.is_alphanumeric() || c == '_'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_files_and_code_look_and_chat_does_not() {
        for q in [
            "What does this project do? Look around, then answer briefly.",
            "Which file defines parse_config?",
            "What does the README say?",
            "How many tests are in tests/unit.py?",
            "What is in Cargo.toml?",
            "Where is Shape::new?",
            "What version is in `VERSION.txt`?",
        ] {
            assert!(asks_about_workspace(q), "{q}");
        }
        for q in [
            "Say hi.",
            "What is 2 + 2?",
            "Tell me a joke.",
            "",
            "Thanks!",
        ] {
            assert!(!asks_about_workspace(q), "{q}");
        }
    }
}
