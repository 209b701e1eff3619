//! Any sequence of file operations and snapshots: restoring any earlier
//! snapshot, in any order, gives exactly its tree.

use crate::common::{Node, listing, store};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const PATHS: &[&str] = &["a", "b", "d", "d/a", "d/b", "d/e", "d/e/c", "f/x"];

#[derive(Clone, Debug)]
enum Op {
    Write(usize, String),
    Delete(usize),
    Chmod(usize, bool),
    Symlink(usize, usize),
    Mkdir(usize),
    Rmdir(usize),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    prop_oneof![
        3 => (p.clone(), "[a-c\n]{0,12}").prop_map(|(i, s)| Op::Write(i, s)),
        1 => p.clone().prop_map(Op::Delete),
        1 => (p.clone(), any::<bool>()).prop_map(|(i, x)| Op::Chmod(i, x)),
        1 => (p.clone(), p.clone()).prop_map(|(i, j)| Op::Symlink(i, j)),
        1 => p.clone().prop_map(Op::Mkdir),
        1 => p.clone().prop_map(Op::Rmdir),
        2 => Just(Op::Snapshot),
    ]
}

/// Applies an operation as a tool would; one that makes no sense in the
/// current tree (a file under a file) just fails.
fn apply(root: &Path, op: &Op) {
    let at = |i: &usize| root.join(PATHS[*i]);
    let _ = match op {
        Op::Write(i, s) => {
            fs::create_dir_all(at(i).parent().unwrap()).and_then(|()| fs::write(at(i), s))
        }
        Op::Delete(i) => fs::remove_file(at(i)),
        Op::Chmod(i, x) => {
            let mode = if *x { 0o755 } else { 0o640 };
            if fs::symlink_metadata(at(i)).is_ok_and(|m| m.is_file()) {
                fs::set_permissions(at(i), fs::Permissions::from_mode(mode))
            } else {
                Ok(())
            }
        }
        Op::Symlink(i, j) => std::os::unix::fs::symlink(PATHS[*j], at(i)),
        Op::Mkdir(i) => fs::create_dir_all(at(i)),
        Op::Rmdir(i) => fs::remove_dir_all(at(i)),
        Op::Snapshot => Ok(()),
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn restoring_any_snapshot_gives_its_tree(
        ops in prop::collection::vec(op(), 1..30),
        order in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        let mut s = store(root);
        let mut saved: Vec<(whittle_checkpoint::CheckpointId, BTreeMap<PathBuf, Node>)> = Vec::new();
        for op in ops.iter().chain([&Op::Snapshot]) {
            apply(root, op);
            if let Op::Snapshot = op {
                let c = s.snapshot(None).unwrap();
                saved.push((c.id, listing(root, false)));
            }
        }
        for pick in order {
            let (id, expected) = &saved[pick.index(saved.len())];
            let report = s.restore(id).unwrap();
            prop_assert!(report.failed.is_empty(), "{:?}", report.failed);
            prop_assert_eq!(&listing(root, false), expected);
        }
    }
}
