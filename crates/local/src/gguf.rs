//! Typed access to GGUF metadata, so a missing or mistyped key is an error naming the key.

use crate::error::LocalError;
use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::HashMap;
use std::io::{BufReader, Read, Seek, SeekFrom};

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

    pub(crate) fn opt_floats(&self, key: &str) -> Result<Option<Vec<f32>>, LocalError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::F32(x) => Ok(*x),
                    Value::F64(x) => Ok(*x as f32),
                    _ => Err(bad(key, "array holds a non-float")),
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

/// Reads a GGUF file's header with the checks candle leaves out: candle
/// divides by `general.alignment` (0 panics) and multiplies tensor dimensions
/// unchecked, so both are looked at before and after its own parse.
pub(crate) fn read_content<R: Read + Seek>(reader: &mut BufReader<R>) -> Result<Content, String> {
    let start = reader.stream_position().map_err(|e| e.to_string())?;
    let alignment = declared_alignment(reader);
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|e| e.to_string())?;
    if alignment == Some(0) {
        return Err("general.alignment is 0".into());
    }
    let content = Content::read(reader).map_err(|e| e.to_string())?;
    for (name, info) in &content.tensor_infos {
        let elements = info
            .shape
            .dims()
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d));
        // As f32 the tensor takes 4 bytes an element; that must be addressable.
        if elements.and_then(|n| n.checked_mul(4)).is_none() {
            return Err(format!(
                "tensor {name} has impossible dimensions {:?}",
                info.shape.dims()
            ));
        }
    }
    Ok(content)
}

/// The integer value of `general.alignment`, found by walking the metadata
/// without keeping it; `None` when absent or when the walk meets anything
/// unexpected (candle's own parse then reports the file).
fn declared_alignment<R: Read + Seek>(r: &mut BufReader<R>) -> Option<u64> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).ok()?;
    if &magic != b"GGUF" {
        return None;
    }
    let version = read_u32(r)?;
    let wide = version >= 2;
    let length = |r: &mut BufReader<R>| {
        if wide {
            read_u64(r)
        } else {
            read_u32(r).map(u64::from)
        }
    };
    let _tensors = length(r)?;
    let entries = length(r)?;
    for _ in 0..entries {
        let key_len = length(r)?;
        let is_alignment = if key_len == 17 {
            let mut key = [0u8; 17];
            r.read_exact(&mut key).ok()?;
            &key == b"general.alignment"
        } else {
            skip(r, key_len)?;
            false
        };
        let ty = read_u32(r)?;
        if is_alignment {
            return match ty {
                0 | 1 => read_bytes::<1, _>(r).map(|b| u64::from(b[0])),
                2 | 3 => read_bytes::<2, _>(r).map(|b| u64::from(u16::from_le_bytes(b))),
                4 | 5 => read_u32(r).map(u64::from),
                10 | 11 => read_u64(r),
                _ => None,
            };
        }
        skip_value(r, ty, &length, 0)?;
    }
    None
}

fn skip_value<R: Read + Seek>(
    r: &mut BufReader<R>,
    ty: u32,
    length: &dyn Fn(&mut BufReader<R>) -> Option<u64>,
    depth: usize,
) -> Option<()> {
    match ty {
        0 | 1 | 7 => skip(r, 1),
        2 | 3 => skip(r, 2),
        4..=6 => skip(r, 4),
        10..=12 => skip(r, 8),
        8 => {
            let n = length(r)?;
            skip(r, n)
        }
        9 if depth < 4 => {
            let item = read_u32(r)?;
            let count = length(r)?;
            let fixed = match item {
                0 | 1 | 7 => Some(1),
                2 | 3 => Some(2),
                4..=6 => Some(4),
                10..=12 => Some(8),
                _ => None,
            };
            match fixed {
                Some(size) => skip(r, count.checked_mul(size)?),
                None => (0..count).try_for_each(|_| skip_value(r, item, length, depth + 1)),
            }
        }
        _ => None,
    }
}

/// Within the buffer when it can: the token list is ~100k short strings.
fn skip<R: Read + Seek>(r: &mut BufReader<R>, bytes: u64) -> Option<()> {
    r.seek_relative(i64::try_from(bytes).ok()?).ok()
}

fn read_bytes<const N: usize, R: Read>(r: &mut R) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b).ok()?;
    Some(b)
}

fn read_u32<R: Read>(r: &mut R) -> Option<u32> {
    read_bytes::<4, R>(r).map(u32::from_le_bytes)
}

fn read_u64<R: Read>(r: &mut R) -> Option<u64> {
    read_bytes::<8, R>(r).map(u64::from_le_bytes)
}
