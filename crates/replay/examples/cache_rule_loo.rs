//! Issue 24's check of the cache-miss rule, leaving one conversation out
//! at a time: each rule is fitted on every billed conversation but one and
//! `none` is replayed on the one left out with the fitted rule; one row per
//! conversation, recorded cache reads and writes against replayed, in
//! tokens and percent. The rules:
//! - `no rule`: nothing ever changes the agent's prompt (the cache only
//!   expires, and another model has its own);
//! - `openings` (the rule before): a call after a harness-written user turn
//!   whose opening, in the training conversations, was followed by a miss
//!   more often than not, misses everything past the shared system prompt;
//! - `bill` (the rule now): a call whose bill reads back less than the
//!   previous call of its model cached, within the TTL and with no
//!   compaction between, found the prompt changed where its read stopped;
//!   its one parameter, the shortfall, is fitted on the training
//!   conversations from a grid.
//!
//! `cargo run --release -p whittle-replay --example cache_rule_loo -- [PATH]`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use whittle_protocol::Role;
use whittle_replay::{
    Conversation, PREFIX_CHANGE_SHORTFALL, Policy, RecordedTotals, ReplayConfig, StandInSummarizer,
    calibrate, changed_prompts, import_tree, replay_recorded,
};

/// Openings of the user turns Claude Code writes itself (as the importer
/// lists them), the candidates of the `openings` rule.
const OPENINGS: &[&str] = &[
    "<task-notification>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<command-name>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "[Request interrupted by user",
    "This session is being continued",
    "Base directory for this skill",
];

const SHORTFALLS: &[f64] = &[0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7];

#[derive(Clone, Copy, Default)]
struct Measure {
    read: u64,
    write: u64,
    billed_read: u64,
    billed_write: u64,
    cost: f64,
    billed_cost: f64,
    rebuilds: usize,
}

impl Measure {
    fn read_err(&self) -> f64 {
        pct(self.read as f64, self.billed_read as f64)
    }
    fn write_err(&self) -> f64 {
        pct(self.write as f64, self.billed_write as f64)
    }
}

fn pct(ours: f64, billed: f64) -> f64 {
    if billed == 0.0 {
        0.0
    } else {
        100.0 * (ours - billed) / billed
    }
}

/// The openings of the user turns before each call (since the previous one).
fn openings_before_calls(c: &Conversation) -> Vec<BTreeSet<&'static str>> {
    c.calls
        .iter()
        .enumerate()
        .map(|(k, call)| {
            let from = if k == 0 {
                0
            } else {
                c.calls[k - 1].message + 1
            };
            c.messages[from..call.message]
                .iter()
                .filter(|m| m.role() == Role::User)
                .flat_map(|m| {
                    let text = m.text();
                    OPENINGS
                        .iter()
                        .filter(move |o| text.trim_start().starts_with(**o))
                        .copied()
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .collect()
}

/// `none` on `c` with `flags` as the calls where the prompt changed.
fn replay_with(c: &Conversation, flags: &[bool], config: &ReplayConfig) -> Measure {
    let mut c = c.clone();
    for (call, flag) in c.calls.iter_mut().zip(flags) {
        call.prefix_rebuilt = *flag;
    }
    let calibration = calibrate(&c, config);
    let store = tempfile::tempdir().unwrap();
    let r = replay_recorded(
        &c,
        &calibration,
        Policy::None,
        config,
        &mut StandInSummarizer::default(),
        store.path(),
    );
    let billed = RecordedTotals::of(&c, &config.prices).unwrap().replayed();
    Measure {
        read: r.cache_read_tokens,
        write: r.cache_write_tokens,
        billed_read: billed.cache_read_tokens,
        billed_write: billed.cache_write_tokens,
        cost: r.cost_usd,
        billed_cost: billed.cost_usd,
        rebuilds: flags.iter().filter(|f| **f).count(),
    }
}

fn restarts(c: &Conversation) -> Vec<usize> {
    c.compaction_boundaries.iter().map(|b| b.index).collect()
}

/// The `openings` rule fitted on `training`: openings followed by a changed
/// prompt (as the bill shows it) in more than half of their calls.
fn fit_openings(training: &[&Conversation]) -> BTreeSet<&'static str> {
    let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in training {
        let changed = changed_prompts(&c.calls, &restarts(c), PREFIX_CHANGE_SHORTFALL);
        for (openings, changed) in openings_before_calls(c).into_iter().zip(changed) {
            for o in openings {
                let e = seen.entry(o).or_default();
                e.0 += usize::from(changed);
                e.1 += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (missed, all))| 2 * missed > *all)
        .map(|(o, _)| o)
        .collect()
}

fn openings_flags(c: &Conversation, rule: &BTreeSet<&str>) -> Vec<bool> {
    openings_before_calls(c)
        .into_iter()
        .map(|o| o.iter().any(|o| rule.contains(o)))
        .collect()
}

/// The `bill` rule's shortfall fitted on `training`: the least summed
/// absolute error of reads and writes.
fn fit_shortfall(training: &[&Conversation], config: &ReplayConfig) -> f64 {
    let mut best = (f64::MAX, PREFIX_CHANGE_SHORTFALL);
    for &s in SHORTFALLS {
        let error: f64 = training
            .iter()
            .map(|c| {
                let m = replay_with(c, &changed_prompts(&c.calls, &restarts(c), s), config);
                m.read_err().abs() + m.write_err().abs()
            })
            .sum();
        if error < best.0 - 1e-9 {
            best = (error, s);
        }
    }
    best.1
}

fn main() {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "../shared/traces/claude-code".into()),
    );
    let config = ReplayConfig::for_window(32_000);
    let all: Vec<Conversation> = import_tree(&root)
        .into_iter()
        .flat_map(|f| f.result.unwrap_or_default())
        .filter(|c| RecordedTotals::of(c, &config.prices).is_some())
        .collect();
    println!(
        "{} billed conversations under {}\n",
        all.len(),
        root.display()
    );
    let mut totals: BTreeMap<&str, Measure> = BTreeMap::new();
    let mut rows = Vec::new();
    for (k, left_out) in all.iter().enumerate() {
        let training: Vec<&Conversation> = all
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, c)| c)
            .collect();
        let openings = fit_openings(&training);
        let shortfall = fit_shortfall(&training, &config);
        let rules: [(&str, Vec<bool>); 3] = [
            ("no rule", vec![false; left_out.calls.len()]),
            ("openings", openings_flags(left_out, &openings)),
            (
                "bill",
                changed_prompts(&left_out.calls, &restarts(left_out), shortfall),
            ),
        ];
        let mut row = format!("| {} | {} ", left_out.id, left_out.calls.len());
        for (name, flags) in rules {
            let m = replay_with(left_out, &flags, &config);
            let t = totals.entry(name).or_default();
            t.read += m.read;
            t.write += m.write;
            t.billed_read += m.billed_read;
            t.billed_write += m.billed_write;
            t.cost += m.cost;
            t.billed_cost += m.billed_cost;
            t.rebuilds += m.rebuilds;
            if name == "no rule" {
                row += &format!("| {} | {} ", m.billed_read, m.billed_write);
            }
            row += &format!(
                "| {} | {} | {:+.1}% | {} | {:+.1}% ",
                m.rebuilds,
                m.read,
                m.read_err(),
                m.write,
                m.write_err(),
            );
            row += &format!("| {:+.1}% ", pct(m.cost, m.billed_cost));
        }
        rows.push(format!(
            "{row}| {} | {shortfall} |",
            openings.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut header = String::from("| left out | calls | billed read | billed write ");
    let mut rule = String::from("|---|---:|---:|---:");
    for name in ["no rule", "openings", "bill"] {
        header += &format!("| {name}: changes | read | read err | write | write err | cost err ");
        rule += "|---:|---:|---:|---:|---:|---:";
    }
    header += "| openings fitted on the rest | shortfall fitted |";
    rule += "|---|---:|";
    println!("{header}\n{rule}");
    for r in rows {
        println!("{r}");
    }
    println!();
    for (name, t) in totals {
        println!(
            "{name}: {} changes; reads {} vs {} billed ({:+.2}%), writes {} vs {} ({:+.2}%), cost ${:.2} vs ${:.2} ({:+.2}%)",
            t.rebuilds,
            t.read,
            t.billed_read,
            t.read_err(),
            t.write,
            t.billed_write,
            t.write_err(),
            t.cost,
            t.billed_cost,
            pct(t.cost, t.billed_cost)
        );
    }
}
