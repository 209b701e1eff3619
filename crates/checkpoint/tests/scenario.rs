//! The scenario: a real shell command removes, edits, adds,
//! chmods and links; a restore gives the tree exactly back and the user's
//! own repository byte for byte.

use crate::common::{git, git_state, listing, sh, store, write};
use std::fs;
use std::os::unix::fs::PermissionsExt;

#[test]
fn restore_undoes_a_shell_command_and_never_touches_dot_git() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "README.md", "a line\nanother a\n");
    write(root, "src/main.rs", "fn main() {}\n");
    write(root, "src/deep/mod.rs", "pub mod x;\n");
    write(root, "tool.sh", "echo hi\n");
    write(root, "edit.txt", "one\ntwo\nthree\n");
    write(root, "full/only.txt", "soon gone\n");
    fs::create_dir(root.join("empty")).unwrap();
    fs::set_permissions(root.join("src/deep"), fs::Permissions::from_mode(0o750)).unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "first"]);
    // A dirty index: one change staged, another not.
    write(root, "edit.txt", "one\ntwo\nthree\nstaged\n");
    git(root, &["add", "edit.txt"]);
    write(root, "edit.txt", "one\ntwo\nthree\nstaged\nunstaged\n");
    write(root, "staged-new.txt", "new in index\n");
    git(root, &["add", "staged-new.txt"]);

    let git_before = git_state(root);
    let before = listing(root, false);
    let mut store = store(root);
    let first = store.snapshot(Some("call_1")).unwrap();
    assert_eq!(git_state(root), git_before, "a snapshot changed .git");

    sh(
        root,
        "rm -rf src && sed -i s/a/b/ README.md && echo new > new.txt && chmod +x tool.sh && ln -s README.md link",
    );
    write(root, "edit.txt", "one\n2\nthree\n");
    fs::remove_file(root.join("full/only.txt")).unwrap();
    fs::create_dir(root.join("made")).unwrap();
    fs::remove_dir(root.join("empty")).unwrap();
    let after = listing(root, false);

    let second = store.snapshot(Some("call_2")).unwrap();
    assert_eq!(second.parent.as_ref(), Some(&first.id));
    // src/main.rs, src/deep/mod.rs, README.md, new.txt, tool.sh, link,
    // edit.txt, full/only.txt.
    assert_eq!(second.stat.files_changed, 8);
    assert!(second.stat.insertions >= 4 && second.stat.deletions >= 6);

    let report = store.restore(&first.id).unwrap();
    assert_eq!(listing(root, false), before);
    assert_eq!(git_state(root), git_before, "a restore changed .git");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(report.removed.iter().any(|p| p.ends_with("new.txt")));
    assert!(report.written.iter().any(|p| p.ends_with("src/main.rs")));

    // And the restore itself can be undone.
    store.restore(&report.before.id).unwrap();
    assert_eq!(listing(root, false), after);
    store.restore(&second.id).unwrap();
    assert_eq!(listing(root, false), after);
    store.restore(&first.id).unwrap();
    assert_eq!(listing(root, false), before);
    assert_eq!(git_state(root), git_before);
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(status.status.success());
}

#[test]
fn a_directory_swapped_for_a_symlink_is_replaced_not_written_through() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "dir/file", "mine\n");
    write(outside.path(), "file", "outside\n");
    let mut store = store(root);
    let first = store.snapshot(None).unwrap();
    fs::remove_dir_all(root.join("dir")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("dir")).unwrap();
    let before = listing(root, false);
    let report = store.restore(&first.id).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        fs::read_to_string(outside.path().join("file")).unwrap(),
        "outside\n"
    );
    assert!(fs::symlink_metadata(root.join("dir")).unwrap().is_dir());
    assert_eq!(fs::read_to_string(root.join("dir/file")).unwrap(), "mine\n");
    // Undo: the link comes back.
    store.restore(&report.before.id).unwrap();
    assert_eq!(listing(root, false), before);
}

#[test]
fn nested_git_files_and_folders_are_skipped_at_any_depth() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "sub/code.rs", "x\n");
    git(&root.join("sub"), &["init", "-q"]);
    write(root, "wt/.git", "gitdir: /elsewhere\n");
    let sub_git = git_state(&root.join("sub"));
    let mut store = store(root);
    let first = store.snapshot(None).unwrap();
    fs::remove_file(root.join("sub/code.rs")).unwrap();
    fs::remove_file(root.join("wt/.git")).unwrap();
    store.restore(&first.id).unwrap();
    // The gitfile was never in the checkpoint: not brought back.
    assert!(!root.join("wt/.git").exists());
    assert!(root.join("sub/code.rs").exists());
    assert_eq!(git_state(&root.join("sub")), sub_git);
}
