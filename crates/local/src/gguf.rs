//! Typed access to GGUF metadata, so a missing or mistyped key is an error naming the key.

use crate::error::LocalError;
use candle_core::quantized::gguf_file::Value;
use std::collections::HashMap;

/// The metadata table of a GGUF file.
pub(crate) struct Metadata<'a>(pub(crate) &'a HashMap<String, Value>);

fn bad(key: &str, message: impl Into<String>) -> LocalError {
    LocalError::Metadata {
        key: key.to_string(),
        message: message.into(),
    }
}

/// Any integer metadata value as u64 (files disagree on widths), `None` if not an integer.
fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(u64::from(*x)),
        Value::U16(x) => Some(u64::from(*x)),
        Value::U32(x) => Some(u64::from(*x)),
        Value::U64(x) => Some(*x),
        Value::I8(x) => u64::try_from(*x).ok(),
        Value::I16(x) => u64::try_from(*x).ok(),
        Value::I32(x) => u64::try_from(*x).ok(),
        Value::I64(x) => u64::try_from(*x).ok(),
        _ => None,
    }
}

impl Metadata<'_> {
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub(crate) fn string(&self, key: &str) -> Result<&str, LocalError> {
        self.opt_string(key)?.ok_or_else(|| bad(key, "missing"))
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&str>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(bad(key, "not a string")),
        }
    }

    pub(crate) fn usize(&self, key: &str) -> Result<usize, LocalError> {
        self.opt_usize(key)?.ok_or_else(|| bad(key, "missing"))
    }

    pub(crate) fn opt_usize(&self, key: &str) -> Result<Option<usize>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_u64(v)
                .and_then(|x| usize::try_from(x).ok())
                .map(Some)
                .ok_or_else(|| bad(key, "not a non-negative integer")),
        }
    }

    pub(crate) fn opt_f32(&self, key: &str) -> Result<Option<f32>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => as_u64(v)
                .map(|x| Some(x as f32))
                .ok_or_else(|| bad(key, "not a number")),
        }
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(bad(key, "not a boolean")),
        }
    }

    pub(crate) fn opt_strings(&self, key: &str) -> Result<Option<Vec<&str>>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.as_str()),
                    _ => Err(bad(key, "array holds a non-string")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(bad(key, "not an array")),
        }
    }

    pub(crate) fn opt_ints(&self, key: &str) -> Result<Option<Vec<i64>>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::I32(x) => Ok(i64::from(*x)),
                    Value::I64(x) => Ok(*x),
                    other => as_u64(other)
                        .and_then(|x| i64::try_from(x).ok())
                        .ok_or_else(|| bad(key, "array holds a non-integer")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(bad(key, "not an array")),
        }
    }
}
