//! A snapshot after a small change reads only the changed files, in the
//! same process and in the next one (the stat cache is persisted).

use crate::common::{age, store, write};
use std::fs;

#[test]
fn one_changed_file_is_the_only_one_hashed() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    for d in 0..5 {
        for f in 0..10 {
            write(root, &format!("d{d}/f{f}.txt"), &format!("{d} {f}\n"));
        }
    }
    age(root);
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    assert_eq!(first.scan.files, 50);
    assert_eq!(first.scan.files_hashed, 50);
    let second = s.snapshot(None).unwrap();
    assert_eq!(second.scan.files_hashed, 0);
    assert_eq!(second.root, first.root);
    assert_eq!(second.stat.files_changed, 0);

    write(root, "d3/f7.txt", "changed\n");
    let third = s.snapshot(None).unwrap();
    assert_eq!(third.scan.files_hashed, 1);
    assert_eq!(third.stat.files_changed, 1);
    // One file, its directory's tree and the root tree are new.
    assert_eq!(third.scan.objects_written, 3);

    // A new file of the same size with its old mtime put back: the ctime
    // still gives it away.
    let old = fs::metadata(root.join("d1/f1.txt"))
        .unwrap()
        .modified()
        .unwrap();
    write(root, "d1/f1.txt", "1 9\n");
    fs::File::open(root.join("d1/f1.txt"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let fourth = s.snapshot(None).unwrap();
    assert_eq!(fourth.stat.files_changed, 1);

    age(root);
    s.snapshot(None).unwrap();
    drop(s);
    let mut fresh = store(root);
    let next = fresh.snapshot(None).unwrap();
    assert_eq!(
        next.scan.files_hashed, 0,
        "the persisted cache was not used"
    );
    assert_eq!(next.scan.files, 50);
}

#[test]
fn a_racily_clean_file_is_read_again() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "aaaa\n");
    let mut s = store(root);
    s.snapshot(None).unwrap();
    // Rewritten at once after the snapshot: read again, never trusted.
    write(root, "a.txt", "bbbb\n");
    let second = s.snapshot(None).unwrap();
    assert_eq!(second.stat.files_changed, 1);
    assert_eq!(second.scan.files_hashed, 1);
}

/// The stat cache after a small change grows by a journal entry, not a
/// rewrite; the next process reads the journal (a torn tail too); files
/// that are gone leave the cache at the next rebuild.
#[test]
fn a_small_change_appends_to_the_cache_journal() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    for f in 0..3000 {
        write(root, &format!("d{}/f{f}.txt", f / 100), &format!("{f}\n"));
    }
    age(root);
    let index = root.join(".whittle/checkpoints/index");
    let journal = root.join(".whittle/checkpoints/index.log");
    let mut s = store(root);
    s.snapshot(None).unwrap();
    let index_bytes = fs::read(&index).unwrap();
    assert!(!journal.exists());

    // Two files changed, their mtimes put in the past so the cache may
    // trust what it reads of them now.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for rel in ["d7/f700.txt", "d7/f701.txt"] {
        write(root, rel, "changed\n");
        fs::File::open(root.join(rel))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let changed = s.snapshot(None).unwrap();
    assert_eq!(changed.scan.files_hashed, 2);
    assert_eq!(
        fs::read(&index).unwrap(),
        index_bytes,
        "the index was rewritten"
    );
    let logged = fs::metadata(&journal).unwrap().len();
    assert!(
        logged > 0 && logged < index_bytes.len() as u64 / 100,
        "{logged}"
    );
    drop(s);

    // A crash mid-append leaves a torn batch: the next process uses the
    // whole batches and reads nothing it need not.
    let mut torn = fs::read(&journal).unwrap();
    torn.extend_from_slice(b"whittle-stat-log-1\n\x00\x00");
    fs::write(&journal, torn).unwrap();
    let mut s = store(root);
    let next = s.snapshot(None).unwrap();
    assert_eq!(next.scan.files_hashed, 0, "the journal was not read");
    assert_eq!(next.scan.files, 3000);

    // Most files deleted: the cache is rebuilt without them, whole.
    for f in 0..2500 {
        fs::remove_file(root.join(format!("d{}/f{f}.txt", f / 100))).unwrap();
    }
    s.snapshot(None).unwrap();
    s.snapshot(None).unwrap();
    let rebuilt = fs::read(&index).unwrap();
    assert!(
        rebuilt.len() < index_bytes.len() / 4,
        "{} of {}",
        rebuilt.len(),
        index_bytes.len()
    );
    assert!(!journal.exists());
    drop(s);
    let mut s = store(root);
    assert_eq!(s.snapshot(None).unwrap().scan.files_hashed, 0);
}
