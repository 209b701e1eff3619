//! Diffs between checkpoints and the workspace, and collection.

use crate::common::{store, write};
use std::fs;
use whittle_checkpoint::{CheckpointError, GcLimits};

#[test]
fn unified_diff_shows_text_and_names_binary() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "one\ntwo\nthree\n");
    fs::write(root.join("b.bin"), [0u8, 1, 2]).unwrap();
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    write(root, "a.txt", "one\n2\nthree\n");
    fs::write(root.join("b.bin"), [0u8, 1, 3]).unwrap();
    let stat = s.diff_stat(&first.id, None).unwrap();
    assert_eq!(
        (stat.files_changed, stat.insertions, stat.deletions),
        (2, 1, 1)
    );
    let diff = s.unified_diff(&first.id, None).unwrap();
    assert!(
        diff.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"),
        "{diff}"
    );
    assert!(
        diff.contains("Binary files a/b.bin and b/b.bin differ"),
        "{diff}"
    );
    let second = s.snapshot(None).unwrap();
    assert_eq!(s.diff_stat(&first.id, Some(&second.id)).unwrap(), stat);
    assert_eq!(second.stat, stat);
}

#[test]
fn gc_keeps_the_newest_and_drops_what_nothing_needs() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let mut s = store(root);
    let mut ids = Vec::new();
    for i in 0..5 {
        write(root, "f.txt", &format!("{i}\n").repeat(1000));
        ids.push(s.snapshot(None).unwrap().id);
    }
    let kept = s.gc(GcLimits::default()).unwrap();
    assert_eq!(kept.checkpoints_removed, 0);
    let report = s
        .gc(GcLimits {
            max_bytes: Some(0),
            max_age: None,
        })
        .unwrap();
    assert_eq!(report.checkpoints_removed, 4);
    assert_eq!(report.checkpoints_kept, 1);
    assert!(report.objects_removed >= 4);
    assert_eq!(s.list().unwrap().len(), 1);
    assert!(matches!(
        s.restore(&ids[0]),
        Err(CheckpointError::NotFound(_))
    ));
    write(root, "f.txt", "other\n");
    s.restore(&ids[4]).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("f.txt")).unwrap(),
        "4\n".repeat(1000)
    );
    // The cache named objects the collection removed: a fresh snapshot of
    // an old content must store it again.
    write(root, "f.txt", &"0\n".repeat(1000));
    let again = s.snapshot(None).unwrap();
    write(root, "f.txt", "x\n");
    s.restore(&again.id).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("f.txt")).unwrap(),
        "0\n".repeat(1000)
    );
    let aged = s
        .gc(GcLimits {
            max_bytes: None,
            max_age: Some(std::time::Duration::ZERO),
        })
        .unwrap();
    assert_eq!(aged.checkpoints_kept, 1);
}
