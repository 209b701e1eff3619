//! Input that must not make a snapshot panic, hang or lie: odd names, a
//! FIFO, a store that cannot be written.

use crate::common::{listing, sh, store};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use whittle_checkpoint::{CheckpointError, Options, Store, UntrackedReason};

#[test]
fn odd_names_round_trip() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let names: [&[u8]; 5] = [
        b"new\nline",
        b"bad\xff\xfebytes",
        b"-rf",
        b" spaced name ",
        b"back\\slash\ttab",
    ];
    for n in names {
        fs::write(root.join(OsStr::from_bytes(n)), n).unwrap();
    }
    fs::create_dir(root.join(OsStr::from_bytes(b"dir\xff"))).unwrap();
    fs::write(root.join(OsStr::from_bytes(b"dir\xff/in\nside")), "x").unwrap();
    let before = listing(root, false);
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    assert_eq!(first.scan.files, 6);
    sh(root, "rm -rf ./*  ./' spaced name '");
    assert!(listing(root, false).len() < before.len());
    s.restore(&first.id).unwrap();
    assert_eq!(listing(root, false), before);
    let diff = s.unified_diff(&first.id, None).unwrap();
    assert!(diff.is_empty());
}

#[test]
fn a_fifo_is_listed_never_opened() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    fs::write(root.join("a.txt"), "a").unwrap();
    sh(root, "mkfifo pipe && mkdir d && mkfifo d/pipe2");
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    let special: Vec<_> = first
        .untracked
        .iter()
        .filter(|u| u.reason == UntrackedReason::Special)
        .map(|u| u.path.clone())
        .collect();
    assert_eq!(
        special,
        vec![PathBuf::from("d/pipe2"), PathBuf::from("pipe")]
    );
    fs::write(root.join("a.txt"), "b").unwrap();
    s.restore(&first.id).unwrap();
    assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "a");
    assert!(root.join("pipe").exists());
}

#[test]
fn an_unusable_store_is_a_typed_error() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    fs::write(root.join("blocker"), "a file, not a folder").unwrap();
    let err = Store::open(root, &root.join("blocker/checkpoints"), Options::default())
        .err()
        .unwrap();
    assert!(
        matches!(err, CheckpointError::StoreUnusable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("unusable"));

    // Read-only: a permission only binds a user who is not root.
    let ro = root.join("ro");
    fs::create_dir(&ro).unwrap();
    sh(root, "chmod 555 ro");
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout
        .starts_with(b"0\n");
    let opened = Store::open(root, &ro.join("store"), Options::default());
    if is_root {
        assert!(opened.is_ok());
    } else {
        assert!(matches!(opened, Err(CheckpointError::StoreUnusable { .. })));
    }
    // /proc cannot hold a store, root or not.
    let err = Store::open(
        root,
        std::path::Path::new("/proc/self/checkpoints"),
        Options::default(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, CheckpointError::StoreUnusable { .. }),
        "{err}"
    );
}

#[test]
fn an_unknown_id_is_an_error_not_a_panic() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = store(ws.path());
    assert!(matches!(
        "nothex".parse::<whittle_checkpoint::CheckpointId>(),
        Err(CheckpointError::InvalidId(_))
    ));
    let id = "0123456789abcdef".parse().unwrap();
    assert!(matches!(s.restore(&id), Err(CheckpointError::NotFound(_))));
}
