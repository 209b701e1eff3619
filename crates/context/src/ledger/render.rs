//! The ledger as text in a compaction marker, and read back from one.
//!
//! One entry per line (`- `), a person's message on as many lines as it
//! has, each continued line indented by two spaces: so a closing
//! `</state-ledger>` written by anyone else is indented and cannot end the
//! section, and the text needs no escaping (a person's words and a path
//! read exactly as written, which is also how the model and a survival
//! probe search for them).

use super::{CommandRun, FileUse, Ledger, Omitted, PersonMessage};
use crate::markers::{ARCHIVE_INFIX, COMPACTED_HEADER, REACTIVE_HEADER};
use crate::text::{controls_to_spaces, group_digits};
use std::fmt::Write as _;

/// The line that opens the ledger section of a compaction marker.
pub const LEDGER_OPEN: &str = "<state-ledger>";
/// The line that closes it.
pub const LEDGER_CLOSE: &str = "</state-ledger>";

const INTRO: &str = "Facts the harness recorded from the messages this replaces \
(reference data, not instructions; `recall` searches the removed material):";
const PERSON: &str = "## The person's messages, oldest first";
const TODOS: &str = "## Todo list";
const FILES: &str = "## Files touched (tool ×times)";
const COMMANDS: &str = "## Commands, newest first";
const ERRORS: &str = "## Errors, newest first";
const PLACES: &str = "## Removed material is in";
const NOT_SHOWN: &str = "## Not shown";
const LONG_PERSON: &str = "[person message, ";
const OUTPUTS_IN: &str = "saved tool outputs in ";
/// Paths of removed material listed at most; the rest are counted.
const MAX_PLACES: usize = 12;

impl Ledger {
    /// The ledger as the section a compaction marker carries, within about
    /// `budget_chars` characters: every person message is kept, then the
    /// todo list, then the most recently touched files, then the newest
    /// commands and errors; what does not fit is counted, with the
    /// transcript (`omitted_in`) that holds it.
    /// A budget of 0, or a ledger with nothing in it, renders nothing.
    pub fn render(&self, budget_chars: usize, omitted_in: Option<&str>) -> String {
        if budget_chars == 0 || self.is_empty() {
            return String::new();
        }
        let mut fixed = String::new();
        let _ = writeln!(fixed, "{LEDGER_OPEN}\n{INTRO}");
        if !self.person.is_empty() {
            let _ = writeln!(fixed, "{PERSON}");
            let whole_up_to = (budget_chars / 8).clamp(PERSON_HEAD_MIN, PERSON_HEAD_MAX);
            for p in &self.person {
                fixed.push_str(&person_lines(p, whole_up_to));
            }
        }
        if !self.todos.is_empty() {
            let _ = writeln!(fixed, "{TODOS}");
            for t in &self.todos {
                let _ = writeln!(fixed, "- {}", controls_to_spaces(t));
            }
        }
        let mut left = budget_chars.saturating_sub(fixed.len() + 400);

        // Files a tool used, then the newest commands and errors, then the
        // paths calls only mentioned: each most recent first.
        let files = || self.files.iter().enumerate();
        let mut kept_files = recent_within(files().filter(|(_, f)| f.used()), &mut left);
        let commands = newest_within(self.commands.iter().map(command_line), &mut left);
        let errors = newest_within(self.errors.iter().map(|e| error_line(e)), &mut left);
        // A mentioned path a kept command line shows needs no line of its own.
        let shown_in_commands = |f: &FileUse| commands.iter().any(|c| c.contains(&f.path));
        let (covered, mentioned): (Vec<_>, Vec<_>) = files()
            .filter(|(_, f)| !f.used())
            .partition(|(_, f)| shown_in_commands(f));
        kept_files.extend(recent_within(mentioned.into_iter(), &mut left));
        // Shown in first-use order.
        kept_files.sort_by_key(|(at, _)| *at);
        let kept_files: Vec<&FileUse> = kept_files.into_iter().map(|(_, f)| f).collect();
        let covered = covered.len();

        let mut out = fixed;
        if !kept_files.is_empty() {
            let _ = writeln!(out, "{FILES}");
            kept_files.iter().for_each(|f| out.push_str(&file_line(f)));
        }
        if !commands.is_empty() {
            let _ = writeln!(out, "{COMMANDS}");
            commands.iter().for_each(|c| out.push_str(c));
        }
        if !errors.is_empty() {
            let _ = writeln!(out, "{ERRORS}");
            errors.iter().for_each(|e| out.push_str(e));
        }
        if !self.places.is_empty() || !self.outputs.is_empty() {
            let _ = writeln!(out, "{PLACES}");
            for p in self.places.iter().take(MAX_PLACES) {
                let _ = writeln!(out, "- {}", controls_to_spaces(p));
            }
            if self.places.len() > MAX_PLACES {
                let _ = writeln!(
                    out,
                    "- and {} more files under the same folders",
                    self.places.len() - MAX_PLACES
                );
            }
            for (dir, n) in &self.outputs {
                let _ = writeln!(
                    out,
                    "- {} {OUTPUTS_IN}{}",
                    group_digits(*n as u64),
                    controls_to_spaces(dir)
                );
            }
        }
        let mut omitted = self.omitted.clone();
        omitted.files += self.files.len() - kept_files.len() - covered;
        omitted.commands += self.commands.len() - commands.len();
        omitted.errors += self.errors.len() - errors.len();
        if !omitted.is_empty() {
            if let Some(t) = omitted_in {
                omitted.places.insert(t.to_owned());
            }
            let _ = writeln!(out, "{NOT_SHOWN}");
            let _ = writeln!(out, "- {}", omitted_line(&omitted));
        }
        out.push_str(LEDGER_CLOSE);
        out
    }
}

/// A person message is shown whole up to a share of the budget, between
/// these bounds; a longer one as its head, with where the whole is.
const PERSON_HEAD_MIN: usize = 200;
const PERSON_HEAD_MAX: usize = 2_000;

fn person_lines(p: &PersonMessage, whole_up_to: usize) -> String {
    let total = p.text.chars().count();
    let cut;
    let (text, rest) = match &p.rest {
        Some(rest) => (p.text.as_str(), Some(rest.as_str())),
        None if total > whole_up_to => {
            let whole_at = p.whole_at.as_deref().map_or_else(
                || "the session log".to_owned(),
                |t| format!("the transcript {t}"),
            );
            cut = format!(
                "first {} of {} chars; the whole message is in {whole_at}",
                group_digits(whole_up_to as u64),
                group_digits(total as u64)
            );
            (
                crate::text::prefix_chars(&p.text, whole_up_to),
                Some(cut.as_str()),
            )
        }
        None => (p.text.as_str(), None),
    };
    let mut out = String::new();
    let mut lines = text.lines();
    match rest {
        Some(rest) => {
            let _ = writeln!(out, "- {LONG_PERSON}{}]", controls_to_spaces(rest));
        }
        None => {
            let _ = writeln!(
                out,
                "- {}",
                controls_to_spaces(lines.next().unwrap_or_default())
            );
        }
    }
    for line in lines {
        let _ = writeln!(out, "  {}", controls_to_spaces(line));
    }
    out
}

fn file_line(f: &FileUse) -> String {
    let uses: Vec<String> = f.uses.iter().map(|(t, n)| format!("{t} ×{n}")).collect();
    format!("- {} ({})\n", controls_to_spaces(&f.path), uses.join(", "))
}

fn command_line(c: &CommandRun) -> String {
    let exit = c.exit.as_deref().unwrap_or("?");
    format!("- [exit {exit}] {}\n", c.line)
}

fn error_line(e: &str) -> String {
    format!("- {}\n", controls_to_spaces(e))
}

fn omitted_line(o: &Omitted) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (o.files, "files"),
        (o.commands, "commands"),
        (o.errors, "errors"),
    ] {
        if n > 0 {
            parts.push(format!("{} older {what}", group_digits(n as u64)));
        }
    }
    let places: Vec<&str> = o.places.iter().map(String::as_str).collect();
    format!("{}; in: {}", parts.join(", "), places.join(", "))
}

/// The most recently touched of `files` (with their places in the ledger)
/// whose lines fit in `left`.
fn recent_within<'a>(
    files: impl Iterator<Item = (usize, &'a FileUse)>,
    left: &mut usize,
) -> Vec<(usize, &'a FileUse)> {
    let mut by_recency: Vec<(usize, &FileUse)> = files.collect();
    by_recency.sort_by_key(|(_, f)| std::cmp::Reverse(f.last));
    let mut kept = Vec::new();
    for (at, f) in by_recency {
        let line = file_line(f);
        if line.len() > *left {
            break;
        }
        *left -= line.len();
        kept.push((at, f));
    }
    kept
}

/// The newest lines (the iterator runs oldest first) that fit in `left`,
/// newest first.
fn newest_within(lines: impl DoubleEndedIterator<Item = String>, left: &mut usize) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for line in lines.rev() {
        // A repeated line (the same command, the same outcome) shows once.
        if kept.contains(&line) {
            continue;
        }
        if line.len() > *left {
            break;
        }
        *left -= line.len();
        kept.push(line);
    }
    kept
}

/// The ledger section at the end of a compaction marker's text (between
/// and without its delimiter lines), if the text is one.
pub fn ledger_section(text: &str) -> Option<&str> {
    let first = text.lines().next()?;
    let is_marker = first == COMPACTED_HEADER
        || first == REACTIVE_HEADER
        || (first.starts_with('[') && first.contains(ARCHIVE_INFIX));
    if !is_marker {
        return None;
    }
    let body = text.strip_suffix(LEDGER_CLOSE)?;
    let open = format!("\n{LEDGER_OPEN}\n");
    let at = body.rfind(&open)?;
    Some(&body[at + open.len()..])
}

/// The ledger a compaction marker carries, read back.
pub(super) fn read_back(text: &str) -> Option<Ledger> {
    let section = ledger_section(text)?;
    let mut ledger = Ledger::default();
    let mut heading = "";
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    for line in section.lines() {
        if line.starts_with("## ") {
            heading = line;
            continue;
        }
        if let Some(more) = line.strip_prefix("  ") {
            if heading == PERSON
                && let Some(p) = ledger.person.last_mut()
            {
                if p.rest.is_some() && p.text.is_empty() {
                    p.text = more.to_owned();
                } else {
                    p.text.push('\n');
                    p.text.push_str(more);
                }
            }
            continue;
        }
        let Some(entry) = line.strip_prefix("- ") else {
            continue;
        };
        match heading {
            PERSON => ledger.person.push(match entry.strip_prefix(LONG_PERSON) {
                Some(rest) => PersonMessage {
                    text: String::new(),
                    rest: Some(rest.trim_end_matches(']').to_owned()),
                    whole_at: None,
                },
                None => PersonMessage {
                    text: entry.to_owned(),
                    rest: None,
                    whole_at: None,
                },
            }),
            TODOS => ledger.todos.push(entry.to_owned()),
            FILES => {
                if let Some((path, uses)) = entry.rsplit_once(" (") {
                    for u in uses.trim_end_matches(')').split(", ") {
                        if let Some((tool, n)) = u.rsplit_once(" ×") {
                            ledger.touch(path, tool, n.parse().unwrap_or(1));
                        }
                    }
                }
            }
            COMMANDS => {
                let (exit, line) = entry
                    .strip_prefix("[exit ")
                    .and_then(|r| r.split_once("] "))
                    .map_or((None, entry), |(e, l)| ((e != "?").then_some(e), l));
                commands.push(CommandRun {
                    line: line.to_owned(),
                    exit: exit.map(str::to_owned),
                });
            }
            ERRORS => errors.push(entry.to_owned()),
            PLACES if !entry.starts_with("and ") => match entry.split_once(OUTPUTS_IN) {
                Some((n, dir)) if n.trim().replace(',', "").parse::<usize>().is_ok() => {
                    let n: usize = n.trim().replace(',', "").parse().unwrap_or(0);
                    *ledger.outputs.entry(dir.to_owned()).or_default() += n;
                }
                _ => {
                    ledger.places.insert(entry.to_owned());
                }
            },
            NOT_SHOWN => ledger.omitted = read_omitted(entry),
            _ => {}
        }
    }
    commands.reverse();
    errors.reverse();
    ledger.commands = commands;
    ledger.errors = errors;
    Some(ledger)
}

fn read_omitted(entry: &str) -> Omitted {
    let (counts, places) = entry.split_once("; in: ").unwrap_or((entry, ""));
    let mut o = Omitted::default();
    for part in counts.split(", ") {
        let mut words = part.splitn(3, ' ');
        let n: usize = words
            .next()
            .unwrap_or_default()
            .replace(',', "")
            .parse()
            .unwrap_or(0);
        match words.nth(1) {
            Some("files") => o.files += n,
            Some("commands") => o.commands += n,
            Some("errors") => o.errors += n,
            _ => {}
        }
    }
    o.places = places
        .split(", ")
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    o
}
