//! A folder that is no git repository: `.gitignore` still applies; ignored
//! and oversized paths are listed, not stored, and a restore leaves them.

use crate::common::{listing, write};
use std::fs;
use std::path::PathBuf;
use whittle_checkpoint::{Options, Store, Untracked, UntrackedReason};

#[test]
fn ignored_and_oversized_paths_survive_a_restore_untouched() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, ".gitignore", "target/\n*.log\n!keep.log\n");
    write(root, "src/lib.rs", "pub fn a() {}\n");
    write(root, "target/debug/out.bin", "built\n");
    write(root, "run.log", "log\n");
    write(root, "keep.log", "kept\n");
    write(root, "sub/.gitignore", "local.txt\n");
    write(root, "sub/local.txt", "local\n");
    write(root, "big.bin", &"x".repeat(5000));
    let options = Options {
        max_file_size: 4096,
        ..Options::default()
    };
    let mut store = Store::open(root, &root.join(".whittle/checkpoints"), options).unwrap();
    let first = store.snapshot(None).unwrap();
    let expect = |p: &str, reason| Untracked {
        path: PathBuf::from(p),
        reason,
    };
    assert_eq!(
        first.untracked,
        vec![
            expect("big.bin", UntrackedReason::TooLarge),
            expect("run.log", UntrackedReason::Ignored),
            expect("sub/local.txt", UntrackedReason::Ignored),
            expect("target", UntrackedReason::Ignored),
        ]
    );

    write(root, "target/debug/out.bin", "rebuilt\n");
    write(root, "target/new.o", "o\n");
    write(root, "big.bin", &"y".repeat(6000));
    write(root, "run.log", "more log\n");
    write(root, "keep.log", "changed\n");
    write(root, "src/lib.rs", "pub fn b() {}\n");
    let report = store.restore(&first.id).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(
        report
            .left_alone
            .contains(&expect("target", UntrackedReason::Ignored))
    );
    assert!(
        report
            .left_alone
            .contains(&expect("big.bin", UntrackedReason::TooLarge))
    );
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(read("target/debug/out.bin"), "rebuilt\n");
    assert_eq!(read("target/new.o"), "o\n");
    assert_eq!(read("big.bin"), "y".repeat(6000));
    assert_eq!(read("run.log"), "more log\n");
    assert_eq!(read("keep.log"), "kept\n");
    assert_eq!(read("src/lib.rs"), "pub fn a() {}\n");
    assert_eq!(read("sub/local.txt"), "local\n");
    assert!(!root.join(".git").exists());
}

#[test]
fn a_folder_removed_since_keeps_the_ignored_files_inside_it() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, ".gitignore", "*.o\n");
    let mut store = crate::common::store(root);
    let first = store.snapshot(None).unwrap();
    write(root, "build/a.c", "int a;\n");
    write(root, "build/a.o", "obj\n");
    write(root, "gone/b.c", "int b;\n");
    store.restore(&first.id).unwrap();
    let now = listing(root, false);
    assert!(now.contains_key(&PathBuf::from("build/a.o")));
    assert!(!now.contains_key(&PathBuf::from("build/a.c")));
    assert!(!now.contains_key(&PathBuf::from("gone")));
}
