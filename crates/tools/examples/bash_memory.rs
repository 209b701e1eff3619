//! Peak memory of the bash tool against the size of a command's output:
//! `cargo run --release -p whittle-tools --example bash_memory -- MB...`
//! prints, for each size, the output's size, where it was saved, and the
//! process's peak resident memory after the run (VmHWM). The output is
//! saved whole; memory should not grow with it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use whittle_tools::{BashTool, Tool, ToolContext};

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    println!("start: peak {} KiB", peak_kib());
    for mb in if sizes.is_empty() {
        vec![2, 20, 200]
    } else {
        sizes
    } {
        let command = format!("yes 0123456789abcdef | head -c {}", mb * 1_000_000);
        let out = BashTool::default()
            .run(json!({"command": command, "timeout_secs": 600}), &ctx)
            .await;
        let path = out
            .content
            .lines()
            .find_map(|l| l.strip_prefix("Full output: "))
            .unwrap_or("(inline)");
        let saved = std::fs::metadata(path).map_or(0, |m| m.len());
        println!(
            "{mb:>5} MB output: saved {saved} bytes, result {} chars, peak {} KiB",
            out.content.len(),
            peak_kib()
        );
        let _ = std::fs::remove_file(path);
    }
}
