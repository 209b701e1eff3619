//! The registry: specs for the model, the read-only subset, dispatch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use whittle_tools::{CancellationToken, Tool, ToolContext, ToolOutput, ToolRegistry};

#[test]
fn specs_are_sorted_json_schema_objects() {
    let registry = ToolRegistry::builtin();
    let specs = registry.specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bash",
            "edit_file",
            "glob",
            "grep",
            "load_skill",
            "read_file",
            "recall",
            "todo_write",
            "write_file"
        ]
    );
    for spec in &specs {
        let schema = &spec.input_schema;
        assert_eq!(schema["type"], "object", "{}", spec.name);
        assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
        let props = schema["properties"].as_object().unwrap();
        for required in schema["required"].as_array().unwrap() {
            assert!(
                props.contains_key(required.as_str().unwrap()),
                "{}: {required}",
                spec.name
            );
        }
        for (key, prop) in props {
            assert!(
                prop.get("type").is_some(),
                "{}.{key} has no type",
                spec.name
            );
        }
        assert!(
            spec.description.len() > 40,
            "{} needs a real description",
            spec.name
        );
        let wire = serde_json::to_value(spec).unwrap();
        assert_eq!(
            wire.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["name", "description", "input_schema"]
        );
    }
}

#[test]
fn the_read_only_subset_holds_only_readers() {
    let registry = ToolRegistry::builtin();
    let ro = registry.read_only();
    assert_eq!(
        ro.names().collect::<Vec<_>>(),
        ["glob", "grep", "load_skill", "read_file", "recall"]
    );
    assert!(ro.get("bash").is_none());
    assert_eq!(registry.len(), 9);
}

struct Panicky;

impl Tool for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn description(&self) -> &str {
        "panics"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { panic!("boom") })
    }
}

#[tokio::test]
async fn dispatch_reports_unknown_cancelled_and_panicking_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::builtin();
    assert!(registry.register(Arc::new(Panicky)).is_none());
    let ctx = ToolContext::new(dir.path());

    let out = registry.run("nope", json!({}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("unknown tool \"nope\"; available tools: bash, edit_file")
    );

    let out = registry.run("panicky", json!({}), &ctx).await;
    assert_eq!(
        out,
        ToolOutput::error("panicky: the tool failed unexpectedly (internal error)")
    );

    std::fs::write(dir.path().join("a.txt"), "hi\n").unwrap();
    let out = registry
        .run("read_file", json!({"path": "a.txt"}), &ctx)
        .await;
    assert_eq!(out, ToolOutput::ok("     1\thi\n"));

    let token = CancellationToken::new();
    token.cancel();
    let cancelled = ctx.clone().with_cancel(token);
    let out = registry
        .run("read_file", json!({"path": "a.txt"}), &cancelled)
        .await;
    assert_eq!(
        out,
        ToolOutput::error("read_file: cancelled before it started")
    );
}

/// A read-only tool with any name, for deferred-tool tests.
struct Named(&'static str);

impl Tool for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "a named tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok(self.0) })
    }
}

#[tokio::test]
async fn deferred_tools_are_callable_and_listed_once_loaded_in_load_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Named("zeta")));
    registry.register_deferred(Arc::new(Named("mcp__b")));
    registry.register_deferred(Arc::new(Named("mcp__a")));
    let names =
        |r: &ToolRegistry| -> Vec<String> { r.specs().into_iter().map(|s| s.name).collect() };
    assert_eq!(names(&registry), ["zeta"]);
    assert!(registry.is_deferred("mcp__a") && !registry.is_deferred("zeta"));
    // Callable before it is loaded.
    let out = registry
        .run("mcp__a", json!({}), &ToolContext::new(dir.path()))
        .await;
    assert_eq!(out, ToolOutput::ok("mcp__a"));

    let loaded = registry.loaded_tools();
    assert!(loaded.load("mcp__b"));
    assert!(!loaded.load("mcp__b"), "loading twice changes nothing");
    assert!(loaded.load("mcp__a"));
    assert!(loaded.load("not_a_tool_here"));
    assert_eq!(names(&registry), ["zeta", "mcp__b", "mcp__a"]);
    // The read-only subset and clones share what was loaded.
    let ro = registry.read_only();
    assert_eq!(names(&ro), ["zeta", "mcp__b", "mcp__a"]);
    // Registering a deferred name normally makes it an ordinary tool.
    registry.register(Arc::new(Named("mcp__a")));
    assert_eq!(names(&registry), ["mcp__a", "zeta", "mcp__b"]);
    registry.remove("mcp__b");
    assert_eq!(names(&registry), ["mcp__a", "zeta"]);
}
