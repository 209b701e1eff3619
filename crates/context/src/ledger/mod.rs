//! The state ledger: the facts of a session that compaction must not lose,
//! kept mechanically instead of trusted to a summary.
//!
//! A summary is prose, and forgets what it was not asked to keep: measured
//! on recorded sessions, a model's summary keeps about a third of the paths
//! the agent used and fewer than one in ten of its commands. The harness
//! sees every message and tool call, so it keeps those facts itself: every
//! message the person wrote, the files touched (from our tools' inputs and
//! from the words of shell commands), the commands with their exit status,
//! the errors, the todo list, and where the removed material is. Every
//! message that replaces history carries the ledger of what it replaced,
//! between `<state-ledger>` lines; the ledger of a later compaction reads
//! the earlier ones back, so no fact drops out because compaction ran twice.
//!
//! Pure: built from messages, rendered to text, read back from text.

mod choose;
mod command_paths;
mod find;
mod memo;
mod render;
mod tree;

pub(crate) use memo::LedgerMemo;
pub use render::{LEDGER_CLOSE, LEDGER_OPEN, ledger_file_paths, ledger_section};

use crate::first_line;
use crate::markers::{COMPACTED_HEADER, REACTIVE_HEADER, is_archive_marker};
use crate::path_tokens::{path_tokens, tool_input_strings};
use crate::tool_names;
use crate::{Block, Content, Message, Role, ToolResult, ToolUse};
use command_paths::command_paths;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use whittle_store::saved_path_text;

/// The mechanically kept facts of the messages a compaction removes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// What the person wrote, oldest first.
    person: Vec<PersonMessage>,
    /// Files in the order first touched.
    files: Vec<FileUse>,
    /// Where each path is in `files`: a long session touches thousands of
    /// files, and each touch looks its path up.
    file_at: FileIndex,
    /// Commands, oldest first.
    commands: Vec<CommandRun>,
    /// First line of each failed tool call, oldest first.
    errors: Vec<ErrorLine>,
    /// The newest todo list, one line per item.
    todos: Vec<String>,
    /// Transcripts holding removed messages.
    places: BTreeSet<String>,
    /// Folders of saved tool outputs, and how many each holds: counted,
    /// not listed, so that a long session's ledger stays small.
    outputs: BTreeMap<String, usize>,
    /// Entries dropped to stay in budget, carried from earlier ledgers.
    omitted: Omitted,
    /// The ledger's clock: every fact recorded gets the next tick, so that
    /// the newest facts of any kind can go first when over budget.
    clock: u64,
}

/// One message of the person's.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PersonMessage {
    /// The message, or the head an earlier ledger kept of it.
    text: String,
    /// For a head an earlier ledger kept: how long the whole is and where.
    rest: Option<String>,
    /// Where the whole message is archived, should it be cut when shown.
    whole_at: Option<String>,
}

/// One file and how it was used.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileUse {
    path: String,
    /// Tool (or `bash`) and how many times, in first-use order.
    uses: Vec<(String, u32)>,
    /// When it was last touched (the ledger's clock), so that the least
    /// recently touched files go first when over budget.
    last: u64,
}

/// How a path only mentioned by a call is labelled: `bash mention`.
const MENTION: &str = " mention";

impl FileUse {
    /// Whether a tool read, wrote or ran it (not only mentioned it).
    fn used(&self) -> bool {
        self.uses.iter().any(|(tool, _)| !tool.ends_with(MENTION))
    }
}

/// One command and its exit status, when known.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CommandRun {
    line: String,
    exit: Option<String>,
    /// When it was run (the ledger's clock).
    at: u64,
}

/// The first line of a failed tool call's result.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ErrorLine {
    line: String,
    /// When it was recorded (the ledger's clock).
    at: u64,
}

/// Counts of entries a budget left out, and where they can be found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Omitted {
    files: usize,
    commands: usize,
    errors: usize,
    /// Transcripts that hold the left-out entries' messages.
    places: BTreeSet<String>,
}

impl Omitted {
    fn is_empty(&self) -> bool {
        self.files + self.commands + self.errors == 0
    }
}

/// Characters of one error or todo line.
const LINE_CHARS: usize = 200;
/// Characters of a command's first line: enough to recognise it, short
/// enough that a long session's commands fit the budget.
const COMMAND_CHARS: usize = 120;

impl Ledger {
    /// The ledger of `messages`: earlier ledgers in compaction markers are
    /// read back and carried, everything else is recorded. `transcript` is
    /// where these messages are archived (named for long person messages).
    pub fn of(messages: &[Message], transcript: Option<&str>) -> Ledger {
        Ledger::recorded(messages, transcript, true)
    }

    /// The ledger of what `messages` hold outside the ledgers of their
    /// compaction markers: what a summarizer that reads those markers in
    /// the messages themselves has not seen in a ledger yet. (The pipeline
    /// keeps it up to date in the history instead: `LedgerMemo`.)
    #[cfg(test)]
    pub(crate) fn since_markers(messages: &[Message], transcript: Option<&str>) -> Ledger {
        Ledger::recorded(messages, transcript, false)
    }

    fn recorded(messages: &[Message], transcript: Option<&str>, carry_markers: bool) -> Ledger {
        let mut ledger = Ledger::default();
        let mut recorder = Recorder {
            carry_markers,
            ..Recorder::default()
        };
        for message in messages {
            recorder.record(&mut ledger, message, transcript);
        }
        if let Some(t) = transcript {
            ledger.places.insert(t.to_owned());
        }
        ledger
    }

    /// Whether nothing was recorded (the transcript alone is no fact: the
    /// marker names it anyway).
    pub fn is_empty(&self) -> bool {
        self.person.is_empty()
            && self.files.is_empty()
            && self.commands.is_empty()
            && self.errors.is_empty()
            && self.todos.is_empty()
            && self.outputs.is_empty()
            && self.omitted.is_empty()
    }

    /// The person's messages as kept (whole, or head), oldest first.
    pub fn person_messages(&self) -> impl Iterator<Item = &str> {
        self.person.iter().map(|p| p.text.as_str())
    }

    /// The paths of the files touched, in first-use order.
    pub fn file_paths(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|f| f.path.as_str())
    }

    /// The commands' lines, oldest first.
    pub fn command_lines(&self) -> impl Iterator<Item = &str> {
        self.commands.iter().map(|c| c.line.as_str())
    }

    /// Appends `newer`'s entries after this ledger's (an earlier ledger read
    /// back, then what came after it), on this ledger's clock in the order
    /// `newer` recorded them.
    fn absorb(&mut self, newer: Ledger) {
        let fresh = self.files.is_empty();
        self.absorb_with(newer, fresh);
    }

    /// [`Ledger::absorb`]; `fresh`: this ledger has no files yet.
    fn absorb_with(&mut self, newer: Ledger, fresh: bool) {
        self.person.extend(newer.person);
        enum Fact {
            File(FileUse),
            Command(CommandRun),
            Error(ErrorLine),
        }
        let mut facts: Vec<(u64, Fact)> = Vec::new();
        facts.extend(newer.files.into_iter().map(|f| (f.last, Fact::File(f))));
        facts.extend(newer.commands.into_iter().map(|c| (c.at, Fact::Command(c))));
        facts.extend(newer.errors.into_iter().map(|e| (e.at, Fact::Error(e))));
        facts.sort_by_key(|(at, _)| *at);
        // Into a ledger without files (a marker's, read back first), each
        // file is new: it is moved in whole, its uses on the clock as
        // `touch` would put them, without looking for it among the others.
        // (`newer`'s files are distinct, each tool once: recorded by `touch`.)
        for (_, fact) in facts {
            match fact {
                Fact::File(mut f) if fresh => {
                    if !f.uses.is_empty() {
                        self.clock += f.uses.len() as u64;
                        f.last = self.clock;
                        self.push_file(f);
                    }
                }
                Fact::File(f) => {
                    for (tool, n) in f.uses {
                        self.touch(&f.path, &tool, n);
                    }
                }
                Fact::Command(c) => self.push_command(c.line, c.exit),
                Fact::Error(e) => self.push_error(e.line),
            }
        }
        if !newer.todos.is_empty() {
            self.todos = newer.todos;
        }
        self.places.extend(newer.places);
        for (dir, n) in newer.outputs {
            *self.outputs.entry(dir).or_default() += n;
        }
        self.omitted.files += newer.omitted.files;
        self.omitted.commands += newer.omitted.commands;
        self.omitted.errors += newer.omitted.errors;
        self.omitted.places.extend(newer.omitted.places);
    }

    /// The next tick of the ledger's clock.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn push_command(&mut self, line: String, exit: Option<String>) {
        let at = self.tick();
        self.commands.push(CommandRun { line, exit, at });
    }

    fn push_error(&mut self, line: String) {
        let at = self.tick();
        self.errors.push(ErrorLine { line, at });
    }

    fn touch(&mut self, path: &str, tool: &str, times: u32) {
        let at = self.file_at.find(&self.files, path);
        self.touch_at(at, path, tool, times);
    }

    /// Appends a file not in `files` yet.
    fn push_file(&mut self, file: FileUse) -> usize {
        self.files.push(file);
        self.files.len() - 1
    }

    /// [`Ledger::touch`], the file already looked for: `at` is where it is
    /// in `files`, `None` when it is not there. Returns where it is now.
    fn touch_at(&mut self, at: Option<usize>, path: &str, tool: &str, times: u32) -> usize {
        let seq = self.tick();
        match at {
            Some(i) => {
                let f = &mut self.files[i];
                f.last = seq;
                match f.uses.iter_mut().find(|(t, _)| t == tool) {
                    Some((_, n)) => *n += times,
                    None => f.uses.push((tool.to_owned(), times)),
                }
                i
            }
            None => self.push_file(FileUse {
                path: path.to_owned(),
                uses: vec![(tool.to_owned(), times)],
                last: seq,
            }),
        }
    }

    /// [`Ledger::touch_at`] of a path not in `files`, given owned.
    fn touch_new(&mut self, path: String, tool: &str, times: u32) {
        let seq = self.tick();
        self.push_file(FileUse {
            path,
            uses: vec![(tool.to_owned(), times)],
            last: seq,
        });
    }
}

/// Where each path is in a ledger's files, indexed as far as a lookup has
/// needed: a ledger that is only read back and rendered (a marker's, the
/// middle snip_compact archives) never builds it.
#[derive(Clone, Debug, Default)]
struct FileIndex {
    at: HashMap<String, usize>,
    /// Files before this one are in `at`.
    upto: usize,
}

impl FileIndex {
    /// Where `path` is in `files` (the ledger's, only ever appended to), its
    /// first place if it is there twice (as a linear search finds it).
    fn find(&mut self, files: &[FileUse], path: &str) -> Option<usize> {
        for (i, f) in files.iter().enumerate().skip(self.upto) {
            self.at.entry(f.path.clone()).or_insert(i);
        }
        self.upto = files.len();
        self.at.get(path).copied()
    }
}

/// Derived from the files alone: two ledgers with the same files are equal
/// however far each has indexed them.
impl PartialEq for FileIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for FileIndex {}

/// Remembers which tool call each result answers while messages are read.
#[derive(Clone, Debug, Default)]
struct Recorder {
    /// tool_use id -> index of its command in the ledger.
    command_of: HashMap<String, usize>,
    /// tool_use id -> the tool's name.
    tool_of: HashMap<String, String>,
    /// Whether the ledgers in compaction markers are read back and carried
    /// (else such a marker is passed over).
    carry_markers: bool,
}

/// What one tool call says for the ledger, parsed from its input once:
/// the ledger of a history is kept twice (with and without its markers'
/// ledgers), and both record every call, which parsed each call's command
/// with the shell lexer and searched its input for paths twice.
#[derive(Clone, Debug)]
pub(super) struct CallFacts {
    /// The call's id, to be sure the facts are the call's.
    id: String,
    /// The first line of the shell command it runs, when it runs one and
    /// the line is not empty.
    command: Option<String>,
    /// The todo list it writes, when it is the todo tool.
    todos: Option<Vec<String>>,
    /// The paths it reads, writes or runs.
    used: Vec<String>,
    /// The paths it only mentions, each once, none of `used`.
    mentioned: Vec<String>,
}

impl CallFacts {
    /// The facts of every tool call of `message`, in order.
    pub(super) fn of_message(message: &Message) -> Vec<CallFacts> {
        message
            .blocks()
            .iter()
            .filter_map(|block| match block {
                Block::ToolUse(call) => Some(CallFacts::of(call)),
                _ => None,
            })
            .collect()
    }

    fn of(call: &ToolUse) -> CallFacts {
        let input = &call.input;
        let mut command = None;
        let mut todos = None;
        let used = if let Some(shell) = shell_command(input) {
            let line = one_line_of(&shell);
            if !line.is_empty() {
                command = Some(line);
            }
            command_paths(&shell)
        } else {
            if is_todo_tool(&call.name)
                && let Some(items) = input.get("todos").and_then(Value::as_array)
            {
                todos = Some(items.iter().filter_map(todo_line).collect());
            }
            input_paths(input)
        };
        // Paths the call only mentions (in a script, a heredoc, an option):
        // listed too, so a later "which file was that?" finds them.
        let mut strings = Vec::new();
        tool_input_strings(input, &mut strings);
        let mut mentioned: Vec<&str> = strings.into_iter().flat_map(path_tokens).collect();
        mentioned.sort_unstable();
        mentioned.dedup();
        let mentioned = mentioned
            .into_iter()
            // `s/old/new/`, a sed script, is not a file.
            .filter(|path| !(path.starts_with("s/") && path.matches('/').count() >= 3))
            .filter(|path| !used.iter().any(|u| u == path))
            .map(str::to_owned)
            .collect();
        CallFacts {
            id: call.id.clone(),
            command,
            todos,
            used,
            mentioned,
        }
    }
}

impl Recorder {
    fn record(&mut self, ledger: &mut Ledger, message: &Message, transcript: Option<&str>) {
        self.record_parsed(ledger, message, transcript, (&[], None));
    }

    /// [`Recorder::record`], with the facts of the message's tool calls
    /// already parsed, if `parsed` has them (else each is parsed here), and
    /// the ledger of a marker already read back, if `read_back` has it
    /// ([`marker_ledger`] of the message: else read here).
    pub(super) fn record_parsed(
        &mut self,
        ledger: &mut Ledger,
        message: &Message,
        transcript: Option<&str>,
        (parsed, read_back): (&[CallFacts], Option<Ledger>),
    ) {
        match message.role() {
            Role::Assistant => {
                let calls = message.blocks().iter().filter_map(|block| match block {
                    Block::ToolUse(call) => Some(call),
                    _ => None,
                });
                for (k, call) in calls.enumerate() {
                    match parsed.get(k).filter(|facts| facts.id == call.id) {
                        Some(facts) => self.record_call(ledger, call, facts),
                        None => self.record_call(ledger, call, &CallFacts::of(call)),
                    }
                }
            }
            Role::User => {
                if message.has_tool_result() {
                    for result in message.tool_results() {
                        self.record_result(ledger, result);
                    }
                    return;
                }
                let text = message_text(message);
                if self.carry_markers {
                    if let Some(earlier) = read_back.or_else(|| render::read_back(&text)) {
                        ledger.absorb(earlier);
                        return;
                    }
                } else if ledger_section(&text).is_some() {
                    // Passed over: not read back only to be dropped.
                    return;
                }
                if is_harness_text(message, &text) {
                    return;
                }
                ledger.person.push(person_message(&text, transcript));
            }
        }
    }

    fn record_call(&mut self, ledger: &mut Ledger, call: &ToolUse, facts: &CallFacts) {
        self.tool_of.insert(call.id.clone(), call.name.clone());
        if let Some(line) = &facts.command {
            self.command_of
                .insert(call.id.clone(), ledger.commands.len());
            ledger.push_command(line.clone(), None);
        }
        if let Some(todos) = &facts.todos {
            ledger.todos.clone_from(todos);
        }
        for path in &facts.used {
            ledger.touch(path, &call.name, 1);
        }
        if facts.mentioned.is_empty() {
            return;
        }
        let label = format!("{}{MENTION}", call.name);
        for path in &facts.mentioned {
            ledger.touch(path, &label, 1);
        }
    }

    fn record_result(&mut self, ledger: &mut Ledger, result: &ToolResult) {
        let text = result.content_str().unwrap_or_default();
        if let Some(path) = saved_path_text(text) {
            let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
            *ledger.outputs.entry(format!("{dir}/")).or_default() += 1;
        }
        if let Some(&i) = self.command_of.get(&result.tool_use_id)
            && let Some(run) = ledger.commands.get_mut(i)
        {
            run.exit = exit_status(text, result.is_error == Some(true));
        }
        if result.is_error == Some(true) {
            let tool = self
                .tool_of
                .get(&result.tool_use_id)
                .map_or("tool", String::as_str);
            let line = first_line(text);
            let line = crate::prefix_chars(line, LINE_CHARS);
            ledger.push_error(format!("{tool}: {line}"));
        }
    }
}

/// A user message's text: borrowed when it is one string (a marker:
/// thousands of characters, read on every call after a compaction).
fn message_text(message: &Message) -> Cow<'_, str> {
    match message.content() {
        Content::Text(t) => Cow::Borrowed(t.as_str()),
        Content::Blocks(_) => Cow::Owned(message.text()),
    }
}

/// The ledger a user message carries when it is a compaction marker, read
/// back; `None` for any other message.
pub(super) fn marker_ledger(message: &Message) -> Option<Ledger> {
    if message.role() != Role::User || message.has_tool_result() {
        return None;
    }
    render::read_back(&message_text(message))
}

/// A person message as written, and where it is archived.
fn person_message(text: &str, transcript: Option<&str>) -> PersonMessage {
    PersonMessage {
        text: text.to_owned(),
        rest: None,
        whole_at: transcript.map(str::to_owned),
    }
}

/// How user turns that a harness wrote, not the person, begin: ours (hook
/// notes, summary requests) and, in imported sessions, Claude Code's (local
/// command output, skill text, its own compaction summary, notifications).
/// A slash command the person typed (`<command-name>`) is the person's.
const HARNESS_TEXT_PREFIXES: [&str; 8] = [
    "[Stop hook]",
    "[Summary request from the harness]",
    "[Request interrupted",
    "<local-command-",
    "<task-notification>",
    "<system-reminder>",
    "Base directory for this skill:",
    "This session is being continued from a previous conversation",
];

/// A user message the harness wrote rather than the person: compaction's
/// markers and the turns listed above.
fn is_harness_text(message: &Message, text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    let start = text.trim_start();
    is_archive_marker(message)
        || first == COMPACTED_HEADER
        || first == REACTIVE_HEADER
        || HARNESS_TEXT_PREFIXES.iter().any(|p| start.starts_with(p))
        || text.trim().is_empty()
}

/// The shell command of a tool call: `command` as a string (our `bash`,
/// Claude Code's `Bash`) or as argv (Codex's `shell`).
fn shell_command(input: &Value) -> Option<String> {
    match input.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(argv) => {
            let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            // `["bash", "-lc", "script"]`: the script is the command.
            match words.as_slice() {
                [shell, flag, script] if flag.ends_with('c') && shell.ends_with("sh") => {
                    Some((*script).to_owned())
                }
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    }
}

fn is_todo_tool(name: &str) -> bool {
    name == tool_names::TODO_WRITE || name.eq_ignore_ascii_case("TodoWrite")
}

/// `[status] content` of one todo item.
fn todo_line(item: &Value) -> Option<String> {
    let content = item
        .get("content")
        .or_else(|| item.get("text"))
        .and_then(Value::as_str)?;
    let status = item.get("status").and_then(Value::as_str).unwrap_or("?");
    Some(format!(
        "[{status}] {}",
        crate::prefix_chars(&crate::collapse_whitespace(content), LINE_CHARS)
    ))
}

/// Paths in a tool's input: the fields our tools and other agents' use.
fn input_paths(input: &Value) -> Vec<String> {
    const FIELDS: [&str; 5] = ["path", "file_path", "filePath", "notebook_path", "dir"];
    let mut out = Vec::new();
    for field in FIELDS {
        if let Some(p) = input.get(field).and_then(Value::as_str)
            && !p.trim().is_empty()
        {
            out.push(p.trim().to_owned());
        }
    }
    if let Some(list) = input.get("paths").and_then(Value::as_array) {
        out.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    out
}

/// A command's first line, collapsed and bounded.
fn one_line_of(command: &str) -> String {
    let line = crate::collapse_whitespace(first_line(command));
    let line = crate::controls_to_spaces(&line);
    crate::prefix_chars(&line, COMMAND_CHARS).to_owned()
}

/// `0`, `2`, `signal 9`... from our bash's `[exit code: N]` line, or
/// `error` when only the result's error flag says how it went.
fn exit_status(text: &str, is_error: bool) -> Option<String> {
    const CODE: &str = "[exit code: ";
    if let Some(at) = find::rfind_str(text, CODE) {
        let rest = &text[at + CODE.len()..];
        if let Some(end) = rest.find(']') {
            return Some(rest[..end].to_owned());
        }
    }
    if let Some(at) = find::rfind_str(text, "Exit code ") {
        let code: String = text[at + 10..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if !code.is_empty() {
            return Some(code);
        }
    }
    is_error.then(|| "error".to_owned())
}

#[cfg(test)]
mod tests;
