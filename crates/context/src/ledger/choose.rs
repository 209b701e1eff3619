//! Which of a ledger's files, commands and errors fit its budget.
//!
//! First the newest facts of any kind, within a share of the room: what
//! the agent did just before a compaction is what it needs first after
//! it, and when compaction runs on every call (a system prompt and tools
//! that fill the window's target) those facts are all that is new. Then,
//! for the rest of the room: the files a tool used, most recently touched
//! first; the newest commands; the newest errors; and the paths calls
//! only mentioned, unless a kept command line shows them. A repeated
//! error line is shown once; a repeated command line once, its newest run
//! with its exit status, and how many times it ran (`×14`).

use super::render::{command_line_len, error_line, file_tail_len};
use super::tree::PathTree;
use super::{FileUse, Ledger};
use crate::controls_to_spaces;
use foldhash::fast::FixedState;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The lines of a ledger's commands, counted and looked up on every
/// rendering: hashed with a fast, fixed hash (only looked up, never
/// iterated, so the order it would give does not matter).
type Lines<'a, V> = HashMap<&'a str, V, FixedState>;

/// The share of the room (1 in this many characters) the newest facts
/// take first.
const NEWEST_SHARE: usize = 2;

/// The entries chosen, as indices into the ledger's lists.
pub(super) struct Chosen {
    /// Files, in first-use order.
    pub(super) files: Vec<usize>,
    /// Commands, newest first.
    pub(super) commands: Vec<usize>,
    /// How many times each of `commands`' lines ran, in the same order.
    pub(super) command_runs: Vec<u32>,
    /// Errors, newest first.
    pub(super) errors: Vec<usize>,
    /// Mentioned paths not listed because a kept command line shows them.
    pub(super) covered: usize,
    /// Runs of a kept command line besides the one shown: counted in it.
    pub(super) grouped: usize,
    /// `files` as the tree they are shown as, inserted in the order chosen.
    pub(super) tree: PathTree,
}

#[derive(Clone, Copy)]
enum Entry {
    File(usize),
    Command(usize),
    Error(usize),
}

/// What is chosen so far, and the lines shown (to show a repeat once).
#[derive(Default)]
struct Choice<'a> {
    files: BTreeSet<usize>,
    commands: Vec<usize>,
    errors: Vec<usize>,
    /// Error lines shown, so that a repeat shows once.
    lines: BTreeSet<String>,
    /// Command lines shown (without their exit status): a command run
    /// again is shown once, with its count.
    command_lines: HashSet<&'a str, FixedState>,
    /// The files chosen, as the tree they are shown as: what a file adds
    /// depends on the folders it shares with those chosen before.
    tree: PathTree,
}

impl Ledger {
    /// The entries that fit in `left` characters, which is lowered by what
    /// they take.
    pub(super) fn choose_within(&self, left: &mut usize) -> Chosen {
        let mut choice = Choice::default();
        let mut runs: Lines<'_, u32> = Lines::default();
        for c in &self.commands {
            *runs.entry(c.line.as_str()).or_default() += 1;
        }

        let mut newest: Vec<(u64, Entry)> = Vec::new();
        newest.extend(
            self.files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.last, Entry::File(i))),
        );
        newest.extend(
            self.commands
                .iter()
                .enumerate()
                .map(|(i, c)| (c.at, Entry::Command(i))),
        );
        newest.extend(
            self.errors
                .iter()
                .enumerate()
                .map(|(i, e)| (e.at, Entry::Error(i))),
        );
        newest.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let share = *left / NEWEST_SHARE;
        let mut share_left = share;
        self.take_while_fits(
            newest.into_iter().map(|(_, e)| e),
            &mut share_left,
            &mut choice,
            &runs,
        );
        // A file can free room (a folder line that shortens those under
        // it), so what is left of the share can be more than the share.
        *left = *left + share_left - share;

        let by_recency = |used: bool| {
            let mut files: Vec<(u64, usize)> = self
                .files
                .iter()
                .enumerate()
                .filter(|(_, f)| f.used() == used)
                .map(|(i, f)| (f.last, i))
                .collect();
            files.sort_by_key(|(last, _)| std::cmp::Reverse(*last));
            files.into_iter().map(|(_, i)| Entry::File(i))
        };
        self.take_while_fits(by_recency(true), left, &mut choice, &runs);
        let commands = (0..self.commands.len()).rev().map(Entry::Command);
        self.take_while_fits(commands, left, &mut choice, &runs);
        let errors = (0..self.errors.len()).rev().map(Entry::Error);
        self.take_while_fits(errors, left, &mut choice, &runs);
        let shown_in_commands = |f: &FileUse| {
            choice
                .commands
                .iter()
                .any(|&c| self.commands[c].line.contains(&f.path))
        };
        let covered: BTreeSet<usize> = (0..self.files.len())
            .filter(|&i| !self.files[i].used() && !choice.files.contains(&i))
            .filter(|&i| shown_in_commands(&self.files[i]))
            .collect();
        let mentioned =
            by_recency(false).filter(|e| !matches!(e, Entry::File(i) if covered.contains(i)));
        self.take_while_fits(mentioned, left, &mut choice, &runs);

        let grouped = choice
            .commands
            .iter()
            .map(|&c| runs[self.commands[c].line.as_str()] as usize - 1)
            .sum();
        choice.commands.sort_unstable_by(|a, b| b.cmp(a));
        choice.errors.sort_unstable_by(|a, b| b.cmp(a));
        let command_runs = choice
            .commands
            .iter()
            .map(|&c| {
                runs.get(self.commands[c].line.as_str())
                    .copied()
                    .unwrap_or(1)
            })
            .collect();
        Chosen {
            files: choice.files.into_iter().collect(),
            commands: choice.commands,
            command_runs,
            errors: choice.errors,
            covered: covered.len(),
            grouped,
            tree: choice.tree,
        }
    }

    /// Chooses `entries` in order while their lines fit in `left`; one
    /// already chosen, or a line already shown, is passed over.
    fn take_while_fits<'a>(
        &'a self,
        entries: impl Iterator<Item = Entry>,
        left: &mut usize,
        choice: &mut Choice<'a>,
        runs: &Lines<'_, u32>,
    ) {
        for entry in entries {
            if let Entry::File(i) = entry {
                if choice.files.contains(&i) {
                    continue;
                }
                let f = &self.files[i];
                let path = controls_to_spaces(&f.path);
                let place = choice.tree.place(&path);
                let tail = file_tail_len(f);
                let cost = choice.tree.cost(&place, path.len(), tail);
                if cost > 0 && cost.unsigned_abs() > *left {
                    break;
                }
                *left = left.saturating_add_signed(-cost);
                choice.tree.insert(place, &path, i, tail);
                choice.files.insert(i);
                continue;
            }
            match entry {
                Entry::File(_) => {}
                Entry::Command(i) => {
                    let c = &self.commands[i];
                    if choice.command_lines.contains(c.line.as_str()) {
                        continue;
                    }
                    let len = command_line_len(c, runs.get(c.line.as_str()).copied().unwrap_or(1));
                    if len > *left {
                        break;
                    }
                    *left -= len;
                    choice.commands.push(i);
                    choice.command_lines.insert(c.line.as_str());
                }
                Entry::Error(i) => {
                    if choice.errors.contains(&i) {
                        continue;
                    }
                    let line = error_line(&self.errors[i]);
                    if choice.lines.contains(&line) {
                        continue;
                    }
                    if line.len() > *left {
                        break;
                    }
                    *left -= line.len();
                    choice.errors.push(i);
                    choice.lines.insert(line);
                }
            }
        }
    }
}
