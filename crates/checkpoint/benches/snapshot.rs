//! Snapshot cost against what Codex and opencode run for the same job, the
//! git CLI on a side repository (`git --git-dir=SIDE --work-tree=TREE add
//! -A && git write-tree`), on one generated tree: a first snapshot, and
//! one after 10 files changed. `WHITTLE_BENCH_FILES` sets the tree's size
//! (default 100,000 files, 100 per folder); `WHITTLE_BENCH_TREE` names a
//! real folder to copy and use instead (e.g. `~/.cargo/registry/src`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};
use whittle_checkpoint::{Options, Store};

fn files() -> usize {
    std::env::var("WHITTLE_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// `dirs` folders of 100 files of 1-4 KB of text, an hour old.
fn make_tree(root: &Path, n: usize) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..n {
        let dir = root.join(format!("d{:04}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        let size = 1024 + (i * 7919) % 3072;
        let line = format!("line of file {i} with some text to fill it up\n");
        let content: String = line.repeat(size / line.len() + 1)[..size].to_string();
        let path = dir.join(format!("f{:03}.txt", i % 100));
        fs::write(&path, content).unwrap();
        fs::File::open(&path).unwrap().set_modified(old).unwrap();
    }
}

/// Every regular file under `root`, for picking which to change.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn touch_ten(files: &[PathBuf], round: u64) {
    for k in 0..10 {
        let i = (k * 9973 + round as usize * 31) % files.len();
        fs::write(&files[i], format!("changed in round {round}\n")).unwrap();
    }
}

fn git_snapshot(side: &Path, tree: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .arg(format!("--git-dir={}", side.display()))
            .arg(format!("--work-tree={}", tree.display()))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["add", "-A"]);
    run(&["write-tree"]);
}

fn git_init(side: &Path) {
    let _ = fs::remove_dir_all(side);
    let out = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(side)
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn bench(c: &mut Criterion) {
    let base = tempfile::tempdir().unwrap();
    let tree = base.path().join("tree");
    let name = match std::env::var_os("WHITTLE_BENCH_TREE") {
        Some(real) => {
            let out = Command::new("cp")
                .arg("-a")
                .arg(&real)
                .arg(&tree)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            "real_tree".to_string()
        }
        None => {
            fs::create_dir(&tree).unwrap();
            make_tree(&tree, files());
            format!("{}_files", files())
        }
    };
    let all_files = files_under(&tree);
    eprintln!("{} files in the tree", all_files.len());
    let store_dir: PathBuf = base.path().join("store");
    let side = base.path().join("side.git");

    let mut group = c.benchmark_group(format!("snapshot_{name}"));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("first/whittle", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let _ = fs::remove_dir_all(&store_dir);
                let start = Instant::now();
                let mut store = Store::open(&tree, &store_dir, Options::default()).unwrap();
                store.snapshot(None).unwrap();
                total += start.elapsed();
            }
            total
        })
    });
    group.bench_function("first/git_cli", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                git_init(&side);
                let start = Instant::now();
                git_snapshot(&side, &tree);
                total += start.elapsed();
            }
            total
        })
    });

    let mut round = 0u64;
    // Files changed within the racy window are read again, as git does.
    let mut most_hashed = 0;
    // Without the watcher every file is stat'ed, as the git CLI does.
    for (name, watch_changes) in [
        ("after_10_changed/whittle_unwatched", false),
        ("after_10_changed/whittle", true),
    ] {
        let _ = fs::remove_dir_all(&store_dir);
        let options = Options {
            watch_changes,
            ..Options::default()
        };
        let mut store = Store::open(&tree, &store_dir, options).unwrap();
        store.snapshot(None).unwrap();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    touch_ten(&all_files, round);
                    let start = Instant::now();
                    let c = store.snapshot(None).unwrap();
                    total += start.elapsed();
                    most_hashed = most_hashed.max(c.scan.files_hashed);
                }
                total
            })
        });
    }
    eprintln!("incremental snapshots read at most {most_hashed} files");
    git_init(&side);
    git_snapshot(&side, &tree);
    group.bench_function("after_10_changed/git_cli", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                touch_ten(&all_files, round);
                let start = Instant::now();
                git_snapshot(&side, &tree);
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
