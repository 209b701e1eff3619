//! The page of a replay of the recorded sessions in `../shared/traces`
//! (beside the repository, not in it): one chart per conversation and
//! policy, a marker per applied step, the replay's totals. Where that folder
//! does not exist (a lone clone), it says so in one line; `page.rs` checks
//! the same on the repository's fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{check_replay_page, replay};
use libtest_mimic::{Arguments, Trial};
use std::process::ExitCode;
use testkit::shared_traces_dir;
use whittle_report::Page;

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let root = shared_traces_dir();
    if !root.is_dir() {
        println!(
            "shared_traces: not run: no recorded sessions at {} (they are not part of the repository)",
            root.display()
        );
        return ExitCode::SUCCESS;
    }
    let trial = Trial::test(
        "the_shared_traces_page_marks_every_applied_step_and_keeps_the_totals",
        move || {
            let summary = replay(root.clone(), 32_000);
            // 52 files; Claude Code's two summary calls are rows of the
            // sessions they summarize.
            assert!(summary.conversations.len() >= 50);
            let mut page = Page::new("shared traces");
            page.add_replay(&summary).unwrap();
            let html = page.render().unwrap();
            let markers = check_replay_page(&html, &summary);
            let applied: u64 = summary.totals.iter().flat_map(|t| t.steps.values()).sum();
            assert_eq!(markers as u64, applied);
            assert!(markers > 100, "{markers}");
            println!(
                "shared traces: {} conversations, {markers} markers, {} bytes of HTML",
                summary.conversations.len(),
                html.len()
            );
            Ok(())
        },
    );
    libtest_mimic::run(&args, vec![trial]).exit_code()
}
