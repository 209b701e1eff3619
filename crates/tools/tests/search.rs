//! glob and grep over real folder trees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

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
