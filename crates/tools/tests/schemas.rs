//! Every tool's schema agrees with the type its input is parsed into: an
//! input built from the schema alone is accepted, leaving out any property
//! the schema requires is refused naming it, and a property the schema does
//! not have is refused. The schema is derived from the type, so this guards
//! the derivation (attributes, renames, defaults) rather than a hand copy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Map, Value, json};
use whittle_tools::{ToolContext, ToolRegistry};

/// A value the schema accepts: the smallest that satisfies its type and bounds.
fn sample(schema: &Value) -> Value {
    if let Some(first) = schema["oneOf"].as_array().and_then(|v| v.first()) {
        return sample(first);
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|v| v.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("x"),
        Some("integer") => json!(schema["minimum"].as_u64().unwrap_or(1)),
        Some("number") => json!(1),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("object") => {
            let props = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let mut out = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                out.insert(name.to_owned(), sample(&props[name]));
            }
            Value::Object(out)
        }
        other => panic!("no sample for a schema of type {other:?}: {schema}"),
    }
}

async fn refusal(tool: &str, input: Value, ctx: &ToolContext) -> Option<String> {
    let out = ToolRegistry::builtin().run(tool, input, ctx).await;
    let prefix = format!("invalid input for {tool}:");
    (out.is_error && out.content.starts_with(&prefix)).then_some(out.content)
}

#[tokio::test]
async fn every_schema_agrees_with_its_input_type() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    for spec in ToolRegistry::builtin().specs() {
        let schema = &spec.input_schema;
        let props = schema["properties"].as_object().unwrap();
        for (name, prop) in props {
            assert!(
                prop["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{}.{name}: the model is not told what it is (a doc comment on the field)",
                spec.name
            );
        }
        let minimal = sample(schema);
        assert_eq!(
            refusal(&spec.name, minimal.clone(), &ctx).await,
            None,
            "{}: an input the schema accepts is refused: {minimal}",
            spec.name
        );
        for required in schema["required"].as_array().into_iter().flatten() {
            let mut missing = minimal.clone();
            missing
                .as_object_mut()
                .unwrap()
                .remove(required.as_str().unwrap());
            let refused = refusal(&spec.name, missing, &ctx).await;
            assert!(
                refused
                    .as_deref()
                    .is_some_and(|r| r.contains(required.as_str().unwrap())),
                "{}: leaving out required {required} gave {refused:?}",
                spec.name
            );
        }
        let mut extra = minimal.clone();
        extra
            .as_object_mut()
            .unwrap()
            .insert("no_such_field".into(), json!(1));
        let refused = refusal(&spec.name, extra, &ctx).await;
        assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
        assert!(
            refused.is_some_and(|r| r.contains("no_such_field")),
            "{}: a property outside the schema was taken",
            spec.name
        );
    }
}

#[test]
fn schemas_are_inlined_and_carry_no_generator_keys() {
    for spec in ToolRegistry::builtin().specs() {
        let text = spec.input_schema.to_string();
        for key in [
            "$ref",
            "$defs",
            "definitions",
            "$schema",
            "\"title\"",
            "null",
        ] {
            assert!(!text.contains(key), "{}: {key} in {text}", spec.name);
        }
    }
}
