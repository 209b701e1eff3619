//! How a whittle tool call looks in the editor: its kind, a title, the
//! places it touches, and what it produced (text, a diff, command output).

use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolKind,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use whittle_protocol::tool_names;

/// The ACP kind of a tool, so the editor picks the right icon.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        tool_names::READ_FILE | tool_names::LOAD_SKILL | tool_names::RECALL => ToolKind::Read,
        tool_names::WRITE_FILE | tool_names::EDIT_FILE => ToolKind::Edit,
        tool_names::BASH => ToolKind::Execute,
        tool_names::GLOB | tool_names::GREP => ToolKind::Search,
        tool_names::TODO_WRITE | tool_names::TASK => ToolKind::Think,
        n if n.contains("fetch") => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The file a tool works on, absolute.
pub fn tool_path(workspace: &Path, name: &str, input: &Value) -> Option<PathBuf> {
    match name {
        tool_names::READ_FILE | tool_names::WRITE_FILE | tool_names::EDIT_FILE => {
            let p = str_field(input, "path").or_else(|| str_field(input, "file_path"))?;
            Some(workspace.join(p))
        }
        tool_names::GLOB | tool_names::GREP => {
            Some(workspace.join(str_field(input, "path").unwrap_or(".")))
        }
        _ => None,
    }
}

/// A one-line title: what the call does, in the words of its input.
pub fn tool_title(name: &str, input: &Value) -> String {
    let detail = match name {
        tool_names::BASH => str_field(input, "command"),
        tool_names::READ_FILE | tool_names::WRITE_FILE | tool_names::EDIT_FILE => {
            str_field(input, "path").or_else(|| str_field(input, "file_path"))
        }
        tool_names::GLOB | tool_names::GREP => str_field(input, "pattern"),
        tool_names::TASK => str_field(input, "description"),
        _ => None,
    };
    match detail {
        Some(d) => {
            let line = d.lines().next().unwrap_or_default();
            let clipped: String = line.chars().take(120).collect();
            format!("{name}: {clipped}")
        }
        None => name.to_string(),
    }
}

/// The first line a read starts at, for the editor to follow along.
fn start_line(input: &Value) -> Option<u32> {
    input
        .get("offset")
        .and_then(Value::as_u64)
        .and_then(|l| u32::try_from(l).ok())
}

/// The tool call as announced when it starts.
pub fn started_call(workspace: &Path, id: &str, name: &str, input: &Value) -> ToolCall {
    let locations = tool_path(workspace, name, input)
        .map(|p| vec![ToolCallLocation::new(p).line(start_line(input))])
        .unwrap_or_default();
    ToolCall::new(id.to_string(), tool_title(name, input))
        .kind(tool_kind(name))
        .status(agent_client_protocol::v1::schema::ToolCallStatus::InProgress)
        .locations(locations)
        .raw_input(input.clone())
}

/// Text as tool call content.
pub fn text_content(text: impl Into<String>) -> ToolCallContent {
    ToolCallContent::Content(agent_client_protocol::v1::schema::Content::new(
        ContentBlock::Text(TextContent::new(text)),
    ))
}

/// A file an edit changed: its path, its text before and, when the editor
/// took the write, its text after (else the disk has it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditedFile {
    /// The file.
    pub path: PathBuf,
    /// Its text before the edit; `None` when it did not exist.
    pub before: Option<String>,
    /// Its text after, when not on disk.
    pub after: Option<String>,
}

/// What a finished call shows: the diff of an edit (the file before and
/// after), the output of a command in a fence, else the output.
pub fn finished_content(
    name: &str,
    output: &str,
    is_error: bool,
    edit: Option<EditedFile>,
) -> Vec<ToolCallContent> {
    let mut content = Vec::new();
    if let (false, Some(edit)) = (is_error, edit)
        && let Some(new) = edit
            .after
            .or_else(|| std::fs::read_to_string(&edit.path).ok())
    {
        content.push(ToolCallContent::Diff(
            Diff::new(edit.path, new).old_text(edit.before),
        ));
    }
    if name == tool_names::BASH {
        content.push(text_content(format!("```\n{}\n```", output.trim_end())));
    } else if !output.is_empty() {
        content.push(text_content(output));
    }
    content
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_titles_and_paths_follow_the_tool() {
        assert_eq!(tool_kind("bash"), ToolKind::Execute);
        assert_eq!(tool_kind("edit_file"), ToolKind::Edit);
        assert_eq!(tool_kind("mcp__x__fetch"), ToolKind::Fetch);
        assert_eq!(tool_kind("mcp__x__y"), ToolKind::Other);
        let input = json!({"command": "ls -la\necho hi"});
        assert_eq!(tool_title("bash", &input), "bash: ls -la");
        let input = json!({"path": "src/a.rs"});
        assert_eq!(
            tool_path(Path::new("/w"), "read_file", &input),
            Some(PathBuf::from("/w/src/a.rs"))
        );
        assert_eq!(tool_path(Path::new("/w"), "bash", &input), None);
    }
}
