//! A store shipped by a hostile repository, with trees naming entries
//! that would reach outside their folder (`..`, `/etc/x`, `a/b`) or into
//! `.git` or `.whittle`, or recording setuid modes: a restore refuses the
//! tree with an error naming the store file, and writes nothing.

use crate::common::{Node, listing, write};
use crate::forge::{Entry, put_checkpoint, put_object, put_tree};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use whittle_checkpoint::{CheckpointError, CheckpointId, Options, Store};

struct Forged {
    base: tempfile::TempDir,
    ws: PathBuf,
    store_dir: PathBuf,
    store: Store,
    real: CheckpointId,
    /// An object to write somewhere.
    blob: String,
}

/// A workspace `base/ws` with a real `.git` and a nested one, a file
/// outside it (`base/outside/victim.txt`) and one real checkpoint.
fn setup() -> Forged {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    write(&ws, "keep.txt", "mine\n");
    write(&ws, ".git/config", "[core]\n");
    write(&ws, "sub/.git/config", "[sub]\n");
    write(base.path(), "outside/victim.txt", "victim\n");
    let store_dir = ws.join(".whittle/checkpoints");
    let mut store = Store::open(&ws, &store_dir, Options::default()).unwrap();
    let real = store.snapshot(None).unwrap().id;
    let blob = put_object(&store_dir, b"forged\n");
    Forged {
        base,
        ws,
        store_dir,
        store,
        real,
        blob,
    }
}

/// Everything under `base` but the store.
fn everything(base: &Path) -> BTreeMap<PathBuf, Node> {
    listing(base, true)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("ws/.whittle"))
        .collect()
}

/// Restores a checkpoint whose root tree `forge` builds; expects the
/// refusal, and nothing changed in or out of the workspace.
fn refused(what: &str, forge: impl FnOnce(&Forged) -> Vec<Entry<'static>>) {
    let mut f = setup();
    let entries = forge(&f);
    let root = put_tree(&f.store_dir, &entries);
    let id = put_checkpoint(&f.store_dir, &f.real, "00000000000000f0", &root);
    let before = everything(f.base.path());
    let result = f.store.restore(&id);
    assert_eq!(everything(f.base.path()), before, "{what}: files changed");
    assert!(
        !f.ws.join(".whittle/pwned.txt").exists(),
        "{what}: wrote into .whittle"
    );
    let err = result.err().unwrap_or_else(|| panic!("{what}: restored"));
    assert!(
        matches!(err, CheckpointError::UnsafeName { .. }),
        "{what}: {err}"
    );
    let message = err.to_string();
    assert!(message.contains("objects/"), "{what}: {message}");
    assert!(!message.contains('\n'), "{what}: {message}");
}

fn file(name: &'static [u8], blob: &str) -> Entry<'static> {
    (b'f', 0o644, name, blob.to_string())
}

fn dir(name: &'static [u8], tree: String) -> Entry<'static> {
    (b'd', 0o755, name, tree)
}

#[test]
fn a_dot_dot_folder_is_refused() {
    refused("..", |f| {
        let inner = put_tree(&f.store_dir, &[file(b"escaped.txt", &f.blob)]);
        vec![dir(b"..", inner)]
    });
}

#[test]
fn an_absolute_name_is_refused() {
    refused("absolute", |f| {
        let victim = f.base.path().join("outside/victim.txt");
        let name: &'static [u8] = Vec::leak(victim.as_os_str().as_bytes().to_vec());
        vec![file(name, &f.blob)]
    });
}

#[test]
fn a_name_with_a_slash_is_refused() {
    refused("slash", |f| vec![file(b"../slash.txt", &f.blob)]);
    refused("slash inside", |f| {
        let inner = put_tree(&f.store_dir, &[file(b"x/../../../up.txt", &f.blob)]);
        vec![dir(b"sub", inner)]
    });
}

#[test]
fn empty_dot_and_nul_names_are_refused() {
    refused("empty", |f| vec![file(b"", &f.blob)]);
    refused("dot", |f| {
        let inner = put_tree(&f.store_dir, &[file(b"escaped.txt", &f.blob)]);
        vec![dir(b".", inner)]
    });
    refused("nul", |f| vec![file(b"a\0b", &f.blob)]);
}

#[test]
fn git_and_whittle_folders_are_refused() {
    refused(".git", |f| {
        let git = put_tree(&f.store_dir, &[file(b"config", &f.blob)]);
        vec![dir(b".git", git)]
    });
    refused("nested .git", |f| {
        let git = put_tree(&f.store_dir, &[file(b"config", &f.blob)]);
        let sub = put_tree(&f.store_dir, &[dir(b".git", git)]);
        vec![dir(b"sub", sub)]
    });
    refused(".whittle", |f| {
        let inner = put_tree(&f.store_dir, &[file(b"pwned.txt", &f.blob)]);
        vec![dir(b".whittle", inner)]
    });
}

#[test]
fn a_nested_whittle_folder_is_an_ordinary_folder() {
    let mut f = setup();
    let inner = put_tree(&f.store_dir, &[file(b"notes.txt", &f.blob)]);
    let sub = put_tree(&f.store_dir, &[dir(b".whittle", inner)]);
    let root = put_tree(&f.store_dir, &[dir(b"sub", sub)]);
    let id = put_checkpoint(&f.store_dir, &f.real, "00000000000000f1", &root);
    let report = f.store.restore(&id).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        fs::read(f.ws.join("sub/.whittle/notes.txt")).unwrap(),
        b"forged\n"
    );
    assert_eq!(fs::read(f.ws.join("sub/.git/config")).unwrap(), b"[sub]\n");
}

#[test]
fn setuid_setgid_and_sticky_bits_are_never_restored() {
    let mut f = setup();
    let empty = put_tree(&f.store_dir, &[]);
    let root = put_tree(
        &f.store_dir,
        &[
            (b'f', 0o6755, b"run.sh", f.blob.clone()),
            (b'd', 0o3775, b"shared", empty),
        ],
    );
    let id = put_checkpoint(&f.store_dir, &f.real, "00000000000000f2", &root);
    let report = f.store.restore(&id).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let mode = |p: &str| {
        fs::symlink_metadata(f.ws.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("run.sh"), 0o755);
    assert_eq!(mode("shared"), 0o775);
    assert!(!f.ws.join("keep.txt").exists());
}
