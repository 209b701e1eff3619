//! A store that reuses what it found in directories the kernel reported no
//! change in gives, after any sequence of operations, the same tree as a
//! scan of every file.

use crate::common::store;
use proptest::prelude::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use whittle_checkpoint::{Options, Store};

const PATHS: &[&str] = &["a", "d/a", "d/b", "d/e/c", "d/e/f/g", "x/y", "x/d/a"];
const DIRS: &[&str] = &["d", "d/e", "x", "x/d", "d/e/f"];

#[derive(Clone, Debug)]
enum Op {
    Write(usize, String),
    Delete(usize),
    Chmod(usize, bool),
    RenameDir(usize, usize),
    RemoveDir(usize),
    ChmodDir(usize, bool),
    Ignore(usize, String),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    let d = 0..DIRS.len();
    prop_oneof![
        4 => (p.clone(), "[a-c]{0,6}").prop_map(|(i, s)| Op::Write(i, s)),
        1 => p.clone().prop_map(Op::Delete),
        1 => (p, any::<bool>()).prop_map(|(i, x)| Op::Chmod(i, x)),
        1 => (d.clone(), d.clone()).prop_map(|(i, j)| Op::RenameDir(i, j)),
        1 => d.clone().prop_map(Op::RemoveDir),
        1 => (d.clone(), any::<bool>()).prop_map(|(i, x)| Op::ChmodDir(i, x)),
        1 => (d, "(a|b|c|e|\\*\\.x|)").prop_map(|(i, s)| Op::Ignore(i, s)),
        3 => Just(Op::Snapshot),
    ]
}

fn apply(root: &Path, op: &Op) {
    let at = |p: &str| root.join(p);
    let _ = match op {
        Op::Write(i, s) => fs::create_dir_all(at(PATHS[*i]).parent().unwrap())
            .and_then(|()| fs::write(at(PATHS[*i]), s)),
        Op::Delete(i) => fs::remove_file(at(PATHS[*i])),
        Op::Chmod(i, x) => fs::set_permissions(
            at(PATHS[*i]),
            fs::Permissions::from_mode(if *x { 0o755 } else { 0o640 }),
        ),
        Op::RenameDir(i, j) => fs::rename(at(DIRS[*i]), at(DIRS[*j])),
        Op::RemoveDir(i) => fs::remove_dir_all(at(DIRS[*i])),
        Op::ChmodDir(i, x) => fs::set_permissions(
            at(DIRS[*i]),
            fs::Permissions::from_mode(if *x { 0o755 } else { 0o700 }),
        ),
        Op::Ignore(i, s) => fs::write(at(DIRS[*i]).join(".gitignore"), format!("{s}\n")),
        Op::Snapshot => Ok(()),
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn a_watched_store_sees_what_a_full_scan_sees(ops in prop::collection::vec(op(), 1..30)) {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        for p in PATHS {
            apply(root, &Op::Write(PATHS.iter().position(|q| q == p).unwrap(), "start".into()));
        }
        let mut watched = store(root);
        watched.snapshot(None).unwrap();
        for op in ops.iter().chain([&Op::Snapshot]) {
            apply(root, op);
            if let Op::Snapshot = op {
                let seen = watched.snapshot(None).unwrap();
                let elsewhere = tempfile::tempdir().unwrap();
                let mut full = Store::open(root, elsewhere.path(), Options::default()).unwrap();
                let truth = full.snapshot(None).unwrap();
                prop_assert_eq!(seen.root, truth.root, "after {:?}", op);
                prop_assert_eq!(&seen.untracked, &truth.untracked);
                prop_assert_eq!(seen.scan.files, truth.scan.files);
            }
        }
    }
}

/// After a small change in a big tree the watched store reads one
/// directory, not every file: the scan's own count says how many files it
/// vouched for without a stat, which a full scan cannot.
#[test]
fn a_small_change_is_found_without_a_full_scan() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    for f in 0..400 {
        crate::common::write(root, &format!("d{}/f{f}.txt", f / 20), "x\n");
    }
    crate::common::age(root);
    let mut s = store(root);
    s.snapshot(None).unwrap();
    crate::common::write(root, "d7/f140.txt", "changed\n");
    let next = s.snapshot(None).unwrap();
    assert_eq!(next.stat.files_changed, 1);
    assert_eq!(next.scan.files, 400);
    assert_eq!(next.scan.dirs_scanned, 1, "{:?}", next.scan);
}
