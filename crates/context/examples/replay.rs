//! Replays trace folders under every policy and prints totals:
//! `cargo run --release -p whittle-context --example replay -- WINDOW PATH...`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use whittle_context::import::import_tree;
use whittle_context::replay::{
    Policy, ReplayConfig, ReplayReport, StandInSummarizer, replay_conversation,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let window: u64 = args.next().and_then(|w| w.parse().ok()).unwrap_or(32_000);
    let mut config = ReplayConfig::for_window(window);
    let env = |k: &str, d: f64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    if let Ok(r) = std::env::var("RESERVED") {
        config.reserved_output_tokens = r.parse().unwrap();
    }
    let mut limits = whittle_context::Limits::tokens(whittle_context::TokenBudget {
        context_window: window,
        reserved_output_tokens: config.reserved_output_tokens,
        auto_compact_fraction: env("FRACTION", 0.85),
    });
    limits.target = (limits.context_limit as f64 * env("TARGET", 0.5)) as u64;
    limits.clear_at_least = (limits.context_limit as f64 * env("CLEAR", 0.2)) as u64;
    limits.keep_recent_results = env("KEEP", 3.0) as usize;
    if let Ok(v) = std::env::var("PERSIST") {
        limits.persist_results_above = v.parse().ok();
    }
    config.default_limits = Some(limits);
    let verbose = std::env::var("VERBOSE").is_ok();
    for path in args {
        let mut totals: Vec<ReplayReport> = Policy::ALL
            .iter()
            .map(|p| ReplayReport {
                policy: p.name().into(),
                ..Default::default()
            })
            .collect();
        for file in import_tree(std::path::Path::new(&path)) {
            let Ok(convs) = file.result else {
                eprintln!("skip {}", file.path.display());
                continue;
            };
            for c in convs {
                for (k, p) in Policy::ALL.iter().enumerate() {
                    let dir = tempfile::tempdir().unwrap();
                    let r = replay_conversation(
                        &c.id,
                        &c.messages,
                        c.system.as_deref(),
                        *p,
                        &config,
                        &mut StandInSummarizer::default(),
                        dir.path(),
                    );
                    if verbose {
                        println!(
                            "{:40} {:9} calls {:4} peak {:7} cost {:7.3} read {:4.2} steps {:?} over {}",
                            c.id,
                            p.name(),
                            r.calls,
                            r.peak_tokens,
                            r.cost_usd,
                            r.cache_read_share(),
                            r.steps,
                            r.over_window
                        );
                    }
                    totals[k].absorb(&r);
                }
            }
        }
        println!("== {path} (window {window})");
        for t in &totals {
            println!(
                "{:9} calls {:6} peak {:8} input {:10} read {:5.1}% cost ${:8.2} summaries {:4} over {:5} invalid {} lost {} steps {:?} pipeline med {}us max {}us",
                t.policy,
                t.calls,
                t.peak_tokens,
                t.input_tokens,
                100.0 * t.cache_read_share(),
                t.cost_usd,
                t.summarize_calls,
                t.over_window,
                t.invalid_requests,
                t.unrecoverable_chars,
                t.steps,
                t.pipeline_us_median,
                t.pipeline_us_max
            );
            println!(
                "          read ${:.2} write ${:.2} uncached ${:.2} output ${:.2} ({} tok) summary-in ${:.2}",
                t.cache_read_tokens as f64 * 0.3 / 1e6,
                t.cache_write_tokens as f64 * 3.75 / 1e6,
                t.uncached_tokens as f64 * 3.0 / 1e6,
                t.output_tokens as f64 * 15.0 / 1e6,
                t.output_tokens,
                t.summarize_input_tokens as f64 * 3.0 / 1e6
            );
        }
    }
}
