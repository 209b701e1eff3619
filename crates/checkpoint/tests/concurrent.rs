//! Two stores (two sessions) on one workspace and one store folder,
//! snapshotting, restoring and collecting from two threads: the store
//! stays whole and each restores its own checkpoints exactly.

use crate::common::{listing, write};
use std::path::Path;
use std::sync::Mutex;
use whittle_checkpoint::{GcLimits, Options, Store};

/// A session's edit and snapshot, and its restore and check, must not
/// interleave with the other session's workspace edits (the test's
/// expectation would be wrong, not the store); the store operations still
/// contend for the store's lock, and collections run outside it.
static TURN: Mutex<()> = Mutex::new(());

fn session(root: &Path, name: &str, rounds: usize) {
    let mut store =
        Store::open(root, &root.join(".whittle/checkpoints"), Options::default()).unwrap();
    let mut mine = Vec::new();
    for i in 0..rounds {
        {
            let _turn = TURN.lock().unwrap();
            write(root, &format!("{name}.txt"), &format!("{name} {i}\n"));
            write(root, &format!("{name}/n{i}.txt"), &format!("{i}\n"));
            let c = store.snapshot(Some(name)).unwrap();
            mine.push((c.id, listing(root, false)));
        }
        if i % 3 == 2 {
            let _turn = TURN.lock().unwrap();
            let (id, expected) = &mine[i / 2];
            let report = store.restore(id).unwrap();
            assert!(report.failed.is_empty(), "{:?}", report.failed);
            assert_eq!(&listing(root, false), expected);
        }
        if i == rounds / 2 {
            store.gc(GcLimits::default()).unwrap();
        }
    }
}

#[test]
fn two_sessions_share_a_store() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().to_path_buf();
    let (a, b) = (root.clone(), root.clone());
    let t1 = std::thread::spawn(move || session(&a, "alpha", 12));
    let t2 = std::thread::spawn(move || session(&b, "beta", 12));
    // Join both before judging: the temp dir must outlive both threads.
    let (r1, r2) = (t1.join(), t2.join());
    assert!(r1.is_ok() && r2.is_ok());

    // Every checkpoint still restores, from a third store.
    let mut third = Store::open(
        &root,
        &root.join(".whittle/checkpoints"),
        Options::default(),
    )
    .unwrap();
    let all = third.list().unwrap();
    assert!(all.len() >= 24);
    for c in &all {
        let report = third.restore(&c.id).unwrap();
        assert!(report.failed.is_empty());
    }
}
