//! The system prompt.

use crate::instructions::ProjectInstructions;
use std::path::Path;
use whittle_context::prompts::AUTHORITY_RULE;
use whittle_protocol::tool_names;
use whittle_tools::Skills;

/// The system prompt of a session: [`system_prompt`], then the environment
/// block and the project's instructions. Computed once when the session
/// starts and unchanged after, so it stays in the cached prefix and no
/// compaction touches it.
pub fn session_system_prompt(
    workspace: &Path,
    skills: &Skills,
    extra: Option<&str>,
    environment: &str,
    instructions: &ProjectInstructions,
) -> String {
    let mut p = system_prompt(workspace, skills, None);
    for section in [environment, &instructions.render()] {
        if !section.is_empty() {
            p.push('\n');
            p.push_str(section);
        }
    }
    append_extra(&mut p, extra);
    p
}

/// The system prompt for a session in `workspace`. It stays the same for the
/// whole session, so the provider can cache it.
pub fn system_prompt(workspace: &Path, skills: &Skills, extra: Option<&str>) -> String {
    let mut p = format!(
        "You are whittle, a coding agent in a terminal. You work in the folder {} (the workspace): \
read and search files, run commands, and edit code to do what the user asks. Look before you \
change anything, make focused changes, and check your work (run the tests when there are some). \
Answer briefly and concretely when you are done.\n\n\
Long tool outputs may be moved out of the conversation to save space: `<persisted-output>` \
shows a preview and the file holding the whole output, and `[Earlier tool result saved at PATH]` \
replaces an old result. Read those files with read_file when you need them again. After a \
compaction, a `<state-ledger>` lists what the person said, the files touched and the commands \
run; the `recall` tool searches everything that left the context. Call the \
`compact` tool after finishing a stage of work whose details you no longer need.\n\n{AUTHORITY_RULE}\n",
        workspace.display()
    );
    let listing = skills.prompt_listing();
    if !listing.is_empty() {
        p.push('\n');
        p.push_str(&listing);
    }
    append_extra(&mut p, extra);
    p
}

/// The tools the embedded model is given: a 135M model picks the right one of three far
/// more often than of eleven, and each schema left out is prompt it need not read. `bash`
/// is not among them: offered, the model copied the tools section's example and ran
/// `echo` for questions about files (measured on bench/embedded_questions.py).
pub const EMBEDDED_TOOLS: [&str; 3] = [tool_names::READ_FILE, tool_names::GLOB, tool_names::GREP];

/// The system prompt of a session on the embedded model: a few sentences a small model
/// can follow (look, then answer from what was found) instead of the full prompt, which
/// costs a second of prefill on two cores and which it does not follow anyway. The
/// project's instructions and the config's extra still come after it.
pub fn embedded_system_prompt(
    workspace: &Path,
    extra: Option<&str>,
    instructions: &ProjectInstructions,
) -> String {
    let mut p = format!(
        "You are whittle, a coding assistant working in the folder {}. To answer a question about the project, first call a tool to look: glob lists files, read_file reads one, grep searches their text. Then answer in one or two sentences from what the tool returned.\n",
        workspace.display()
    );
    let instructions = instructions.render();
    if !instructions.is_empty() {
        p.push('\n');
        p.push_str(&instructions);
    }
    append_extra(&mut p, extra);
    p
}

/// The config's `system_prompt_extra`, last.
fn append_extra(p: &mut String, extra: Option<&str>) {
    if let Some(extra) = extra.filter(|e| !e.trim().is_empty()) {
        p.push('\n');
        p.push_str(extra.trim());
        p.push('\n');
    }
}
