//! Objects a hostile repository ships under the names of the workspace's
//! own contents, holding other bytes: a snapshot replaces them with the
//! right bytes instead of trusting the name (which would make every
//! snapshot fail, switching undo off), and a wrong object read back is
//! still a clear error.

use crate::common::{age, store, write};
use crate::forge::{hex_of, object_path, put_object_as, tree_bytes};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use whittle_checkpoint::CheckpointError;

/// A snapshot and a rewind work although objects named after `a.txt`'s
/// content and the root tree holding it were shipped wrong: of the right
/// size (`same_size`), or not.
fn undo_survives(same_size: bool) {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "hello\n");
    let store_dir = root.join(".whittle/checkpoints");
    let blob = hex_of(b"hello\n");
    let mode = fs::metadata(root.join("a.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    let tree_content = tree_bytes(&[(b'f', mode, b"a.txt", blob.clone())]);
    let tree = hex_of(&tree_content);
    if same_size {
        put_object_as(&store_dir, &blob, b"HELLO\n");
        put_object_as(&store_dir, &tree, &vec![b'x'; tree_content.len()]);
    } else {
        put_object_as(&store_dir, &blob, b"evil");
        put_object_as(&store_dir, &tree, b"not a tree");
    }

    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    assert_eq!(first.root.to_hex(), tree);
    assert_eq!(
        fs::read(object_path(&store_dir, &blob)).unwrap(),
        b"hello\n"
    );
    write(root, "a.txt", "changed\n");
    let second = s.snapshot(None).unwrap();
    assert_eq!((second.stat.insertions, second.stat.deletions), (1, 1));
    s.restore(&first.id).unwrap();
    assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"hello\n");
}

#[test]
fn a_shipped_object_of_another_size_is_replaced() {
    undo_survives(false);
}

#[test]
fn a_shipped_object_of_the_same_size_is_replaced() {
    undo_survives(true);
}

#[test]
fn an_object_spoiled_between_sessions_is_replaced_when_written_again() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "hello\n");
    age(root);
    let store_dir = root.join(".whittle/checkpoints");
    let first = store(root).snapshot(None).unwrap();
    // The next session's stat cache names the object; the file is read
    // again (its mtime moved) and the object written again.
    let blob = hex_of(b"hello\n");
    fs::write(object_path(&store_dir, &blob), "HELLO\n").unwrap();
    write(root, "a.txt", "hello\n");
    let mut s = store(root);
    s.snapshot(None).unwrap();
    write(root, "a.txt", "changed\n");
    s.snapshot(None).unwrap();
    s.restore(&first.id).unwrap();
    assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"hello\n");
}

#[test]
fn a_wrong_object_read_back_is_a_clear_error() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "hello\n");
    let store_dir = root.join(".whittle/checkpoints");
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    write(root, "a.txt", "changed\n");
    s.snapshot(None).unwrap();
    // Nothing in the workspace holds this content any more: no snapshot
    // writes it again.
    fs::write(object_path(&store_dir, &hex_of(b"hello\n")), "HELLO\n").unwrap();
    let err = s.restore(&first.id).unwrap_err();
    assert!(matches!(err, CheckpointError::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("does not match its hash"), "{err}");
    assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"changed\n");
}

#[test]
fn a_shipped_folder_at_an_object_name_is_replaced() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", "hello\n");
    let store_dir = root.join(".whittle/checkpoints");
    let blob = object_path(&store_dir, &hex_of(b"hello\n"));
    // A folder git can ship: it holds a file.
    write(&blob, "inside", "x");
    let mut s = store(root);
    let first = s.snapshot(None).unwrap();
    assert_eq!(fs::read(&blob).unwrap(), b"hello\n");
    write(root, "a.txt", "changed\n");
    s.snapshot(None).unwrap();
    s.restore(&first.id).unwrap();
    assert_eq!(fs::read(root.join("a.txt")).unwrap(), b"hello\n");
}
