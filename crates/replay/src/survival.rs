//! Survival: of the facts a compaction took out of the context, how many
//! the next request still holds.
//!
//! The facts are mechanical, so that every policy and the recording agent's
//! own summary are measured on the same ones: path-like tokens of tool
//! inputs, bash commands (first line, [`COMMAND_PROBE_CHARS`] characters),
//! and what the person wrote ([`PERSON_PROBE_CHARS`] characters), all with
//! whitespace collapsed. A fact survives when the next request's full text
//! (system prompt and every message, whitespace collapsed) contains it; a
//! path also when a state ledger in it lists a file whose whole path
//! contains it (the ledger shows its files as a tree of shared folders,
//! expanded back as whittle reads it: [`ledger_file_paths`]).
//!
//! The path probe is deliberately simpler than the state ledger's shell
//! scan and independent of it: it is the ruler the ledger is measured with.

use crate::import::Conversation;
use crate::prompt_cache::hash;
use serde::Serialize;
use serde::ser::SerializeStruct;
use std::collections::{BTreeSet, HashMap};
use whittle_context::{
    History, ledger_file_paths, ledger_section, path_tokens, tool_input_strings,
};
use whittle_protocol::{Block, Message, Role, collapse_whitespace, prefix_chars};

/// Characters of a command's first line a probe keeps.
pub const COMMAND_PROBE_CHARS: usize = 60;
/// Characters of a person's message a probe keeps.
pub const PERSON_PROBE_CHARS: usize = 80;

/// What kind of fact a probe is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FactKind {
    /// A path-like token of a tool input.
    Path,
    /// A bash command's first line.
    Command,
    /// The head of a message the person wrote.
    Person,
}

/// One probe: a text that should still be in the context after a compaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fact {
    /// What it is.
    pub kind: FactKind,
    /// The text looked for, whitespace collapsed.
    pub text: String,
}

/// The probe of a bash command: its first non-empty line, whitespace
/// collapsed, at most [`COMMAND_PROBE_CHARS`] characters.
pub fn command_probe(command: &str) -> Option<String> {
    let line = command.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(prefix_chars(&collapse_whitespace(line), COMMAND_PROBE_CHARS).to_string())
}

/// The probe of a person's message: its start, whitespace collapsed, at
/// most [`PERSON_PROBE_CHARS`] characters.
pub fn person_probe(text: &str) -> Option<String> {
    let collapsed = collapse_whitespace(text);
    (!collapsed.is_empty()).then(|| prefix_chars(&collapsed, PERSON_PROBE_CHARS).to_string())
}

/// The facts one recorded message holds. `by_person` says whether a user
/// message that answers no tool is the person's (not the harness's).
pub fn message_facts(m: &Message, by_person: bool) -> Vec<Fact> {
    let mut facts = Vec::new();
    if m.role() == Role::User {
        if by_person && !m.has_tool_result() {
            facts.extend(person_probe(&m.text()).map(|text| Fact {
                kind: FactKind::Person,
                text,
            }));
        }
        return facts;
    }
    for tool_use in m.tool_uses() {
        if tool_use.name.eq_ignore_ascii_case("bash")
            && let Some(command) = tool_use.input.get("command").and_then(|c| c.as_str())
        {
            facts.extend(command_probe(command).map(|text| Fact {
                kind: FactKind::Command,
                text,
            }));
        }
        let mut strings = Vec::new();
        tool_input_strings(&tool_use.input, &mut strings);
        for s in strings {
            facts.extend(path_tokens(s).into_iter().map(|t| Fact {
                kind: FactKind::Path,
                text: t.to_string(),
            }));
        }
    }
    facts
}

/// Everything a model reads of a message, as text: text and thinking,
/// tool names and every input value, tool outputs; other blocks as JSON.
fn message_text(m: &Message, out: &mut String) {
    let blocks = match m.content() {
        whittle_protocol::Content::Text(s) => {
            out.push_str(s);
            out.push('\n');
            return;
        }
        whittle_protocol::Content::Blocks(blocks) => blocks,
    };
    for block in blocks {
        match block {
            Block::Text(t) => out.push_str(&t.text),
            Block::Thinking(t) => out.push_str(&t.thinking),
            Block::ToolUse(u) => {
                out.push_str(&u.name);
                out.push('\n');
                value_text(&u.input, out);
            }
            Block::ToolResult(r) => out.push_str(&r.full_text()),
            other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
        }
        out.push('\n');
    }
}

fn value_text(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(s) => out.push_str(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| value_text(v, out)),
        serde_json::Value::Object(fields) => fields.values().for_each(|v| value_text(v, out)),
        other => out.push_str(&other.to_string()),
    }
    out.push('\n');
}

/// A request's full text, whitespace collapsed, as facts are looked up in it.
pub fn context_text(system: Option<&str>, messages: &[Message]) -> String {
    let mut text = String::new();
    if let Some(s) = system {
        text.push_str(s);
        text.push('\n');
    }
    for m in messages {
        message_text(m, &mut text);
    }
    collapse_whitespace(&text)
}

/// The whole paths of the files the state ledgers in `messages` list, one
/// a line, whitespace collapsed: where a path fact is also looked up.
pub fn ledger_paths_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for section in messages.iter().filter_map(ledger_of) {
        for path in ledger_file_paths(section) {
            out.push_str(&collapse_whitespace(&path));
            out.push('\n');
        }
    }
    out
}

/// The ledger section of a compaction marker written by whittle.
fn ledger_of(m: &Message) -> Option<&str> {
    match m.content() {
        whittle_protocol::Content::Text(text) if m.role() == Role::User => ledger_section(text),
        _ => None,
    }
}

/// Characters of the state ledgers the compaction markers in `messages`
/// carry (read as the pipeline writes them: [`ledger_section`]).
pub fn ledger_chars<'a>(messages: impl IntoIterator<Item = &'a Message>) -> usize {
    messages
        .into_iter()
        .filter_map(ledger_of)
        .map(|s| s.chars().count())
        .sum()
}

/// How many probes of one kind were looked for, and how many were found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Found in the next request.
    pub survived: u64,
    /// Looked for.
    pub probed: u64,
}

impl Tally {
    /// Survival in percent; `None` when nothing was probed.
    pub fn percent(&self) -> Option<f64> {
        (self.probed > 0).then(|| 100.0 * self.survived as f64 / self.probed as f64)
    }

    fn absorb(&mut self, other: &Tally) {
        self.survived += other.survived;
        self.probed += other.probed;
    }
}

impl Serialize for Tally {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Tally", 3)?;
        s.serialize_field("survived", &self.survived)?;
        s.serialize_field("probed", &self.probed)?;
        s.serialize_field("percent", &self.percent())?;
        s.end()
    }
}

/// What compactions kept of the facts they removed, over one replay (or a
/// total, or the recording agent's own compactions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Survival {
    /// Path-like tokens of tool inputs.
    pub paths: Tally,
    /// Bash commands.
    pub commands: Tally,
    /// The person's messages.
    pub person: Tally,
    /// Compactions (history replaced by a summary or a marker) seen.
    pub compactions: u64,
    /// Tokens of the state ledger each compaction rendered (0 without one);
    /// empty when the compactions are not whittle's.
    pub ledger_tokens: Vec<u64>,
}

impl Survival {
    /// Looks every fact up in `context` (as made by [`context_text`]), and
    /// a path also in `ledger_paths` (as made by [`ledger_paths_text`]).
    pub fn probe(&mut self, facts: &BTreeSet<Fact>, context: &str, ledger_paths: &str) {
        for fact in facts {
            let (tally, elsewhere) = match fact.kind {
                FactKind::Path => (&mut self.paths, ledger_paths),
                FactKind::Command => (&mut self.commands, ""),
                FactKind::Person => (&mut self.person, ""),
            };
            tally.probed += 1;
            let text = fact.text.as_str();
            if context.contains(text) || elsewhere.contains(text) {
                tally.survived += 1;
            }
        }
    }

    /// Adds `other` into `self` (for totals).
    pub fn absorb(&mut self, other: &Survival) {
        self.paths.absorb(&other.paths);
        self.commands.absorb(&other.commands);
        self.person.absorb(&other.person);
        self.compactions += other.compactions;
        self.ledger_tokens.extend_from_slice(&other.ledger_tokens);
    }

    /// The median ledger size per compaction, when whittle compacted.
    pub fn ledger_tokens_median(&self) -> Option<u64> {
        let mut sorted = self.ledger_tokens.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied()
    }

    /// The largest ledger of a compaction, when whittle compacted.
    pub fn ledger_tokens_max(&self) -> Option<u64> {
        self.ledger_tokens.iter().max().copied()
    }
}

impl Serialize for Survival {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Survival", 6)?;
        s.serialize_field("paths", &self.paths)?;
        s.serialize_field("commands", &self.commands)?;
        s.serialize_field("person", &self.person)?;
        s.serialize_field("compactions", &self.compactions)?;
        s.serialize_field("ledger_tokens_median", &self.ledger_tokens_median())?;
        s.serialize_field("ledger_tokens_max", &self.ledger_tokens_max())?;
        s.end()
    }
}

/// Whether message `index` of a recording is one the person could have
/// written (`injected` ascending, as in [`Conversation::injected`]).
fn by_person(index: usize, injected: &[usize]) -> bool {
    injected.binary_search(&index).is_err()
}

/// Follows a replayed history across calls and, when the pipeline removed
/// messages, probes their facts in the request that follows.
///
/// Messages are known by the hash of their JSON: a recorded message keeps
/// its facts wherever the pipeline moves it, and one the pipeline made (a
/// summary, a marker, a result replaced by a placeholder) has none.
pub(crate) struct SurvivalProbe {
    /// The facts of every recorded message, by hash.
    facts: HashMap<u64, Vec<Fact>>,
    /// The hash of each message of the history as last seen.
    hashes: Vec<u64>,
}

impl SurvivalProbe {
    /// A probe for a replay of `messages` (`injected` as in [`Conversation::injected`]).
    pub(crate) fn new(messages: &[Message], injected: &[usize]) -> Self {
        let facts = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (message_hash(m), message_facts(m, by_person(i, injected))))
            .collect();
        SurvivalProbe {
            facts,
            hashes: Vec::new(),
        }
    }

    /// Takes in what was appended to `history` since it was last seen;
    /// call it before the pipeline runs.
    pub(crate) fn before_pipeline(&mut self, history: &History) {
        let messages = history.messages();
        self.hashes.truncate(messages.len());
        for m in &messages[self.hashes.len()..] {
            self.hashes.push(message_hash(m));
        }
    }

    /// Compares `history` after the pipeline with what it was before: the
    /// facts of removed messages are looked up in the request about to be
    /// sent (`system` and `history`). `replaced` says whether a step
    /// replaced history (a compaction), whose ledger `tokens` measures.
    pub(crate) fn after_pipeline(
        &mut self,
        history: &History,
        system: Option<&str>,
        replaced: bool,
        tokens: impl Fn(usize) -> u64,
        survival: &mut Survival,
    ) {
        // Messages before the last request's mark were not touched if still
        // unchanged; only the rest is compared.
        let messages = history.messages();
        let from = history.unchanged_prefix().min(self.hashes.len());
        let after: Vec<u64> = messages[from..].iter().map(message_hash).collect();
        let mut count: HashMap<u64, i64> = HashMap::new();
        for h in &self.hashes[from..] {
            *count.entry(*h).or_default() += 1;
        }
        let mut added = Vec::new();
        for (k, h) in after.iter().enumerate() {
            match count.get_mut(h) {
                Some(n) if *n > 0 => *n -= 1,
                _ => added.push(&messages[from + k]),
            }
        }
        let removed: BTreeSet<Fact> = count
            .iter()
            .filter(|(_, n)| **n > 0)
            .filter_map(|(h, _)| self.facts.get(h))
            .flatten()
            .cloned()
            .collect();
        if !removed.is_empty() {
            survival.probe(
                &removed,
                &context_text(system, messages),
                &ledger_paths_text(messages),
            );
        }
        if replaced {
            survival.compactions += 1;
            survival.ledger_tokens.push(tokens(ledger_chars(added)));
        }
        self.hashes.truncate(from);
        self.hashes.extend(after);
    }
}

fn message_hash(m: &Message) -> u64 {
    hash(&serde_json::to_string(m).unwrap_or_default())
}

/// Survival over the recording agent's own compactions (Claude Code's
/// `compact_boundary` and its summary): the facts of every message since
/// the previous compaction, looked up in the first request after it (the
/// summary and whatever the agent put after it, up to the first answer).
/// `None` when the recording has no compaction followed by a request.
pub fn recorded_survival(c: &Conversation) -> Option<Survival> {
    let mut survival = Survival::default();
    let mut start = 0;
    for boundary in &c.compaction_boundaries {
        let at = boundary.index.min(c.messages.len());
        let facts: BTreeSet<Fact> = c.messages[start..at]
            .iter()
            .enumerate()
            .flat_map(|(k, m)| message_facts(m, by_person(start + k, &c.injected)))
            .collect();
        start = at;
        let end = c.messages[at..]
            .iter()
            .position(|m| m.role() == Role::Assistant)
            .map(|k| at + k);
        let Some(end) = end else {
            continue;
        };
        survival.compactions += 1;
        // The recording agent's own summaries: their text, literally.
        survival.probe(
            &facts,
            &context_text(c.system.as_deref(), &c.messages[at..end]),
            "",
        );
    }
    (survival.compactions > 0).then_some(survival)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use whittle_context::{LEDGER_CLOSE, LEDGER_OPEN};

    fn bash(command: &str) -> Message {
        Message::assistant_blocks(vec![Block::tool_use(
            "t1",
            "Bash",
            json!({"command": command, "description": "run it"}),
        )])
    }

    fn texts(facts: &[Fact], kind: FactKind) -> Vec<&str> {
        facts
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.text.as_str())
            .collect()
    }

    #[test]
    fn a_command_probe_is_its_first_line_collapsed_and_cut() {
        assert_eq!(
            command_probe("\n  cd  x &&\tmake   test\nsecond line").as_deref(),
            Some("cd x && make test")
        );
        let long = format!("echo {}", "a".repeat(100));
        let probe = command_probe(&long).unwrap();
        assert_eq!(probe.chars().count(), COMMAND_PROBE_CHARS);
        assert!(long.starts_with(&probe));
        assert_eq!(command_probe(" \n\t\n"), None);
    }

    #[test]
    fn a_person_probe_is_the_message_start_collapsed_and_cut() {
        let text = format!("Fix   the\nbug in {}", "é".repeat(200));
        let probe = person_probe(&text).unwrap();
        assert!(probe.starts_with("Fix the bug in éé"));
        assert_eq!(probe.chars().count(), PERSON_PROBE_CHARS);
        assert_eq!(person_probe("  \n "), None);
    }

    #[test]
    fn facts_come_from_tool_inputs_commands_and_the_persons_messages() {
        let edit = Message::assistant_blocks(vec![
            Block::text("I will edit lib/a.rs"),
            Block::tool_use(
                "t2",
                "Edit",
                json!({"file_path": "/repo/lib/a.rs", "old_string": "use std::fs;", "new_string": "mod b.rs;"}),
            ),
        ]);
        let facts = message_facts(&edit, true);
        // Text the model wrote and file contents are not tool input names.
        assert_eq!(texts(&facts, FactKind::Path), ["/repo/lib/a.rs"]);
        assert!(texts(&facts, FactKind::Command).is_empty());

        let facts = message_facts(&bash("git diff src/x.rs\ngit status"), true);
        assert_eq!(texts(&facts, FactKind::Command), ["git diff src/x.rs"]);
        assert_eq!(texts(&facts, FactKind::Path), ["src/x.rs"]);

        let person = Message::user("Please  fix\nsrc/y.rs");
        assert_eq!(
            texts(&message_facts(&person, true), FactKind::Person),
            ["Please fix src/y.rs"]
        );
        assert!(message_facts(&person, false).is_empty());
        let result = Message::user_blocks(vec![Block::tool_result("t1", "src/z.rs", false)]);
        assert!(message_facts(&result, true).is_empty());
    }

    #[test]
    fn a_fact_survives_when_the_next_request_holds_it_whitespace_collapsed() {
        let facts: BTreeSet<Fact> = message_facts(&bash("cargo   test\n-p x"), true)
            .into_iter()
            .chain(message_facts(&Message::user("keep  the API"), true))
            .chain(message_facts(&bash("cat gone/file.txt"), true))
            .collect();
        let next = [
            Message::user("Summary: ran `cargo test`; keep the\nAPI stable"),
            Message::assistant_blocks(vec![Block::tool_use(
                "t9",
                "bash",
                json!({"command": "ls"}),
            )]),
        ];
        let mut s = Survival::default();
        s.probe(&facts, &context_text(Some("system"), &next), "");
        assert_eq!((s.commands.survived, s.commands.probed), (1, 2));
        assert_eq!((s.person.survived, s.person.probed), (1, 1));
        assert_eq!((s.paths.survived, s.paths.probed), (0, 1));
        assert_eq!(s.commands.percent(), Some(50.0));
        assert_eq!(Tally::default().percent(), None);
    }

    #[test]
    fn a_path_survives_in_the_ledgers_tree_of_folders_and_nothing_else_does() {
        let removed = [
            Message::user("go"),
            Message::assistant_blocks(vec![
                Block::tool_use("r1", "Read", json!({"file_path": "/repo/src/a.rs"})),
                Block::tool_use("r2", "Read", json!({"file_path": "/repo/src/b.rs"})),
            ]),
        ];
        let ledger = whittle_context::Ledger::of(&removed, None).render(10_000, None);
        let marker = Message::user(format!("[Compacted]\nsummary\n{ledger}"));
        let next = [marker];
        let context = context_text(None, &next);
        assert!(
            !context.contains("/repo/src/a.rs"),
            "shown as a tree: {ledger}"
        );
        let paths = ledger_paths_text(&next);
        assert_eq!(paths, "/repo/src/a.rs\n/repo/src/b.rs\n");
        let facts: BTreeSet<Fact> = removed
            .iter()
            .flat_map(|m| message_facts(m, true))
            .chain([Fact {
                kind: FactKind::Command,
                text: "/repo/src/a.rs".into(),
            }])
            .collect();
        let mut s = Survival::default();
        s.probe(&facts, &context, &paths);
        assert_eq!((s.paths.survived, s.paths.probed), (2, 2));
        // A command is looked for in the text alone.
        assert_eq!((s.commands.survived, s.commands.probed), (0, 1));
        // Without the tree expanded, the paths are not found.
        let mut literal = Survival::default();
        literal.probe(&facts, &context, "");
        assert_eq!(literal.paths.survived, 0);
    }

    #[test]
    fn the_ledger_is_the_text_between_its_marker_lines() {
        let with = Message::user(format!(
            "[Compacted]\nsummary\n{LEDGER_OPEN}\nfiles: a.rs\ncommands: ls\n{LEDGER_CLOSE}"
        ));
        assert_eq!(
            ledger_chars([&with]),
            "files: a.rs\n".len() + "commands: ls\n".len()
        );
        assert_eq!(
            ledger_chars([&Message::user("no ledger <state-ledger>")]),
            0
        );
        // Not at the end of a compaction marker: not a ledger.
        assert_eq!(
            ledger_chars([&Message::user(format!(
                "hi\n{LEDGER_OPEN}\nx\n{LEDGER_CLOSE}"
            ))]),
            0
        );
        // Unclosed: not a ledger.
        assert_eq!(
            ledger_chars([&Message::user(format!("{LEDGER_OPEN}\nx"))]),
            0
        );
    }

    #[test]
    fn the_probe_follows_removed_messages_into_the_next_request() {
        let messages = vec![
            Message::user("Implement the parser"),
            bash("cat src/parse.rs"),
            Message::user_blocks(vec![Block::tool_result("t1", "fn parse()", false)]),
            Message::user("injected reminder"),
            Message::assistant("done"),
        ];
        let mut probe = SurvivalProbe::new(&messages, &[3]);
        let mut history = History::new(Vec::new());
        for m in &messages {
            history.push(m.clone());
        }
        probe.before_pipeline(&history);
        history.mark();
        // A compaction keeps the newest message behind a summary with a ledger.
        let summary = Message::user(format!(
            "[Compacted]\nImplement the parser\n{LEDGER_OPEN}\ncat src/parse.rs\n{LEDGER_CLOSE}"
        ));
        history.replace_all(vec![summary, messages[4].clone()]);
        let mut s = Survival::default();
        probe.after_pipeline(&history, None, true, |c| c as u64, &mut s);
        assert_eq!((s.person.survived, s.person.probed), (1, 1));
        assert_eq!((s.commands.survived, s.commands.probed), (1, 1));
        assert_eq!((s.paths.survived, s.paths.probed), (1, 1));
        assert_eq!(s.compactions, 1);
        assert_eq!(s.ledger_tokens, ["cat src/parse.rs\n".len() as u64]);

        // Appends and an untouched pipeline probe nothing.
        history.mark();
        history.push(Message::user("next"));
        probe.before_pipeline(&history);
        probe.after_pipeline(&history, None, false, |c| c as u64, &mut s);
        assert_eq!((s.person.probed, s.compactions), (1, 1));
    }
}
