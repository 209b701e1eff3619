//! `write_file` and `edit_file`: the tools that change files, both writing
//! through `whittle_store::write_atomic` so a crash never leaves half a file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use serde::Deserialize;
use similar::TextDiff;

use crate::editor_files::EditorFiles;
use crate::paths::real_path;
use crate::tool::{ToolContext, ToolOutput};
use crate::truncate::cap_middle;
use crate::typed::TypedTool;
use schemars::JsonSchema;
use whittle_protocol::group_digits;

/// Characters of diff shown after an edit.
const MAX_DIFF_CHARS: usize = 20_000;

/// The `write_file` tool.
#[derive(Debug, Default)]
pub struct WriteFileTool;

/// The `edit_file` tool.
#[derive(Debug, Default)]
pub struct EditFileTool;

/// What the model sends to `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileInput {
    /// File to write, relative to the workspace or absolute.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The complete new content.
    pub content: String,
}

/// What the model sends to `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileInput {
    /// File to edit, relative to the workspace or absolute.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The exact text to replace.
    #[schemars(length(min = 1))]
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// Where a write really lands: through symlinks to their target, so that
/// writing a symlinked file updates the file instead of replacing the link.
fn write_target(path: &Path) -> PathBuf {
    real_path(path).unwrap_or_else(|| path.to_path_buf())
}

/// Writes atomically and keeps the old file's permissions (an executable
/// script stays executable, a private one private from the first byte).
fn write_preserving(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let old_perms = fs::metadata(path).ok().map(|m| m.permissions());
    whittle_store::write_atomic_with_permissions(path, bytes, old_perms)
}

impl TypedTool for WriteFileTool {
    type Input = WriteFileInput;
    const NAME: &'static str = tool_names::WRITE_FILE;
    const DESCRIPTION: &'static str = "Create a file or replace its whole content; parent folders are created. Prefer edit_file \
         for changing part of an existing file. The path is relative to the workspace or absolute.";
    const READ_ONLY: bool = false;

    fn call<'a>(
        &'a self,
        input: WriteFileInput,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.path.is_empty() {
                return ToolOutput::error("invalid input for write_file: `path` is empty");
            }
            let path = ctx.resolve(&input.path);
            let shown = ctx.display(&path);
            if let Some(editor) = ctx.editor_writes() {
                return write_through_editor(editor, &path, &shown, &input.content).await;
            }
            let job =
                tokio::task::spawn_blocking(move || write_file(&path, &shown, &input.content));
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("write_file failed: {e}")))
        })
    }
}

/// Where `write_file` lands (through symlinks), whether a file was there,
/// and its folders made; or why it cannot be written.
fn prepare_write(path: &Path, shown: &str) -> Result<(PathBuf, bool), ToolOutput> {
    let target = write_target(path);
    if target.is_dir() {
        return Err(ToolOutput::error(format!(
            "{shown} is a directory; give a file path"
        )));
    }
    let existed = target.exists();
    if let Some(parent) = target.parent()
        && let Err(e) = fs::create_dir_all(parent)
    {
        return Err(ToolOutput::error(format!(
            "cannot create the folders for {shown}: {e}"
        )));
    }
    Ok((target, existed))
}

fn write_file(path: &Path, shown: &str, content: &str) -> ToolOutput {
    let (target, existed) = match prepare_write(path, shown) {
        Ok(prepared) => prepared,
        Err(out) => return out,
    };
    if let Err(e) = write_preserving(&target, content.as_bytes()) {
        return ToolOutput::error(format!("cannot write {shown}: {e}"));
    }
    written_report(shown, existed, content)
}

/// `write_file` when the editor writes: the same checks and folders, the
/// text handed to the editor.
async fn write_through_editor(
    editor: &dyn EditorFiles,
    path: &Path,
    shown: &str,
    content: &str,
) -> ToolOutput {
    let (target, existed) = match prepare_write(path, shown) {
        Ok(prepared) => prepared,
        Err(out) => return out,
    };
    if let Err(e) = editor.write_text(&target, content).await {
        return ToolOutput::error(format!("cannot write {shown}: {e}"));
    }
    written_report(shown, existed, content)
}

fn written_report(shown: &str, existed: bool, content: &str) -> ToolOutput {
    let lines = content.lines().count();
    ToolOutput::ok(format!(
        "{} {shown} ({} lines, {} bytes)",
        if existed { "Overwrote" } else { "Created" },
        group_digits(lines as u64),
        group_digits(content.len() as u64)
    ))
}

impl TypedTool for EditFileTool {
    type Input = EditFileInput;
    const NAME: &'static str = tool_names::EDIT_FILE;
    const DESCRIPTION: &'static str = "Replace exact text in a file. old_string must match the file exactly (whitespace and \
         indentation included) and exactly once, unless replace_all is true; include enough \
         surrounding lines to make it unique. Read the file first. Returns a unified diff.";
    const READ_ONLY: bool = false;

    fn call<'a>(&'a self, input: EditFileInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.path.is_empty() {
                return ToolOutput::error("invalid input for edit_file: `path` is empty");
            }
            let path = ctx.resolve(&input.path);
            let shown = ctx.display(&path);
            if ctx.editor_reads().is_some() || ctx.editor_writes().is_some() {
                return edit_through_editor(ctx, &path, &shown, &input).await;
            }
            let job = tokio::task::spawn_blocking(move || edit_file(&path, &shown, &input));
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("edit_file failed: {e}")))
        })
    }
}

fn edit_file(path: &Path, shown: &str, input: &EditFileInput) -> ToolOutput {
    let target = match edit_target(path, shown, input) {
        Ok(target) => target,
        Err(out) => return out,
    };
    let before = match read_disk_text(&target, shown) {
        Ok(text) => text,
        Err(out) => return out,
    };
    let (after, count) = match replace_text(&before, input, shown) {
        Ok(done) => done,
        Err(out) => return out,
    };
    if let Err(e) = write_preserving(&target, after.as_bytes()) {
        return ToolOutput::error(format!("cannot write {shown}: {e}"));
    }
    edited_report(shown, &before, &after, count)
}

/// `edit_file` when the editor reads or writes (or both): the text as the
/// editor has it, the result handed back to it.
async fn edit_through_editor(
    ctx: &ToolContext,
    path: &Path,
    shown: &str,
    input: &EditFileInput,
) -> ToolOutput {
    let target = match edit_target(path, shown, input) {
        Ok(target) => target,
        Err(out) => return out,
    };
    let from_editor = match ctx.editor_reads() {
        Some(editor) if target.is_file() => editor.read_text(&target).await.ok(),
        _ => None,
    };
    let before = match from_editor {
        Some(text) => match text_of(text.into_bytes(), shown) {
            Ok(text) => text,
            Err(out) => return out,
        },
        None => match read_disk_text(&target, shown) {
            Ok(text) => text,
            Err(out) => return out,
        },
    };
    let (after, count) = match replace_text(&before, input, shown) {
        Ok(done) => done,
        Err(out) => return out,
    };
    let written = match ctx.editor_writes() {
        Some(editor) => editor
            .write_text(&target, &after)
            .await
            .map_err(|e| e.to_string()),
        None => write_preserving(&target, after.as_bytes()).map_err(|e| e.to_string()),
    };
    if let Err(e) = written {
        return ToolOutput::error(format!("cannot write {shown}: {e}"));
    }
    edited_report(shown, &before, &after, count)
}

/// Checks the input and where it lands: a regular file (through symlinks).
fn edit_target(path: &Path, shown: &str, input: &EditFileInput) -> Result<PathBuf, ToolOutput> {
    if input.old_string.is_empty() {
        return Err(ToolOutput::error(
            "old_string is empty; use write_file to create a file or replace all of it",
        ));
    }
    if input.old_string == input.new_string {
        return Err(ToolOutput::error(
            "old_string and new_string are identical; nothing to change",
        ));
    }
    let target = write_target(path);
    if fs::metadata(&target).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return Err(ToolOutput::error(format!(
            "{shown} is not a regular file; edit_file edits files only"
        )));
    }
    Ok(target)
}

/// The file's text from the disk, or why it cannot be edited.
fn read_disk_text(target: &Path, shown: &str) -> Result<String, ToolOutput> {
    let bytes = match fs::read(target) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ToolOutput::error(format!(
                "file not found: {shown} (use write_file to create it)"
            )));
        }
        Err(e) if target.is_dir() => {
            return Err(ToolOutput::error(format!(
                "{shown} is a directory, not a file ({e})"
            )));
        }
        Err(e) => return Err(ToolOutput::error(format!("cannot read {shown}: {e}"))),
    };
    text_of(bytes, shown)
}

/// Text that edit_file may change: not binary, valid UTF-8.
fn text_of(bytes: Vec<u8>, shown: &str) -> Result<String, ToolOutput> {
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolOutput::error(format!(
            "{shown} is a binary file; edit_file edits text only"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolOutput::error(format!(
            "{shown} is not valid UTF-8; edit_file would corrupt it (use bash for byte-level edits)"
        ))
    })
}

/// The text after the edit and how many occurrences it replaced, or why
/// `old_string` does not fit.
fn replace_text(
    before: &str,
    input: &EditFileInput,
    shown: &str,
) -> Result<(String, usize), ToolOutput> {
    let (mut old, mut new) = (input.old_string.clone(), input.new_string.clone());
    let mut count = before.matches(old.as_str()).count();
    if count == 0 && before.contains("\r\n") && !old.contains('\r') {
        // The file uses CRLF line endings and the model wrote LF.
        let (old_crlf, new_crlf) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
        let crlf_count = before.matches(old_crlf.as_str()).count();
        if crlf_count > 0 {
            (old, new, count) = (old_crlf, new_crlf, crlf_count);
        }
    }
    match count {
        0 => {
            let mut msg = format!(
                "old_string was not found in {shown} (0 matches); it must match the file exactly, \
                 whitespace and indentation included. Read the file again and copy the text."
            );
            let trimmed = input.old_string.trim();
            if !trimmed.is_empty() && trimmed != input.old_string && before.contains(trimmed) {
                msg.push_str(" (It does match once leading/trailing whitespace is trimmed.)");
            }
            return Err(ToolOutput::error(msg));
        }
        n if n > 1 && !input.replace_all => {
            return Err(ToolOutput::error(format!(
                "old_string matches {n} times in {shown}; include more surrounding lines to make it \
                 unique, or set replace_all to true to replace all {n}"
            )));
        }
        _ => {}
    }
    let after = if input.replace_all {
        before.replace(old.as_str(), &new)
    } else {
        before.replacen(old.as_str(), &new, 1)
    };
    Ok((after, count))
}

fn edited_report(shown: &str, before: &str, after: &str, count: usize) -> ToolOutput {
    let diff = TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    ToolOutput::ok(format!(
        "Edited {shown}: replaced {count} occurrence{}.\n{}",
        if count == 1 { "" } else { "s" },
        cap_middle(&diff, MAX_DIFF_CHARS, &format!("{shown} as it is now"))
    ))
}
