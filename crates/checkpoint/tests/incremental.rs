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
