//! The ledger as text in a compaction marker, and read back from one.
//!
//! One entry per line (`- `), a person's message on as many lines as it
//! has, each continued line indented by two spaces: so a closing
//! `</state-ledger>` written by anyone else is indented and cannot end the
//! section, and the text needs no escaping (a person's words and a path
//! read exactly as written, which is also how the model and a survival
//! probe search for them).

use super::find::{rsplit_once_times, split_once_pair, split_pairs};
use super::tree::{PathTree, expand_files};
use super::{CommandRun, ErrorLine, FileUse, Ledger, Omitted, PersonMessage};
use crate::markers::{ARCHIVE_INFIX, COMPACTED_HEADER, REACTIVE_HEADER, TRANSCRIPT_LINE};
use crate::{controls_to_spaces, group_digits};
use foldhash::fast::FixedState;
use std::collections::HashMap;
use std::fmt::Write as _;

/// The line that opens the ledger section of a compaction marker.
pub const LEDGER_OPEN: &str = "<state-ledger>";
/// The line that closes it.
pub const LEDGER_CLOSE: &str = "</state-ledger>";
/// [`LEDGER_OPEN`] as a line of its own, as a marker's text holds it.
pub(super) const OPEN_LINE: &str = "\n<state-ledger>\n";
/// [`OPEN_LINE`] after an empty line, as a summary marker holds it.
pub(super) const OPEN_PARAGRAPH: &str = "\n\n<state-ledger>\n";

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
/// Characters kept for the section headings and the line that counts what
/// is not shown.
const HEADINGS_ROOM: usize = 160;

impl Ledger {
    /// The ledger as the section a compaction marker carries, within about
    /// `budget_chars` characters: every person message and the todo list,
    /// then the files, commands and errors that fit (see `choose`); what
    /// does not fit is counted. The transcript
    /// the marker names (`named_by_marker`, where the messages it replaces
    /// are) is not listed again.
    /// A budget of 0, or a ledger with nothing in it, renders nothing.
    pub fn render(&self, budget_chars: usize, named_by_marker: Option<&str>) -> String {
        if budget_chars == 0 || self.is_empty() {
            return String::new();
        }
        // Sized for the budget at once: grown by doubling, the section was
        // copied several times over while it was written.
        let mut fixed = String::with_capacity(budget_chars + HEADINGS_ROOM);
        push_line(&mut fixed, LEDGER_OPEN);
        push_line(&mut fixed, INTRO);
        if !self.person.is_empty() {
            push_line(&mut fixed, PERSON);
            let whole_up_to = (budget_chars / 8).clamp(PERSON_HEAD_MIN, PERSON_HEAD_MAX);
            for p in &self.person {
                push_person_lines(p, whole_up_to, &mut fixed);
            }
        }
        if !self.todos.is_empty() {
            push_line(&mut fixed, TODOS);
            for t in &self.todos {
                fixed.push_str("- ");
                push_line(&mut fixed, &controls_to_spaces(t));
            }
        }
        // The transcript the marker itself names is not listed again: read
        // back, it is taken from the marker.
        let other_places: Vec<&String> = self
            .places
            .iter()
            .filter(|p| Some(p.as_str()) != named_by_marker)
            .collect();
        let mut places = String::new();
        if !other_places.is_empty() || !self.outputs.is_empty() {
            push_line(&mut places, PLACES);
            for p in other_places.iter().take(MAX_PLACES) {
                places.push_str("- ");
                push_line(&mut places, &controls_to_spaces(p));
            }
            if other_places.len() > MAX_PLACES {
                let _ = writeln!(
                    places,
                    "- and {} more files under the same folders",
                    other_places.len() - MAX_PLACES
                );
            }
            for (dir, n) in &self.outputs {
                let _ = writeln!(
                    places,
                    "- {} {OUTPUTS_IN}{}",
                    group_digits(*n as u64),
                    controls_to_spaces(dir)
                );
            }
        }
        // What is left for files, commands and errors.
        let mut left = budget_chars.saturating_sub(fixed.len() + places.len() + HEADINGS_ROOM);

        let kept = self.choose_within(&mut left);
        let mut out = fixed;
        if !kept.files.is_empty() {
            push_line(&mut out, FILES);
            let tail = |i: usize, out: &mut String| push_file_tail(&self.files[i], out);
            // In first-use order: the order of their indices.
            if !kept.tree.render_in_entry_order(&mut out, tail) {
                let mut tree = PathTree::default();
                for &i in &kept.files {
                    let path = controls_to_spaces(&self.files[i].path);
                    tree.insert(tree.place(&path), &path, i, 0);
                }
                tree.render(&mut out, tail);
            }
        }
        if !kept.commands.is_empty() {
            push_line(&mut out, COMMANDS);
            for (&i, &runs) in kept.commands.iter().zip(&kept.command_runs) {
                push_command_line(&self.commands[i], runs, &mut out);
            }
        }
        if !kept.errors.is_empty() {
            push_line(&mut out, ERRORS);
            for &i in &kept.errors {
                out.push_str(&error_line(&self.errors[i]));
            }
        }
        out.push_str(&places);
        // The counts, and the places as borrowed (the earlier ledgers'
        // places were copied on every rendering).
        let counts = [
            self.omitted.files + self.files.len() - kept.files.len() - kept.covered,
            self.omitted.commands + self.commands.len() - kept.commands.len() - kept.grouped,
            self.omitted.errors + self.errors.len() - kept.errors.len(),
        ];
        if counts.iter().any(|&n| n > 0) {
            // A place named above (or by the marker) is not repeated.
            let listed = &other_places[..other_places.len().min(MAX_PLACES)];
            let places = self
                .omitted
                .places
                .iter()
                .filter(|p| !listed.contains(p) && Some(p.as_str()) != named_by_marker);
            push_line(&mut out, NOT_SHOWN);
            out.push_str("- ");
            push_omitted_line(counts, places, &mut out);
            out.push('\n');
        }
        out.push_str(LEDGER_CLOSE);
        out
    }
}

/// A person message is shown whole up to a share of the budget, between
/// these bounds; a longer one as its head, with where the whole is.
const PERSON_HEAD_MIN: usize = 200;
const PERSON_HEAD_MAX: usize = 2_000;

/// A person's message as its ledger lines, written at the end of `out`.
fn push_person_lines(p: &PersonMessage, whole_up_to: usize, out: &mut String) {
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
                crate::prefix_chars(&p.text, whole_up_to),
                Some(cut.as_str()),
            )
        }
        None => (p.text.as_str(), None),
    };
    let mut lines = text.lines();
    match rest {
        Some(rest) => {
            out.push_str("- ");
            out.push_str(LONG_PERSON);
            out.push_str(&controls_to_spaces(rest));
            out.push_str("]\n");
        }
        None => {
            out.push_str("- ");
            out.push_str(&controls_to_spaces(lines.next().unwrap_or_default()));
            out.push('\n');
        }
    }
    for line in lines {
        out.push_str("  ");
        out.push_str(&controls_to_spaces(line));
        out.push('\n');
    }
}

/// What follows a file's path on its line, ` (Read ×3, Edit)`: a use
/// once is its tool alone.
#[cfg(test)]
pub(super) fn file_tail(f: &FileUse) -> String {
    let mut out = String::with_capacity(file_tail_len(f));
    push_file_tail(f, &mut out);
    out
}

/// [`file_tail`], written at the end of `out`: rendering runs on every
/// compaction, and a string per file was most of what it allocated.
fn push_file_tail(f: &FileUse, out: &mut String) {
    out.push_str(" (");
    for (k, (tool, n)) in f.uses.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        out.push_str(tool);
        if *n != 1 {
            out.push_str(" ×");
            push_decimal(*n, out);
        }
    }
    out.push(')');
}

/// The length in bytes of [`file_tail`]'s text, without writing it.
pub(super) fn file_tail_len(f: &FileUse) -> usize {
    let uses: usize = f
        .uses
        .iter()
        .map(|(tool, n)| match n {
            1 => tool.len(),
            n => tool.len() + " ×".len() + decimal_digits(*n),
        })
        .sum();
    " (".len() + uses + ", ".len() * f.uses.len().saturating_sub(1) + ")".len()
}

/// `line` and a newline, at the end of `out`.
fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

/// `n` in decimal at the end of `out`, as `write!` writes it (without a
/// formatter: file tails and run counts are written on every rendering).
fn push_decimal(n: u32, out: &mut String) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        // A digit: always below 10.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// How many digits `n` has in decimal.
fn decimal_digits(n: u32) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A command's line with its (newest) exit status, and how many times it
/// ran when more than once: `- [exit 0] cargo test -p x ×14`, written at
/// the end of `out`.
pub(super) fn push_command_line(c: &CommandRun, runs: u32, out: &mut String) {
    out.push_str("- ");
    match command_exit(c) {
        CommandExit::Shown(e) => {
            out.push_str(EXIT_OPEN);
            out.push_str(e);
            out.push_str("] ");
        }
        CommandExit::Unknown => {
            out.push_str(EXIT_OPEN);
            out.push_str("?] ");
        }
        CommandExit::None => {}
    }
    out.push_str(&c.line);
    if shows_runs(c, runs) {
        out.push_str(RUNS);
        push_decimal(runs, out);
    }
    out.push('\n');
}

/// The length in bytes of [`push_command_line`]'s line, without writing
/// it: choosing measures every command it considers.
pub(super) fn command_line_len(c: &CommandRun, runs: u32) -> usize {
    let exit = match command_exit(c) {
        CommandExit::Shown(e) => EXIT_OPEN.len() + e.len() + "] ".len(),
        CommandExit::Unknown => EXIT_OPEN.len() + "?] ".len(),
        CommandExit::None => 0,
    };
    let count = if shows_runs(c, runs) {
        RUNS.len() + decimal_digits(runs)
    } else {
        0
    };
    "- ".len() + exit + c.line.len() + count + "\n".len()
}

/// How a command's line shows its exit status.
enum CommandExit<'a> {
    /// `[exit 0] `
    Shown(&'a str),
    /// `[exit ?] `: unknown (another agent's log), on a line that itself
    /// begins like an exit status, so that reading it back stays exact.
    Unknown,
    /// Unknown, and not shown.
    None,
}

fn command_exit(c: &CommandRun) -> CommandExit<'_> {
    match c.exit.as_deref() {
        Some(e) => CommandExit::Shown(e),
        None if c.line.starts_with(EXIT_OPEN) => CommandExit::Unknown,
        None => CommandExit::None,
    }
}

/// Whether a command's line carries its count: when it ran more than
/// once, or when the line itself ends like a count, so that reading it
/// back takes off only that.
fn shows_runs(c: &CommandRun, runs: u32) -> bool {
    runs > 1 || runs_suffix(&c.line).is_some()
}

/// How a command's exit status opens its line.
const EXIT_OPEN: &str = "[exit ";

/// Between a grouped command's line and its count (what
/// `rsplit_once_times` splits at).
const RUNS: &str = " ×";
/// The most runs a grouped line read back stands for (a marker edited by
/// hand cannot make the ledger huge).
const MAX_RUNS: usize = 10_000;

/// A command line's trailing ` ×N` count, split off: `(line, N)`.
fn runs_suffix(line: &str) -> Option<(&str, usize)> {
    // A count ends in a digit: most lines are done with at their last byte.
    if !line.as_bytes().last().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let (l, n) = rsplit_once_times(line)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((l, n.parse::<usize>().unwrap_or(1).clamp(1, MAX_RUNS)))
}

pub(super) fn error_line(e: &ErrorLine) -> String {
    format!("- {}\n", controls_to_spaces(&e.line))
}

/// `2 older files, 5 older commands; in: PLACES` (or `; in the places
/// named above`), written at the end of `out`.
fn push_omitted_line<'a>(
    [files, commands, errors]: [usize; 3],
    places: impl Iterator<Item = &'a String>,
    out: &mut String,
) {
    let counts = [(files, "files"), (commands, "commands"), (errors, "errors")];
    for (k, (n, what)) in counts.into_iter().filter(|(n, _)| *n > 0).enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        out.push_str(&group_digits(n as u64));
        out.push_str(" older ");
        out.push_str(what);
    }
    let mut places = places.peekable();
    if places.peek().is_none() {
        out.push_str("; in the places named above");
        return;
    }
    out.push_str("; in: ");
    for (k, place) in places.enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        out.push_str(place);
    }
}

/// The ledger section at the end of a compaction marker's text (between
/// and without its delimiter lines), if the text is one.
pub fn ledger_section(text: &str) -> Option<&str> {
    ledger_section_at(text).map(|(_, section)| section)
}

/// [`ledger_section`], with where its opening line ([`OPEN_LINE`]) is in
/// `text`.
fn ledger_section_at(text: &str) -> Option<(usize, &str)> {
    let first = text.lines().next()?;
    let is_marker = first == COMPACTED_HEADER
        || first == REACTIVE_HEADER
        || (first.starts_with('[') && first.contains(ARCHIVE_INFIX));
    if !is_marker {
        return None;
    }
    let body = text.strip_suffix(LEDGER_CLOSE)?;
    let at = rfind_open_line(body)?;
    Some((at, &body[at + OPEN_LINE.len()..]))
}

/// `body.rfind(OPEN_LINE)`, found from the `<`s (few in a marker, and
/// found with memrchr) rather than by a search for the whole line, which
/// read the whole marker once per question asked of it.
pub(super) fn rfind_open_line(body: &str) -> Option<usize> {
    body.rmatch_indices('<')
        .filter_map(|(at, _)| at.checked_sub(1))
        .find(|&at| body.as_bytes()[at..].starts_with(OPEN_LINE.as_bytes()))
}

/// The whole paths of the files a ledger section (as [`ledger_section`]
/// gives it) lists, its tree of folders expanded: what the section names,
/// as a search for a path should find it.
pub fn ledger_file_paths(section: &str) -> Vec<String> {
    let lines = section
        .lines()
        .skip_while(|l| *l != FILES)
        .skip(1)
        .take_while(|l| !l.starts_with("## "));
    expand_files(lines)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// The transcript a marker with a ledger names: in a snip marker's first
/// line, or on the line of a summary marker just before its ledger (after
/// the quoted summary, so a request cannot imitate it). `open` is where
/// the ledger's opening line is ([`ledger_section_at`]).
fn marker_transcript(text: &str, open: usize) -> Option<&str> {
    let first = text.lines().next()?;
    if let Some((_, rest)) = first
        .strip_prefix('[')
        .and_then(|f| f.split_once(ARCHIVE_INFIX))
    {
        let rest = rest.strip_suffix(']')?;
        let path = match rest.rsplit_once(", lines ") {
            Some((path, lines)) if lines.bytes().all(|b| b.is_ascii_digit() || b == b'-') => path,
            _ => rest,
        };
        return Some(path);
    }
    let before = &text[..rfind_open_paragraph(text, open)?];
    before.lines().last()?.strip_prefix(TRANSCRIPT_LINE)
}

/// `text.rfind(OPEN_PARAGRAPH)`, knowing that the last [`OPEN_LINE`] of
/// `text` is at `open`: no [`OPEN_PARAGRAPH`] starts after `open - 1` (it
/// would hold a later opening line), and one starts there when the byte
/// before `open` is a newline. Only otherwise is the text before searched
/// (it was searched whole, from its end, through the whole ledger).
fn rfind_open_paragraph(text: &str, open: usize) -> Option<usize> {
    match open.checked_sub(1) {
        Some(at) if text.as_bytes()[at] == b'\n' => Some(at),
        _ => text[..open + OPEN_LINE.len()].rfind(OPEN_PARAGRAPH),
    }
}

/// The ledger a compaction marker carries, read back.
pub(super) fn read_back(text: &str) -> Option<Ledger> {
    let (open, section) = ledger_section_at(text)?;
    let mut ledger = Ledger::default();
    if let Some(t) = marker_transcript(text, open) {
        ledger.places.insert(t.to_owned());
    }
    let mut heading = "";
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    let mut file_lines = Vec::new();
    for line in section.lines() {
        if line.starts_with("## ") {
            heading = line;
            continue;
        }
        if heading == FILES {
            // A tree: read whole below, with its indented lines.
            file_lines.push(line);
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
            COMMANDS => {
                let (exit, line) = entry
                    .strip_prefix(EXIT_OPEN)
                    .and_then(|r| split_once_pair(r, b']', b' '))
                    .map_or((None, entry), |(e, l)| ((e != "?").then_some(e), l));
                let (line, runs) = runs_suffix(line).unwrap_or((line, 1));
                commands.push((line, exit, runs));
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
    // Every file is looked up by its path here, not among all the files
    // before it (`touch`'s search): the ledger has no other files yet. A
    // path's place among the files is known before any is touched (the
    // order of first lines), so each path moves into its entry, not copied.
    let expanded = expand_files(file_lines);
    let slots: Vec<usize> = {
        let mut first: HashMap<&str, usize, FixedState> = HashMap::default();
        expanded
            .iter()
            .map(|(path, _)| {
                let next = first.len();
                *first.entry(path.as_str()).or_insert(next)
            })
            .collect()
    };
    for ((path, uses), slot) in expanded.into_iter().zip(slots) {
        let mut path = Some(path);
        for u in split_pairs(uses, b',', b' ') {
            let (tool, n) = match rsplit_once_times(u) {
                Some((tool, n)) => (tool, n.parse().unwrap_or(1)),
                None => (u, 1),
            };
            match path.take() {
                // A line always has a use: the first use of a path's first line adds it.
                Some(p) if slot == ledger.files.len() => ledger.touch_new(p, tool, n),
                _ => {
                    ledger.touch_at(Some(slot), "", tool, n);
                }
            }
        }
    }
    // Shown newest first; recorded oldest first, after the files.
    // A grouped line stands for its runs: all of them are recorded again,
    // the newest with the exit status shown, so the count carries over.
    for (line, exit, runs) in commands.into_iter().rev() {
        for _ in 1..runs {
            ledger.push_command(line.to_owned(), None);
        }
        ledger.push_command(line.to_owned(), exit.map(str::to_owned));
    }
    for line in errors.into_iter().rev() {
        ledger.push_error(line);
    }
    Some(ledger)
}

fn read_omitted(entry: &str) -> Omitted {
    let (counts, places) = entry
        .split_once("; in: ")
        .or_else(|| entry.split_once("; in the places named above"))
        .unwrap_or((entry, ""));
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A number is written as a formatter writes it.
        #[test]
        fn decimals_are_written_as_formatted(n in any::<u32>()) {
            let mut out = String::from("x");
            push_decimal(n, &mut out);
            prop_assert_eq!(out, format!("x{n}"));
        }

        /// The summary marker's paragraph before its ledger is found where
        /// a search of the whole text finds it.
        #[test]
        fn the_open_paragraph_is_the_last_one(
            before in "(\n|<state-ledger>|x|é)*",
            gap in "(\n|x)?",
            section in "(- |  |x|<|\n)*",
        ) {
            let text = format!("{COMPACTED_HEADER}\n{before}{gap}{OPEN_LINE}{section}{LEDGER_CLOSE}");
            let body = text.strip_suffix(LEDGER_CLOSE).unwrap();
            if let Some(open) = rfind_open_line(body) {
                prop_assert_eq!(rfind_open_paragraph(&text, open), text.rfind(OPEN_PARAGRAPH));
            }
        }
    }
}
