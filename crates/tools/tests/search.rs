//! glob and grep over real folder trees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use crate::mkfifo;
use serde_json::{Value, json};
use whittle_tools::{CancellationToken, GlobTool, GrepTool, Tool, ToolContext, ToolOutput};

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A small project: sources, an ignored build folder, a hidden config, a
/// .git folder, a binary file.
fn project() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, ".gitignore", "target/\n*.log\n");
    put(
        r,
        "src/main.rs",
        "fn main() {\n    println!(\"Hello\");\n}\n",
    );
    put(r, "src/lib.rs", "pub fn hello() {}\n// TODO: more\n");
    put(r, "src/a/deep.rs", "// hello from deep\n");
    put(r, "src.rs", "// hello at the top\n");
    put(r, "target/debug/gen.rs", "fn hello() {}\n");
    put(r, "run.log", "hello log\n");
    put(r, ".config/settings.rs", "// hello hidden\n");
    put(r, ".git/HEAD.rs", "hello git\n");
    fs::write(r.join("blob.bin"), b"hello\0binary").unwrap();
    let ctx = ToolContext::new(r);
    (dir, ctx)
}

async fn call(tool: &dyn Tool, ctx: &ToolContext, input: Value) -> ToolOutput {
    tool.run(input, ctx).await
}

#[tokio::test]
async fn glob_respects_gitignore_and_sorts() {
    let (_dir, ctx) = project();
    let out = call(&GlobTool::default(), &ctx, json!({"pattern": "*.rs"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        ".config/settings.rs\nsrc/a/deep.rs\nsrc/lib.rs\nsrc/main.rs\nsrc.rs"
    );
    let out = call(&GlobTool::default(), &ctx, json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out.content, "src/lib.rs\nsrc/main.rs");
    let out = call(
        &GlobTool::default(),
        &ctx,
        json!({"pattern": "src/**/*.rs"}),
    )
    .await;
    assert_eq!(out.content, "src/a/deep.rs\nsrc/lib.rs\nsrc/main.rs");
    let out = call(
        &GlobTool::default(),
        &ctx,
        json!({"pattern": "*.rs", "path": "src/a"}),
    )
    .await;
    assert_eq!(out.content, "src/a/deep.rs");
    let out = call(&GlobTool::default(), &ctx, json!({"pattern": "*.py"})).await;
    assert_eq!(out.content, "No files match \"*.py\" in .");
}

#[tokio::test]
async fn glob_caps_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..25 {
        put(dir.path(), &format!("f{i:02}.txt"), "");
    }
    let ctx = ToolContext::new(dir.path());
    let out = call(
        &GlobTool::default().with_max_results(10),
        &ctx,
        json!({"pattern": "*.txt"}),
    )
    .await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines.len(), 11);
    assert_eq!(lines[0], "f00.txt");
    assert_eq!(lines[9], "f09.txt");
    assert_eq!(
        lines[10],
        "[15 more files not shown (25 matched); narrow the pattern or path]"
    );
}

#[tokio::test]
async fn grep_lists_files_and_lines() {
    let (_dir, ctx) = project();
    let out = call(&GrepTool::default(), &ctx, json!({"pattern": "hello"})).await;
    assert_eq!(
        out.content,
        ".config/settings.rs\nsrc/a/deep.rs\nsrc/lib.rs\nsrc.rs"
    );

    let out = call(
        &GrepTool::default(),
        &ctx,
        json!({"pattern": "hello", "case_insensitive": true}),
    )
    .await;
    assert_eq!(
        out.content,
        ".config/settings.rs\nsrc/a/deep.rs\nsrc/lib.rs\nsrc/main.rs\nsrc.rs"
    );

    let out = call(
        &GrepTool::default(),
        &ctx,
        json!({"pattern": "hello|TODO", "case_insensitive": true, "output_mode": "content", "glob": "src/*.rs"}),
    )
    .await;
    assert_eq!(
        out.content,
        "src/lib.rs:1:pub fn hello() {}\nsrc/lib.rs:2:// TODO: more\nsrc/main.rs:2:    println!(\"Hello\");"
    );

    let out = call(
        &GrepTool::default(),
        &ctx,
        json!({"pattern": "hello", "path": "src/lib.rs", "output_mode": "content"}),
    )
    .await;
    assert_eq!(out.content, "src/lib.rs:1:pub fn hello() {}");

    let out = call(&GrepTool::default(), &ctx, json!({"pattern": "zzz"})).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "No matches for \"zzz\" in .");
}

#[tokio::test]
async fn grep_caps_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        let text: String = (0..5).map(|j| format!("match {i}.{j}\n")).collect();
        put(dir.path(), &format!("f{i}.txt"), &text);
    }
    let ctx = ToolContext::new(dir.path());
    let grep = GrepTool::default().with_max_results(3);
    let out = call(
        &grep,
        &ctx,
        json!({"pattern": "match", "output_mode": "content"}),
    )
    .await;
    assert_eq!(
        out.content,
        "f0.txt:1:match 0.0\nf0.txt:2:match 0.1\nf0.txt:3:match 0.2\n[17 more matching lines not shown (20 lines in 4 files matched); narrow the pattern, path or glob]"
    );
    let out = call(&grep, &ctx, json!({"pattern": "match"})).await;
    assert_eq!(
        out.content,
        "f0.txt\nf1.txt\nf2.txt\n[1 more files not shown (4 matched); narrow the pattern, path or glob]"
    );
}

#[tokio::test]
async fn bad_search_inputs_are_errors() {
    let (_dir, ctx) = project();
    let cases: [(&dyn Tool, Value, &str); 5] = [
        (
            &GrepTool::default(),
            json!({"pattern": "("}),
            "invalid regex",
        ),
        (
            &GrepTool::default(),
            json!({"pattern": "x", "glob": "[z"}),
            "invalid glob",
        ),
        (
            &GrepTool::default(),
            json!({"pattern": "x", "output_mode": "lines"}),
            "unknown variant",
        ),
        (
            &GlobTool::default(),
            json!({"pattern": "*", "path": "nope"}),
            "path not found: nope",
        ),
        (&GlobTool::default(), json!({"pattern": ""}), "empty"),
    ];
    for (tool, input, needle) in cases {
        let out = call(tool, &ctx, input).await;
        assert!(out.is_error, "{}", out.content);
        assert!(
            out.content.contains(needle),
            "{:?} lacks {needle}",
            out.content
        );
    }
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let ctx = ctx.with_cancel(cancelled);
    let out = call(&GlobTool::default(), &ctx, json!({"pattern": "*"})).await;
    assert!(
        out.content
            .contains("[cancelled before the search finished]")
    );
}

/// Runs a search on a thread of its own and gives up after a while, so a
/// search that hangs (as one meeting a FIFO did) fails its test instead of
/// stopping the suite.
fn bounded<T: Tool + 'static>(tool: T, ctx: &ToolContext, input: Value) -> ToolOutput {
    let ctx = ctx.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = tx.send(rt.block_on(tool.run(input, &ctx)));
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("the search did not finish within 20 s")
}

#[test]
fn ignore_files_are_read_only_when_small_regular_files() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "rules", "*.rs\n");
    put(outside.path(), "git/info/exclude", "*.rs\n");
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, ".gitignore", "*.log\n");
    put(r, ".git/info/exclude", "*.tmp\n");
    for sub in ["big", "fifo", "gitlink", "kept", "link", "zero"] {
        put(r, &format!("{sub}/{sub}.rs"), "hello\n");
        put(r, &format!("{sub}/{sub}.log"), "hello\n");
        put(r, &format!("{sub}/{sub}.tmp"), "hello\n");
    }
    mkfifo(&r.join("fifo/.gitignore"));
    std::os::unix::fs::symlink("/dev/zero", r.join("zero/.gitignore")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("rules"), r.join("link/.ignore")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("git"), r.join("gitlink/.git")).unwrap();
    put(
        r,
        "big/.gitignore",
        &format!("*.rs\n{}\n", "#".repeat(2 << 20)),
    );
    put(r, "kept/.gitignore", "*.rs\n");
    let ctx = ToolContext::new(r);
    let notes = "\n[big/.gitignore not read (larger than 1 MiB): its ignore rules were not applied]\
                 \n[fifo/.gitignore not read (not a regular file): its ignore rules were not applied]\
                 \n[gitlink/.git not read (a link): its ignore rules were not applied]\
                 \n[link/.ignore not read (a link): its ignore rules were not applied]\
                 \n[zero/.gitignore not read (a link): its ignore rules were not applied]";

    let out = bounded(GlobTool::default(), &ctx, json!({"pattern": "*"}));
    assert_eq!(
        out.content,
        format!(
            ".gitignore\nbig/.gitignore\nbig/big.rs\nfifo/fifo.rs\ngitlink/.git\ngitlink/gitlink.rs\n\
             kept/.gitignore\nlink/.ignore\n\
             link/link.rs\nzero/.gitignore\nzero/zero.rs{notes}"
        )
    );
    let out = bounded(GrepTool::default(), &ctx, json!({"pattern": "hello"}));
    assert_eq!(
        out.content,
        format!("big/big.rs\nfifo/fifo.rs\ngitlink/gitlink.rs\nlink/link.rs\nzero/zero.rs{notes}")
    );
    // Searching below a folder reads the rules above it the same way.
    let out = bounded(
        GrepTool::default(),
        &ctx,
        json!({"pattern": "hello", "path": "fifo"}),
    );
    assert_eq!(
        out.content,
        "fifo/fifo.rs\n[fifo/.gitignore not read (not a regular file): its ignore rules were not applied]"
    );
}

/// Compiled ignore rules take far more memory than their text, and a
/// command can hard-link one file into a thousand nested folders: one walk
/// compiles at most 2 MiB of rules, and says where it stopped.
#[test]
fn one_walk_compiles_a_bounded_amount_of_ignore_rules() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // 300 KB of comments and one rule for the folder's own log.
    let padding = "#".repeat(300_000);
    let mut at = r.to_path_buf();
    for depth in 0..12 {
        put(&at, ".gitignore", &format!("/f{depth}.log\n{padding}\n"));
        put(&at, &format!("f{depth}.log"), "hello\n");
        at = at.join("d");
    }
    let ctx = ToolContext::new(r);
    let out = bounded(GrepTool::default(), &ctx, json!({"pattern": "hello"}));
    // Six files fit in 2 MiB; the seventh and deeper are named, and their
    // folders' logs are searched.
    assert!(
        out.content.contains(
            "d/d/d/d/d/d/.gitignore not read (past the 2 MiB of ignore rules one search compiles)"
        ),
        "{}",
        out.content
    );
    assert!(out.content.contains("f6.log"), "{}", out.content);
    assert!(!out.content.contains("f5.log"), "{}", out.content);
    assert!(!out.content.contains("f0.log"), "{}", out.content);
}

#[test]
fn ignore_rules_keep_their_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, ".gitignore", "*.log\n!keep.log\nbuild/\n/top.txt\n");
    put(r, ".ignore", "secret.txt\n");
    put(r, ".git/info/exclude", "*.tmp\n");
    put(r, "sub/.gitignore", "!also.log\n!secret.txt\n!x.tmp\n");
    for file in [
        "a.log",
        "keep.log",
        "top.txt",
        "a.tmp",
        "build/b.rs",
        "sub/also.log",
        "sub/y.log",
        "sub/secret.txt",
        "sub/x.tmp",
        "sub/top.txt",
        "sub/build/c.rs",
        "ok.rs",
    ] {
        put(r, file, "");
    }
    let ctx = ToolContext::new(r);
    let out = bounded(GlobTool::default(), &ctx, json!({"pattern": "*.*"}));
    assert_eq!(
        out.content,
        ".gitignore\n.ignore\nkeep.log\nok.rs\nsub/.gitignore\nsub/also.log\nsub/top.txt\nsub/x.tmp"
    );
    let out = bounded(
        GlobTool::default(),
        &ctx,
        json!({"pattern": "*.*", "path": "sub"}),
    );
    assert_eq!(
        out.content,
        "sub/.gitignore\nsub/also.log\nsub/top.txt\nsub/x.tmp"
    );
}

#[test]
fn grep_searches_regular_files_only() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "secret.txt", "needle from outside\n");
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, "a.txt", "needle\n");
    mkfifo(&r.join("pipe.txt"));
    std::os::unix::fs::symlink("/dev/zero", r.join("zero.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), r.join("leak.txt")).unwrap();
    let ctx = ToolContext::new(r);
    let out = bounded(
        GrepTool::default(),
        &ctx,
        json!({"pattern": "needle", "output_mode": "content"}),
    );
    assert_eq!(out.content, "a.txt:1:needle");
    for path in ["pipe.txt", "zero.txt"] {
        let out = bounded(
            GrepTool::default(),
            &ctx,
            json!({"pattern": "needle", "path": path}),
        );
        assert!(out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            format!(
                "{path} is not a regular file or folder (a FIFO, device or socket); grep searches those only"
            )
        );
    }
}

#[test]
fn grep_bounds_a_line_that_never_ends() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, "long.txt", &"a".repeat(40 << 20));
    put(r, "short.txt", "a\n");
    let ctx = ToolContext::new(r);
    let out = bounded(GrepTool::default(), &ctx, json!({"pattern": "a"}));
    assert_eq!(
        out.content,
        "short.txt\n[long.txt not searched: it has a line longer than 32 MiB, or could not be read]"
    );
}
