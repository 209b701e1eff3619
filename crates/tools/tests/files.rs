//! read_file, write_file and edit_file on real files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};
use whittle_tools::{EditFileTool, ReadFileTool, Tool, ToolContext, ToolOutput, WriteFileTool};

async fn call(tool: &dyn Tool, ctx: &ToolContext, input: Value) -> ToolOutput {
    tool.run(input, ctx).await
}

fn setup() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    (dir, ctx)
}

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let (dir, ctx) = setup();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fs::write(dir.path().join("a.txt"), &text).unwrap();

    let out = call(&ReadFileTool, &ctx, json!({"path": "a.txt"})).await;
    assert!(!out.is_error);
    assert!(out.content.starts_with("     1\tline 1\n     2\tline 2\n"));
    assert!(
        out.content.ends_with("    10\tline 10\n"),
        "{}",
        out.content
    );

    let out = call(
        &ReadFileTool,
        &ctx,
        json!({"path": "a.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert_eq!(
        out.content,
        "     3\tline 3\n     4\tline 4\n[showing lines 3-4 of 10; pass offset=5 to read on]\n"
    );

    let out = call(&ReadFileTool, &ctx, json!({"path": "a.txt", "offset": 9})).await;
    assert_eq!(
        out.content,
        "     9\tline 9\n    10\tline 10\n[showing lines 9-10 of 10]\n"
    );

    let out = call(&ReadFileTool, &ctx, json!({"path": "a.txt", "offset": 11})).await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("past the end of a.txt, which has 10 lines")
    );

    let abs = dir.path().join("a.txt");
    let out = call(
        &ReadFileTool,
        &ctx,
        json!({"path": abs.to_str().unwrap(), "limit": 1}),
    )
    .await;
    assert!(
        out.content
            .starts_with("     1\tline 1\n[showing lines 1-1 of 10")
    );
}

#[tokio::test]
async fn read_refuses_binary_and_decodes_bad_utf8() {
    let (dir, ctx) = setup();
    let mut png = vec![
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
    ];
    png.extend(std::iter::repeat_n(7u8, 5000));
    fs::write(dir.path().join("img.png"), &png).unwrap();
    let out = call(&ReadFileTool, &ctx, json!({"path": "img.png"})).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "img.png is a binary file (5,012 bytes); read_file shows text only"
    );

    fs::write(dir.path().join("latin1.txt"), b"caf\xe9\nok\n").unwrap();
    let out = call(&ReadFileTool, &ctx, json!({"path": "latin1.txt"})).await;
    assert!(!out.is_error);
    assert!(out.content.starts_with("     1\tcaf\u{FFFD}\n     2\tok\n"));
    assert!(out.content.contains("not valid UTF-8"));
}

#[tokio::test]
async fn read_caps_long_lines_and_reports_missing_files() {
    let (dir, ctx) = setup();
    let long = "x".repeat(50_000);
    fs::write(dir.path().join("min.js"), format!("{long}\nshort\n")).unwrap();
    let out = call(&ReadFileTool, &ctx, json!({"path": "min.js"})).await;
    assert!(!out.is_error);
    assert!(out.content.contains("chars cut]"));
    assert!(
        out.content
            .contains("[line 1 is 50,001 bytes long; see the rest with bash"),
        "{}",
        out.content
    );
    assert!(out.content.contains("     2\tshort\n"));
    assert!(out.content.len() < 3_000);

    let out = call(&ReadFileTool, &ctx, json!({"path": "nope.txt"})).await;
    assert_eq!(out, ToolOutput::error("file not found: nope.txt"));
    let out = call(&ReadFileTool, &ctx, json!({"path": "."})).await;
    assert!(out.is_error && out.content.contains("is a directory"));
    fs::write(dir.path().join("empty"), "").unwrap();
    let out = call(&ReadFileTool, &ctx, json!({"path": "empty"})).await;
    assert_eq!(out, ToolOutput::ok("(empty is empty)"));
}

#[tokio::test]
async fn write_creates_parents_and_keeps_permissions() {
    let (dir, ctx) = setup();
    let out = call(
        &WriteFileTool,
        &ctx,
        json!({"path": "deep/er/new.rs", "content": "fn main() {}\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, "Created deep/er/new.rs (1 lines, 13 bytes)");
    assert_eq!(
        fs::read_to_string(dir.path().join("deep/er/new.rs")).unwrap(),
        "fn main() {}\n"
    );

    let script = dir.path().join("run.sh");
    fs::write(&script, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let out = call(
        &WriteFileTool,
        &ctx,
        json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    )
    .await;
    assert!(out.content.starts_with("Overwrote run.sh"));
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o755
    );
    // No temporary files are left behind.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Writing through a symlink updates the target and keeps the link.
    fs::write(dir.path().join("real.txt"), "old").unwrap();
    std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
    call(
        &WriteFileTool,
        &ctx,
        json!({"path": "link.txt", "content": "new"}),
    )
    .await;
    assert!(
        fs::symlink_metadata(dir.path().join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("real.txt")).unwrap(),
        "new"
    );

    let out = call(
        &WriteFileTool,
        &ctx,
        json!({"path": "deep", "content": "x"}),
    )
    .await;
    assert!(out.is_error && out.content.contains("is a directory"));
}

#[tokio::test]
async fn edit_requires_exactly_one_match_unless_replace_all() {
    let (dir, ctx) = setup();
    let file = dir.path().join("lib.rs");
    fs::write(&file, "let a = 1;\nlet b = 1;\nlet c = 2;\n").unwrap();

    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "lib.rs", "old_string": "let z", "new_string": "x"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("old_string was not found in lib.rs (0 matches)")
    );

    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "lib.rs", "old_string": "= 1;", "new_string": "= 9;"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("old_string matches 2 times in lib.rs"),
        "{}",
        out.content
    );
    assert!(out.content.contains("replace_all"));
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "let a = 1;\nlet b = 1;\nlet c = 2;\n"
    );

    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "lib.rs", "old_string": "let c = 2;", "new_string": "let c = 3;"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "Edited lib.rs: replaced 1 occurrence.\n--- a/lib.rs\n+++ b/lib.rs\n@@ -1,3 +1,3 @@\n let a = 1;\n let b = 1;\n-let c = 2;\n+let c = 3;\n"
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "let a = 1;\nlet b = 1;\nlet c = 3;\n"
    );

    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "lib.rs", "old_string": "= 1;", "new_string": "= 9;", "replace_all": true}),
    )
    .await;
    assert!(!out.is_error);
    assert!(
        out.content
            .starts_with("Edited lib.rs: replaced 2 occurrences.\n")
    );
    assert!(
        out.content
            .contains("-let a = 1;\n-let b = 1;\n+let a = 9;\n+let b = 9;\n"),
        "{}",
        out.content
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "let a = 9;\nlet b = 9;\nlet c = 3;\n"
    );
}

#[tokio::test]
async fn edit_explains_what_it_cannot_do() {
    let (dir, ctx) = setup();
    fs::write(dir.path().join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "crlf.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        fs::read(dir.path().join("crlf.txt")).unwrap(),
        b"1\r\n2\r\n"
    );

    fs::write(dir.path().join("bin"), b"a\0b").unwrap();
    fs::write(dir.path().join("latin1"), b"caf\xe9").unwrap();
    fs::write(dir.path().join("ws.txt"), "  indented\n").unwrap();
    let cases = [
        (
            json!({"path": "missing.rs", "old_string": "a", "new_string": "b"}),
            "file not found: missing.rs",
        ),
        (
            json!({"path": "bin", "old_string": "a", "new_string": "b"}),
            "binary file",
        ),
        (
            json!({"path": "latin1", "old_string": "caf", "new_string": "b"}),
            "not valid UTF-8",
        ),
        (
            json!({"path": "ws.txt", "old_string": "", "new_string": "b"}),
            "old_string is empty",
        ),
        (
            json!({"path": "ws.txt", "old_string": "x", "new_string": "x"}),
            "identical",
        ),
        (
            json!({"path": "ws.txt", "old_string": "indented  \n\n", "new_string": "b"}),
            "trimmed",
        ),
        (
            json!({"path": "ws.txt", "old_string": "x"}),
            "missing field `new_string`",
        ),
    ];
    for (input, needle) in cases {
        let out = call(&EditFileTool, &ctx, input).await;
        assert!(out.is_error);
        assert!(
            out.content.contains(needle),
            "{:?} lacks {needle}",
            out.content
        );
    }
}

#[tokio::test]
async fn special_files_are_refused_without_blocking() {
    let (dir, ctx) = setup();
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let out = call(&ReadFileTool, &ctx, json!({"path": "fifo"})).await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
    let out = call(
        &EditFileTool,
        &ctx,
        json!({"path": "fifo", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
    let out = call(&ReadFileTool, &ctx, json!({"path": "/dev/zero"})).await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
}
