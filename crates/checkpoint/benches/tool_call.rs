//! The overhead a checkpoint adds to one tool call in the agent loop, on a
//! copy of a real repository (default: this one; WHITTLE_BENCH_WORKSPACE
//! names another): an incremental snapshot when nothing changed and when
//! one file changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::PathBuf;
use std::time::Duration;
use whittle_checkpoint::{Options, Store};

fn source() -> PathBuf {
    std::env::var_os("WHITTLE_BENCH_WORKSPACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(source())
        .arg(&ws)
        .status()
        .unwrap();
    assert!(status.success());
    let store_dir = dir.path().join("store");
    let mut store = Store::open(&ws, &store_dir, Options::default()).unwrap();
    store.snapshot(None).unwrap();
    let mut group = c.benchmark_group("tool_call");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("nothing_changed", |b| {
        b.iter(|| store.snapshot(Some("call")).unwrap())
    });
    let file = ws.join("README.md");
    let mut round = 0u64;
    group.bench_function("one_file_changed", |b| {
        b.iter(|| {
            round += 1;
            std::fs::write(&file, format!("round {round}\n")).unwrap();
            store.snapshot(Some("call")).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
