//! todo_write state and skills discovery.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use crate::mkfifo;
use serde_json::json;
use whittle_tools::skills::{SkillError, parse_skill};
use whittle_tools::{
    LoadSkillTool, Skills, TodoItem, TodoStatus, TodoStore, TodoWriteTool, Tool, ToolContext,
};

#[tokio::test]
async fn todo_write_stores_a_list_the_cli_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = TodoStore::default();
    let mut seen = store.subscribe();
    let ctx = ToolContext::new(dir.path()).with_todos(store.clone());
    let out = TodoWriteTool
        .run(
            json!({"todos": [
                {"content": "Read the code", "status": "completed"},
                {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
                {"content": "Run the tests", "status": "pending"}
            ]}),
            &ctx,
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "Todo list updated (1/3 completed):\n[x] Read the code\n[>] Fix the bug\n[ ] Run the tests"
    );
    assert!(seen.has_changed().unwrap());
    let list = store.snapshot();
    assert_eq!(list.len(), 3);
    assert_eq!(list[1].status, TodoStatus::InProgress);
    assert_eq!(list[1].active_form.as_deref(), Some("Fixing the bug"));
    assert_eq!(*seen.borrow_and_update(), list);
}

#[tokio::test]
async fn todo_write_validates_and_keeps_the_old_list() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    ctx.todos()
        .replace(vec![TodoItem {
            content: "keep me".into(),
            status: TodoStatus::Pending,
            active_form: None,
        }])
        .unwrap();
    let cases = [
        (
            json!({"todos": [
                {"content": "a", "status": "in_progress"},
                {"content": "b", "status": "pending"},
                {"content": "c", "status": "in_progress"}
            ]}),
            "todo list not saved: 2 items are in_progress (items 1, 3); at most one task may be in progress at a time",
        ),
        (
            json!({"todos": [{"content": "  ", "status": "pending"}]}),
            "item 1 has empty content",
        ),
        (
            json!({"todos": [{"content": "a", "status": "done"}]}),
            "unknown variant `done`",
        ),
        (json!({"todos": "a"}), "invalid input for todo_write"),
        (
            json!({"todos": (0..101).map(|i| json!({"content": i.to_string(), "status": "pending"})).collect::<Vec<_>>()}),
            "too many",
        ),
    ];
    for (input, needle) in cases {
        let out = TodoWriteTool.run(input, &ctx).await;
        assert!(out.is_error);
        assert!(
            out.content.contains(needle),
            "{:?} lacks {needle}",
            out.content
        );
    }
    assert_eq!(ctx.todos().snapshot()[0].content, "keep me");
    // An empty list is allowed: it clears the plan.
    let out = TodoWriteTool.run(json!({"todos": []}), &ctx).await;
    assert!(!out.is_error);
    assert!(ctx.todos().snapshot().is_empty());
}

#[test]
fn front_matter_variants_parse() {
    let s = parse_skill("---\nname: release\ndescription: Cut a release.\n---\nStep 1\n").unwrap();
    assert_eq!(
        (s.name.as_str(), s.description.as_str(), s.body.as_str()),
        ("release", "Cut a release.", "Step 1\n")
    );

    let s = parse_skill(
        "\u{feff}---\r\n# comment\r\nname: \"db-migrate\"\r\ndescription: 'It''s: tricky # not a comment'\r\nmetadata:\r\n  owner: x\r\n  tags: [a, b]\r\n---\r\n\r\nBody\r\n",
    )
    .unwrap();
    assert_eq!(s.name, "db-migrate");
    assert_eq!(s.description, "It's: tricky # not a comment");
    assert_eq!(s.body, "Body\r\n");

    let s = parse_skill("---\nname: fold # trailing comment\ndescription: >\n  one\n  two\n\n  three\nlicense: MIT\n---\n").unwrap();
    assert_eq!(s.name, "fold");
    assert_eq!(s.description, "one two\nthree");
    assert_eq!(s.body, "");

    let s =
        parse_skill("---\nname: lit\ndescription: |\n  line a\n    indented b\n---\nx").unwrap();
    assert_eq!(s.description, "line a\n  indented b");

    let s = parse_skill("---\nname: plain\ndescription: a long\n  wrapped value\n---\nx").unwrap();
    assert_eq!(s.description, "a long wrapped value");
}

#[test]
fn malformed_front_matter_is_a_clear_error() {
    let cases: [(&str, SkillError); 8] = [
        ("no front matter\n", SkillError::NoFrontMatter),
        ("", SkillError::NoFrontMatter),
        ("---\nname: x\ndescription: y\n", SkillError::Unterminated),
        ("---\ndescription: y\n---\n", SkillError::Missing("name")),
        (
            "---\nname: x\ndescription:\n---\n",
            SkillError::Missing("description"),
        ),
        (
            "---\nname: two words\ndescription: y\n---\n",
            SkillError::BadName("two words".into()),
        ),
        (
            "---\nname: x\njust some text\n---\n",
            SkillError::Syntax {
                line: 3,
                message: "expected `key: value`, found \"just some text\"".into(),
            },
        ),
        (
            "---\nname: \"x\ndescription: y\n---\n",
            SkillError::Syntax {
                line: 2,
                message: "unterminated quoted string".into(),
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_skill(text), Err(want.clone()), "{text:?}");
        // The message is one line.
        assert!(!want.to_string().contains('\n'));
    }
}

/// Each problem as `folder: message`.
fn problems(skills: &Skills) -> Vec<String> {
    skills
        .problems
        .iter()
        .map(|p| {
            let folder = p.path.parent().unwrap().file_name().unwrap();
            format!("{}: {}", folder.to_str().unwrap(), p.message)
        })
        .collect()
}

#[tokio::test]
async fn skills_are_discovered_listed_and_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let skills_dir = dir.path().join(".whittle/skills");
    let files: [(&str, &[u8]); 4] = [
        ("release", b"---\nname: release\ndescription: How to cut a release.\n---\n# Release\n1. Bump the version.\n"),
        ("broken", b"name: broken\n"),
        ("binary", b"---\nname: bin\xff\n"),
        ("dup", b"---\nname: release\ndescription: again\n---\n"),
    ];
    for (folder, text) in files {
        fs::create_dir_all(skills_dir.join(folder)).unwrap();
        fs::write(skills_dir.join(folder).join("SKILL.md"), text).unwrap();
    }
    fs::create_dir_all(skills_dir.join("empty-folder")).unwrap();
    fs::write(skills_dir.join("stray.md"), "not a skill folder").unwrap();

    let skills = Skills::discover(dir.path());
    let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["release"]);
    let problems = problems(&skills);
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(problems[0].starts_with("binary: "));
    assert!(problems[1].starts_with("broken: no front matter"));
    assert_eq!(problems[2], "dup: a skill named \"release\" already exists");
    assert_eq!(problems[3], "empty-folder: the folder has no SKILL.md");
    assert_eq!(
        skills.prompt_listing(),
        "Skills (call load_skill with the name to read one when the task matches its description):\n- release: How to cut a release.\n"
    );

    let ctx = ToolContext::new(dir.path());
    let out = LoadSkillTool.run(json!({"name": "release"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "<skill name=\"release\" folder=\".whittle/skills/release\">\n# Release\n1. Bump the version.\n</skill>"
    );
    let out = LoadSkillTool.run(json!({"name": "nope"}), &ctx).await;
    assert_eq!(out.content, "no skill named \"nope\"; available: release");
    let out = LoadSkillTool.run(json!({"name": "broken"}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("skill \"broken\" cannot be loaded: no front matter"),
        "{}",
        out.content
    );

    let empty = tempfile::tempdir().unwrap();
    assert_eq!(Skills::discover(empty.path()), Skills::default());
    assert_eq!(Skills::default().prompt_listing(), "");
    let out = LoadSkillTool
        .run(json!({"name": "x"}), &ToolContext::new(empty.path()))
        .await;
    assert_eq!(
        out.content,
        "no skill named \"x\": this workspace has no skills"
    );
}

/// Puts a link at `at` to `target`, as a repository may ship one.
fn link(target: impl AsRef<std::path::Path>, at: impl AsRef<std::path::Path>) {
    std::os::unix::fs::symlink(target, at).unwrap();
}

#[tokio::test]
async fn skills_are_never_read_through_a_link_out_of_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    let secret = "---\nname: secret\ndescription: from outside\n---\nTOP SECRET\n";
    fs::create_dir_all(outside.path().join("skills/x")).unwrap();
    fs::write(outside.path().join("SKILL.md"), secret).unwrap();
    fs::write(outside.path().join("skills/x/SKILL.md"), secret).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let skills_dir = ws.join(".whittle/skills");
    for folder in ["a", "b", "docs", "fifo", "zero"] {
        fs::create_dir_all(skills_dir.join(folder)).unwrap();
    }
    fs::write(
        skills_dir.join("a/SKILL.md"),
        "---\nname: a\ndescription: plain\n---\nA\n",
    )
    .unwrap();
    // A link that stays inside the workspace is read.
    fs::create_dir_all(ws.join("docs")).unwrap();
    fs::write(
        ws.join("docs/skill.md"),
        "---\nname: docs\ndescription: linked\n---\nD\n",
    )
    .unwrap();
    link("../../../docs/skill.md", skills_dir.join("docs/SKILL.md"));
    link(
        outside.path().join("SKILL.md"),
        skills_dir.join("b/SKILL.md"),
    );
    // A skill folder that is a link out of the workspace.
    link(outside.path().join("skills/x"), skills_dir.join("c"));
    link("/dev/zero", skills_dir.join("zero/SKILL.md"));
    mkfifo(&skills_dir.join("fifo/SKILL.md"));

    let skills = Skills::discover(ws);
    let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "docs"]);
    let problems = problems(&skills);
    assert_eq!(
        problems,
        [
            "b: SKILL.md leads outside the workspace: not read",
            "c: SKILL.md leads outside the workspace: not read",
            "fifo: SKILL.md is not a regular file",
            "zero: SKILL.md leads outside the workspace: not read",
        ]
    );
    let ctx = ToolContext::new(ws);
    for name in ["b", "c", "secret"] {
        let out = LoadSkillTool.run(json!({"name": name}), &ctx).await;
        assert!(out.is_error, "{}", out.content);
        assert!(!out.content.contains("TOP SECRET"), "{}", out.content);
    }
    let out = LoadSkillTool.run(json!({"name": "docs"}), &ctx).await;
    assert!(out.content.contains("\nD\n"), "{}", out.content);

    // The skills folder itself may not lead outside either.
    let other = tempfile::tempdir().unwrap();
    link(outside.path(), other.path().join(".whittle"));
    let skills = Skills::discover(other.path());
    assert!(skills.skills.is_empty(), "{skills:?}");
    assert_eq!(skills.problems.len(), 1, "{skills:?}");
    assert!(skills.problems[0].message.contains("outside the workspace"));
}
