//! Tools whose input is a Rust type: the schema the model is shown is derived
//! from that type, and the input is parsed in one place, so the two cannot
//! drift apart and every tool words a bad input the same way.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::{Tool, ToolContext, ToolOutput, parse_input};

/// A tool with a typed input. Every `TypedTool` is a [`Tool`]: its
/// `input_schema` is [`input_schema_for`] its `Input`, and its `run` parses
/// the model's JSON with [`parse_input`] before calling [`TypedTool::call`].
///
/// The name, description and read-only flag are constants so that they
/// cannot differ between calls and do not clash with [`Tool`]'s methods.
pub trait TypedTool: Send + Sync {
    /// What the model sends. Field doc comments become the property
    /// descriptions the model reads; `Option` fields are optional.
    type Input: DeserializeOwned + JsonSchema + Send;

    /// The unique name the model calls the tool by.
    const NAME: &'static str;

    /// What the tool does and when to use it, written for the model.
    const DESCRIPTION: &'static str;

    /// True when the tool never changes files or runs commands.
    const READ_ONLY: bool;

    /// Runs the tool on a well-formed input. Never panics and never
    /// returns an `Err`: every failure is a [`ToolOutput::error`].
    fn call<'a>(&'a self, input: Self::Input, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        T::DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        input_schema_for::<T::Input>()
    }

    fn is_read_only(&self) -> bool {
        T::READ_ONLY
    }

    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        match parse_input::<T::Input>(T::NAME, input) {
            Ok(input) => self.call(input, ctx),
            Err(refusal) => Box::pin(std::future::ready(refusal)),
        }
    }
}

/// The JSON Schema of `T` as a tool's `input_schema`: draft 7, subschemas
/// inlined (models handle `$ref` poorly), optional fields simply not
/// required (no `null` type), and without the `$schema`, `title` and
/// top-level `description` keys; a choice of constants is a plain `enum`,
/// doc comments are one line each and number `format`s (`uint64`, ...),
/// which some providers refuse, are left out, which only cost tokens: the tool's own
/// description says what the input is for.
pub fn input_schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    drop_null(&mut schema);
    enums_as_lists(&mut schema);
    plain_descriptions(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        for key in ["$schema", "title", "description"] {
            object.remove(key);
        }
    }
    schema
}

/// Removes `null` as an accepted value everywhere: an `Option` field is
/// optional by not being required, and a model told it may send `null`
/// sends it where a value was meant.
fn drop_null(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    object.insert("type".into(), only);
                }
            }
            for key in ["anyOf", "oneOf"] {
                let Some(Value::Array(options)) = object.get_mut(key) else {
                    continue;
                };
                options.retain(|o| o.get("type").is_none_or(|t| t != "null"));
                if let [only] = options.as_slice() {
                    let only = only.clone();
                    object.remove(key);
                    if let Value::Object(fields) = only {
                        object.extend(fields);
                    }
                }
            }
            object.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}

/// A `oneOf` of documented constants (what a unit-variant enum with doc
/// comments derives) as a plain `enum` list of the same type: the field's
/// own description says what the choices mean, and every model reads an
/// `enum`.
fn enums_as_lists(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            let constants: Option<Vec<Value>> = object
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|options| options.iter().map(|o| o.get("const").cloned()).collect());
            if let Some(constants) = constants {
                let kind = constants.iter().all(Value::is_string).then_some("string");
                object.remove("oneOf");
                if let Some(kind) = kind {
                    object.insert("type".into(), Value::from(kind));
                }
                object.insert("enum".into(), Value::Array(constants));
            }
            object.values_mut().for_each(enums_as_lists);
        }
        Value::Array(items) => items.iter_mut().for_each(enums_as_lists),
        _ => {}
    }
}

/// Doc comments wrap at 100 columns; the model gets each as one line. The
/// `format` of a number is Rust's width, not something the model can use.
fn plain_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::String(text)) = object.get_mut("description") {
                *text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            }
            if object
                .get("type")
                .is_some_and(|t| t == "integer" || t == "number")
            {
                object.remove("format");
            }
            object.values_mut().for_each(plain_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}
