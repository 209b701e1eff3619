//! Checkpoints and rewinds: the files a session's tools changed come back
//! exactly (contents, modes, symlinks, folders), a user's `.git` is never
//! touched, ignored and oversized files are left alone and named, and the
//! conversation goes back too, across a `/compact`.

use crate::{Harness, assert_success, stderr, stdout};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::{Reply, content_text};

/// Every path under `root` (but `.whittle`) with what it is: a file's mode
/// and bytes, a link's target, a folder's mode.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == ".whittle" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = meta.permissions().mode() & 0o777;
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&p).unwrap().display())
            } else if meta.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                let bytes = std::fs::read(&p).unwrap();
                format!("file {mode:o} {}", blake3_hex(&bytes))
            };
            out.insert(rel, what);
        }
    }
    out
}

fn blake3_hex(bytes: &[u8]) -> String {
    // A cheap, stable content fingerprint (std has no hash of bytes to hex).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}-{}", bytes.len())
}

fn git(ws: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {:?}", out);
}

/// A workspace with a git repository (a commit and a staged change), an
/// ignored target/, a file over the size cap, an empty folder and a script.
fn project(h: &Harness, with_git: bool) {
    let ws = h.ws();
    std::fs::create_dir_all(ws.join("src/empty")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(ws.join("README.md"), "a readme, as a start\n").unwrap();
    std::fs::write(ws.join("tool.sh"), "echo hi\n").unwrap();
    std::fs::write(ws.join("edit.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(ws.join("target/build.o"), "object").unwrap();
    std::fs::write(ws.join("big.bin"), vec![7u8; 17 * 1024 * 1024]).unwrap();
    if with_git {
        git(ws, &["init", "-q"]);
        git(ws, &["add", "src", "README.md", "tool.sh", ".gitignore"]);
        git(ws, &["commit", "-q", "-m", "start"]);
        std::fs::write(ws.join("README.md"), "a readme, as a start\nstaged\n").unwrap();
        git(ws, &["add", "README.md"]);
    }
}

fn script_the_changes(h: &Harness) {
    h.server.push(Reply::tool_use(
        "c1",
        "bash",
        json!({"command": "rm -rf src && sed -i s/a/b/ README.md && echo new > new.txt && chmod +x tool.sh && ln -s README.md link && echo changed > target/build.o"}),
    ));
    h.server.push(Reply::tool_use(
        "c2",
        "write_file",
        json!({"path": "written.txt", "content": "written\n"}),
    ));
    h.server.push(Reply::tool_use(
        "c3",
        "edit_file",
        json!({"path": "edit.txt", "old_string": "beta", "new_string": "gamma"}),
    ));
    h.server.push(Reply::text("all done"));
}

pub(crate) fn sub(h: &Harness, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    cmd.args(args)
        .arg("--cwd")
        .arg(h.ws())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn without_target(mut t: BTreeMap<String, String>) -> BTreeMap<String, String> {
    t.remove("target/build.o");
    t
}

#[test]
fn rewind_restores_the_files_exactly_and_never_touches_git() {
    let h = Harness::new();
    project(&h, true);
    let before = tree(h.ws());
    let git_before = tree(&h.ws().join(".git"));
    script_the_changes(&h);
    let out = h.run(&[
        "--permission-mode",
        "yolo",
        "--output-format",
        "json",
        "-p",
        "change things",
    ]);
    assert_success(&out);
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let made = result["checkpoints"].as_array().unwrap();
    assert_eq!(made.len(), 4, "{made:?}");
    assert_eq!(made[0]["tool_call_id"], Value::Null);
    assert_eq!(made[1]["tool_call_id"], "c1");
    assert!(!h.ws().join("src").exists());
    assert!(h.ws().join("link").is_symlink());

    let list = sub(&h, &["rewind", "--list", "--json"]);
    assert_success(&list);
    let list: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 4);
    for item in list {
        for key in ["id", "session", "time", "tool_call_id", "files_changed"] {
            assert!(item.get(key).is_some(), "{key} in {item}");
        }
        assert_eq!(item["session"], result["session_id"]);
    }
    assert_eq!(list[0]["tool_call_id"], Value::Null);
    assert!(
        list[1]["files_changed"].as_u64().unwrap() >= 4,
        "{}",
        list[1]
    );
    let start = list[0]["id"].as_str().unwrap().to_string();

    let diff = sub(&h, &["diff"]);
    assert_success(&diff);
    let diff = stdout(&diff);
    assert!(diff.contains("+new"), "{diff}");
    assert!(diff.contains("gamma"), "{diff}");

    let out = sub(&h, &["rewind", "--to", &start, "--code"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "asks for --yes without a terminal"
    );
    let out = sub(&h, &["rewind", "--to", &start, "--yes"]);
    assert_success(&out);
    let said = stdout(&out);
    assert!(said.contains("target (ignored)"), "{said}");
    assert!(said.contains("big.bin (over the size cap)"), "{said}");
    assert_eq!(without_target(tree(h.ws())), without_target(before));
    // The ignored file the command changed stays as it is now.
    assert_eq!(
        std::fs::read_to_string(h.ws().join("target/build.o")).unwrap(),
        "changed\n"
    );
    assert_eq!(tree(&h.ws().join(".git")), git_before);
    let status = Command::new("git")
        .args(["diff", "--cached", "--name-only"])
        .current_dir(h.ws())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        "README.md\n",
        "index kept"
    );

    // The conversation went back too: --continue starts from nothing.
    h.server.push(Reply::text("fresh"));
    let out = h.run(&["--continue", "-p", "again"]);
    assert_success(&out);
    let last = h.requests().last().unwrap().body["messages"].clone();
    assert_eq!(last.as_array().unwrap().len(), 1, "{last}");
    assert_eq!(content_text(&last[0]), "again");
    h.assert_clean();
}

#[test]
fn rewind_in_a_folder_without_git() {
    let h = Harness::new();
    project(&h, false);
    let before = tree(h.ws());
    script_the_changes(&h);
    let out = h.run(&["--permission-mode", "yolo", "-p", "change things"]);
    assert_success(&out);
    let list = sub(&h, &["rewind", "--list", "--json"]);
    let list: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let start = list[0]["id"].as_str().unwrap().to_string();
    let out = sub(&h, &["rewind", "--to", &start, "--code", "--yes"]);
    assert_success(&out);
    assert_eq!(without_target(tree(h.ws())), without_target(before));
    h.assert_clean();
}

#[test]
fn repl_rewind_puts_back_files_and_conversation() {
    let h = Harness::new();
    project(&h, true);
    let before = tree(h.ws());
    let git_before = tree(&h.ws().join(".git"));
    script_the_changes(&h);
    h.server.push(Reply::text("fresh start"));
    // Points, newest first: after edit_file, after write_file, after bash,
    // the message: 4. Then 1: code and conversation.
    let out = h.run_with_stdin(
        &["--permission-mode", "yolo"],
        "change things\n/rewind\n4\n1\nagain\n",
    );
    assert_success(&out);
    let said = stdout(&out);
    assert!(said.contains("your message \"change things\""), "{said}");
    assert!(said.contains("files restored"), "{said}\n{}", stderr(&out));
    assert_eq!(without_target(tree(h.ws())), without_target(before));
    assert_eq!(tree(&h.ws().join(".git")), git_before);
    let last = h.requests().last().unwrap().body["messages"].clone();
    assert_eq!(last.as_array().unwrap().len(), 1, "{last}");
    assert_eq!(content_text(&last[0]), "again");
    h.assert_clean();
}

#[test]
fn rewind_across_a_compaction_gives_back_the_original_messages() {
    let h = Harness::new();
    h.server.push(Reply::text("first answer"));
    h.server.push(Reply::text("middle answer"));
    h.server.push(Reply::text("THE SUMMARY"));
    h.server.push(Reply::text("third answer"));
    h.server.push(Reply::text("after the rewind"));
    // Points newest first: third, middle, first; rewind the conversation
    // to before "middle", a point before the summary: the first exchange
    // as it was, not the summary.
    let out = h.run_with_stdin(&[], "first\nmiddle\n/compact\nthird\n/rewind\n2\n3\nnext\n");
    assert_success(&out);
    let requests = h.requests();
    let last = &requests.last().unwrap().body["messages"];
    let texts: Vec<String> = last.as_array().unwrap().iter().map(content_text).collect();
    assert_eq!(texts, ["first", "first answer", "next"], "{}", stdout(&out));
    assert!(!last.to_string().contains("THE SUMMARY"));
    h.assert_clean();
}

/// The answers of two concurrent sessions: each session's bash command first,
/// then a last word. Which session it is, its first message says.
///
/// A session saves its start just before its first command runs, so the
/// commands meet in `meet` (a writable root outside the workspace) before
/// either writes: each start then holds neither file, whichever process was
/// quicker to start. Without the meeting, a session that started late saved
/// the other's file in its start, and rewinding to it brought that file back.
fn two_sessions_reply(
    meet: PathBuf,
) -> impl Fn(&testkit::RecordedRequest) -> testkit::Step + Send + Sync + 'static {
    move |req| {
        let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
        let task = messages.first().map(content_text).unwrap_or_default();
        let (mine, theirs) = if task.contains("session A") {
            ("a", "b")
        } else {
            ("b", "a")
        };
        if messages.len() > 1 {
            return Reply::text(format!("{mine} done")).into();
        }
        let meet = meet.display();
        let wait_for = |path: String| {
            format!("for i in $(seq 400); do [ -e {path} ] && break; sleep 0.05; done")
        };
        let command = format!(
            "touch {meet}/{mine}.ready && {} && echo {mine} > {mine}.txt && {}",
            wait_for(format!("{meet}/{theirs}.ready")),
            wait_for(format!("{theirs}.txt")),
        );
        Reply::tool_use(format!("{mine}1"), "bash", json!({ "command": command })).into()
    }
}

#[test]
fn two_sessions_at_once_each_rewind_their_own_changes() {
    let h = Harness::new();
    project(&h, true);
    let before = tree(h.ws());
    let meet = h.home.path().join("meet");
    std::fs::create_dir(&meet).unwrap();
    h.write_user_config(&format!(
        "[sandbox]\nwritable_roots = [{:?}]\n",
        meet.display().to_string()
    ));
    h.server.set_fallback(two_sessions_reply(meet));
    let args = ["--permission-mode", "yolo", "--output-format", "json", "-p"];
    let a = h.spawn_with_stdin(&[&args[..], &["session A"]].concat(), "");
    let b = h.spawn_with_stdin(&[&args[..], &["session B"]].concat(), "");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_success(&a);
    assert_success(&b);
    let a: Value = serde_json::from_str(stdout(&a).trim()).unwrap();
    let b: Value = serde_json::from_str(stdout(&b).trim()).unwrap();
    assert!(h.ws().join("a.txt").exists() && h.ws().join("b.txt").exists());

    // Each session lists its own checkpoints, all readable.
    let mut starts = Vec::new();
    for result in [&b, &a] {
        let session = result["session_id"].as_str().unwrap();
        let list = sub(&h, &["rewind", "--list", "--json", "--session", session]);
        assert_success(&list);
        let list: Value = serde_json::from_str(&stdout(&list)).unwrap();
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), 2, "{list:?}");
        assert!(list.iter().all(|c| c["session"] == session), "{list:?}");
        assert_eq!(list[0]["tool_call_id"], Value::Null);
        starts.push((
            session.to_string(),
            list[0]["id"].as_str().unwrap().to_string(),
        ));
    }
    // B rewinds to before its command, then A: each one's file goes, and
    // the tree ends as it was before either ran.
    for ((session, start), file) in starts.iter().zip(["b.txt", "a.txt"]) {
        let args = [
            "rewind",
            "--session",
            session,
            "--to",
            start,
            "--code",
            "--yes",
        ];
        assert_success(&sub(&h, &args));
        assert!(!h.ws().join(file).exists(), "{file}");
    }
    assert_eq!(without_target(tree(h.ws())), without_target(before));
    h.assert_clean();
}

/// A repository can ship `.whittle/checkpoints/`: here a record dated after
/// any real one, which every snapshot would diff against (and fail on). The
/// store is not the person's (their key did not make it), so it is moved
/// aside whole and a new one started: checkpoints work from the first tool.
#[test]
fn a_checkpoint_store_that_came_with_the_folder_is_set_aside() {
    let h = Harness::new();
    let shipped = h.ws().join(".whittle/checkpoints/checkpoints");
    std::fs::create_dir_all(&shipped).unwrap();
    std::fs::write(shipped.join("ffffffffffffffff"), "not a record").unwrap();
    h.server.push(Reply::tool_use(
        "w",
        "write_file",
        json!({"path": "a.txt", "content": "mine\n"}),
    ));
    h.server.push(Reply::text("done"));
    let out = h.run(&[
        "--permission-mode",
        "accept-edits",
        "--output-format",
        "json",
        "-p",
        "write a.txt",
    ]);
    assert_success(&out);
    let err = stderr(&out);
    assert!(
        err.contains("checkpoint store in .whittle/ was not made by whittle under your account"),
        "{err}"
    );
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let made = result["checkpoints"].as_array().unwrap();
    assert_eq!(made.len(), 2, "{made:?}");
    let quarantined: Vec<_> = std::fs::read_dir(h.state().join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    assert_eq!(
        std::fs::read_to_string(quarantined[0].join("checkpoints/ffffffffffffffff")).unwrap(),
        "not a record"
    );
    // The new store is the person's: the next start keeps it.
    let start = made[0]["id"].as_str().unwrap().to_string();
    let out = sub(&h, &["rewind", "--to", &start, "--code", "--yes"]);
    assert_success(&out);
    assert!(!stderr(&out).contains("was not made"), "{}", stderr(&out));
    assert!(!h.ws().join("a.txt").exists());
    h.assert_clean();
}
