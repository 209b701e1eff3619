//! The GGUF file format: its header read into [`Content`] (metadata, tensor infos, where
//! the tensor data starts), and typed access to the metadata, so a missing or mistyped key
//! is an error naming the key.
//!
//! Read per the GGUF spec (versions 1 to 3, little-endian): magic, version, tensor and
//! metadata counts, the metadata key/values, the tensor infos, then the data at the next
//! multiple of `general.alignment` (32 unless set). Every count and length comes from the
//! file, so none is trusted: nothing is allocated beyond what the rest of the file could
//! hold, and a malformed file is a one-line error, never a panic.

use crate::error::LocalError;
use crate::quant::Kind;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

/// One metadata value, of any of the GGUF value types.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

/// The GGML tensor types this crate reads (the file may name others; those fail on use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TensorType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
}

impl TensorType {
    /// The kernel that reads this type's blocks in place; `None` for types
    /// converted at load.
    pub(crate) fn kernel_kind(self) -> Option<Kind> {
        match self {
            TensorType::Q4_0 => Some(Kind::Q4_0),
            TensorType::Q4_1 => Some(Kind::Q4_1),
            TensorType::Q8_0 => Some(Kind::Q8_0),
            TensorType::Q4K => Some(Kind::Q4K),
            TensorType::Q6K => Some(Kind::Q6K),
            _ => None,
        }
    }
}

impl TensorType {
    fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => TensorType::F32,
            1 => TensorType::F16,
            2 => TensorType::Q4_0,
            3 => TensorType::Q4_1,
            6 => TensorType::Q5_0,
            7 => TensorType::Q5_1,
            8 => TensorType::Q8_0,
            9 => TensorType::Q8_1,
            10 => TensorType::Q2K,
            11 => TensorType::Q3K,
            12 => TensorType::Q4K,
            13 => TensorType::Q5K,
            14 => TensorType::Q6K,
            15 => TensorType::Q8K,
            30 => TensorType::BF16,
            _ => return None,
        })
    }

    /// Values per block.
    pub(crate) fn block_values(self) -> usize {
        match self {
            TensorType::F32 | TensorType::F16 | TensorType::BF16 => 1,
            TensorType::Q4_0
            | TensorType::Q4_1
            | TensorType::Q5_0
            | TensorType::Q5_1
            | TensorType::Q8_0
            | TensorType::Q8_1 => 32,
            _ => 256,
        }
    }

    /// Bytes per block (the GGML block layouts).
    pub(crate) fn block_bytes(self) -> usize {
        match self {
            TensorType::F32 => 4,
            TensorType::F16 | TensorType::BF16 => 2,
            TensorType::Q4_0 => 18,
            TensorType::Q4_1 => 20,
            TensorType::Q5_0 => 22,
            TensorType::Q5_1 => 24,
            TensorType::Q8_0 => 34,
            TensorType::Q8_1 => 36,
            TensorType::Q2K => 84,
            TensorType::Q3K => 110,
            TensorType::Q4K => 144,
            TensorType::Q5K => 176,
            TensorType::Q6K => 210,
            TensorType::Q8K => 292,
        }
    }
}

/// Where one tensor is and what it holds.
#[derive(Clone, Debug)]
pub(crate) struct TensorInfo {
    /// Dimensions outermost first (row-major: `[rows, cols]`), the reverse of the file's order.
    pub(crate) dims: Vec<usize>,
    pub(crate) ty: TensorType,
    /// Offset of its data from [`Content::tensor_data_offset`].
    pub(crate) offset: u64,
    /// Bytes of its data (whole blocks; checked against the file's length).
    pub(crate) bytes: usize,
}

/// A GGUF file's header: everything but the tensor data.
#[derive(Debug)]
pub(crate) struct Content {
    pub(crate) metadata: HashMap<String, Value>,
    pub(crate) tensor_infos: HashMap<String, TensorInfo>,
    /// Absolute offset of the tensor data.
    pub(crate) tensor_data_offset: u64,
}

impl Content {
    /// Where tensor `info`'s bytes are in the file, `None` if that overflows (whether the
    /// range is inside the file is the caller's check, against the bytes it has).
    pub(crate) fn tensor_range(&self, info: &TensorInfo) -> Option<std::ops::Range<usize>> {
        let start = self.tensor_data_offset.checked_add(info.offset)?;
        let start = usize::try_from(start).ok()?;
        Some(start..start.checked_add(info.bytes)?)
    }
}

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

/// Deepest nesting of arrays accepted (the spec allows arrays of arrays; files use one level).
const MAX_DEPTH: usize = 4;

/// A reader that knows how many bytes are left, so no length read from the file can
/// make it allocate more than the file holds.
struct Cursor<'a, R> {
    r: &'a mut R,
    left: u64,
    /// Version 1 writes counts and lengths as u32, later versions as u64.
    wide: bool,
}

impl<R: Read> Cursor<'_, R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .map_err(|_| "the file ends inside its header".to_string())?;
        self.left = self.left.saturating_sub(N as u64);
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.bytes::<4>().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.bytes::<8>().map(u64::from_le_bytes)
    }

    /// A count or length: u32 in version 1, u64 after.
    fn length(&mut self) -> Result<u64, String> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    /// A count of items of at least `min_size` bytes each, checked against what is left.
    fn count(&mut self, what: &str, min_size: u64) -> Result<usize, String> {
        let n = self.length()?;
        if n.checked_mul(min_size).is_none_or(|b| b > self.left) {
            return Err(format!("{what} count {n} exceeds the file"));
        }
        usize::try_from(n).map_err(|_| format!("{what} count {n} exceeds the file"))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.count("string length", 1)?;
        let mut b = vec![0u8; n];
        self.r
            .read_exact(&mut b)
            .map_err(|_| "the file ends inside its header".to_string())?;
        self.left = self.left.saturating_sub(n as u64);
        String::from_utf8(b).map_err(|_| "a string is not UTF-8".to_string())
    }

    fn value(&mut self, ty: u32, depth: usize) -> Result<Value, String> {
        Ok(match ty {
            0 => Value::U8(self.bytes::<1>()?[0]),
            1 => Value::I8(i8::from_le_bytes(self.bytes::<1>()?)),
            2 => Value::U16(u16::from_le_bytes(self.bytes::<2>()?)),
            3 => Value::I16(i16::from_le_bytes(self.bytes::<2>()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.bytes::<4>()?)),
            6 => Value::F32(f32::from_le_bytes(self.bytes::<4>()?)),
            7 => match self.bytes::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("boolean value {b}")),
            },
            8 => Value::String(self.string()?),
            9 if depth < MAX_DEPTH => {
                let item = self.u32()?;
                let min_size = match item {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8..=12 => 4,
                    _ => return Err(format!("unknown metadata value type {item}")),
                };
                let n = self.count("array", min_size)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(item, depth + 1)?);
                }
                Value::Array(items)
            }
            9 => return Err("arrays nest too deeply".into()),
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.bytes::<8>()?)),
            12 => Value::F64(f64::from_le_bytes(self.bytes::<8>()?)),
            other => return Err(format!("unknown metadata value type {other}")),
        })
    }
}

/// Reads a GGUF file's header from the start of `reader`. Errors are one line, saying what
/// is wrong.
pub(crate) fn read_content<R: Read + Seek>(reader: &mut R) -> Result<Content, String> {
    let len = reader.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    reader.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let mut c = Cursor {
        r: reader,
        left: len,
        wide: true,
    };
    if &c.bytes::<4>()? != b"GGUF" {
        return Err("not a GGUF file (bad magic)".into());
    }
    let version = c.u32()?;
    if !(1..=3).contains(&version) {
        return Err(format!("unsupported GGUF version {version}"));
    }
    c.wide = version >= 2;
    // A tensor info takes at least 20 bytes (version 1), a key/value at least 9.
    let n_tensors = c.count("tensor", 20)?;
    let n_kv = c.count("metadata", 9)?;
    let mut metadata = HashMap::with_capacity(n_kv);
    for _ in 0..n_kv {
        let key = c.string()?;
        let ty = c.u32()?;
        let value = c.value(ty, 0).map_err(|e| format!("metadata {key}: {e}"))?;
        metadata.insert(key, value);
    }
    let mut infos = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = c.string()?;
        let n_dims = c.u32()?;
        if n_dims > 4 {
            return Err(format!("tensor {name} has {n_dims} dimensions"));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(c.length()?);
        }
        let ty_id = c.u32()?;
        let offset = c.u64()?;
        dims.reverse();
        infos.push((name, dims, ty_id, offset));
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => as_u64(v).ok_or("general.alignment is not an integer")?,
    };
    if alignment == 0 {
        return Err("general.alignment is 0".into());
    }
    let position = len - c.left;
    let tensor_data_offset = position
        .div_ceil(alignment)
        .checked_mul(alignment)
        .ok_or("general.alignment is too large")?;
    let mut tensor_infos = HashMap::with_capacity(infos.len());
    for (name, dims, ty_id, offset) in infos {
        let impossible = || format!("tensor {name} has impossible dimensions {dims:?}");
        let dims_usize = dims
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(impossible)?;
        let elements = dims_usize.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        // As f32 the tensor takes 4 bytes an element; that must be addressable.
        let Some(elements) = elements.filter(|n| n.checked_mul(4).is_some()) else {
            return Err(impossible());
        };
        let ty = TensorType::from_id(ty_id)
            .ok_or_else(|| format!("tensor {name} has unknown type {ty_id}"))?;
        if !elements.is_multiple_of(ty.block_values()) {
            return Err(format!("tensor {name} is not whole {ty:?} blocks"));
        }
        let bytes = elements / ty.block_values() * ty.block_bytes();
        let end = tensor_data_offset
            .checked_add(offset)
            .and_then(|s| s.checked_add(bytes as u64));
        if end.is_none_or(|e| e > len) {
            return Err(format!("tensor {name} lies beyond the end of the file"));
        }
        tensor_infos.insert(
            name,
            TensorInfo {
                dims: dims_usize,
                ty,
                offset,
                bytes,
            },
        );
    }
    Ok(Content {
        metadata,
        tensor_infos,
        tensor_data_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(out: &mut Vec<u8>, text: &str, wide: bool) {
        if wide {
            out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        } else {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(text.as_bytes());
    }

    /// A file with one key/value of every type (and an array of arrays), alignment 64, and
    /// one 2×32 F32 tensor: `wide` for version 3, else version 1 (u32 counts and lengths).
    fn file(wide: bool) -> Vec<u8> {
        let n = |out: &mut Vec<u8>, v: u64| {
            if wide {
                out.extend_from_slice(&v.to_le_bytes());
            } else {
                out.extend_from_slice(&(v as u32).to_le_bytes());
            }
        };
        let mut f = b"GGUF".to_vec();
        f.extend_from_slice(&(if wide { 3u32 } else { 1 }).to_le_bytes());
        n(&mut f, 1);
        n(&mut f, 15);
        let scalars: [(&str, u32, &[u8]); 12] = [
            ("u8", 0, &[200]),
            ("i8", 1, &[0xFF]),
            ("u16", 2, &[1, 1]),
            ("i16", 3, &[0xFE, 0xFF]),
            ("u32", 4, &[0, 0, 0, 1]),
            ("i32", 5, &[0xFD, 0xFF, 0xFF, 0xFF]),
            ("f32", 6, &[0, 0, 0xC0, 0x3F]),
            ("bool", 7, &[1]),
            ("u64", 10, &[1, 0, 0, 0, 0, 0, 0, 1]),
            ("i64", 11, &[0xFC, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
            ("f64", 12, &[0, 0, 0, 0, 0, 0, 0xF8, 0x3F]),
            ("general.alignment", 4, &[64, 0, 0, 0]),
        ];
        for (key, ty, bytes) in scalars {
            s(&mut f, key, wide);
            f.extend_from_slice(&ty.to_le_bytes());
            f.extend_from_slice(bytes);
        }
        s(&mut f, "string", wide);
        f.extend_from_slice(&8u32.to_le_bytes());
        s(&mut f, "héllo", wide);
        s(&mut f, "strings", wide);
        f.extend_from_slice(&9u32.to_le_bytes());
        f.extend_from_slice(&8u32.to_le_bytes());
        n(&mut f, 2);
        s(&mut f, "a", wide);
        s(&mut f, "", wide);
        s(&mut f, "nested", wide);
        f.extend_from_slice(&9u32.to_le_bytes());
        f.extend_from_slice(&9u32.to_le_bytes());
        n(&mut f, 1);
        f.extend_from_slice(&5u32.to_le_bytes());
        n(&mut f, 2);
        f.extend_from_slice(&7i32.to_le_bytes());
        f.extend_from_slice(&(-7i32).to_le_bytes());
        s(&mut f, "t", wide);
        f.extend_from_slice(&2u32.to_le_bytes());
        n(&mut f, 32);
        n(&mut f, 2);
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0u64.to_le_bytes());
        while !f.len().is_multiple_of(64) {
            f.push(0);
        }
        for i in 0..64 {
            f.extend_from_slice(&(i as f32).to_le_bytes());
        }
        f
    }

    fn parse(bytes: &[u8]) -> Result<Content, String> {
        read_content(&mut std::io::Cursor::new(bytes))
    }

    #[test]
    fn every_value_type_and_both_widths_are_read() {
        for wide in [true, false] {
            let bytes = file(wide);
            let c = parse(&bytes).unwrap();
            let v = |k: &str| c.metadata.get(k).cloned().unwrap();
            assert_eq!(v("u8"), Value::U8(200));
            assert_eq!(v("i8"), Value::I8(-1));
            assert_eq!(v("u16"), Value::U16(257));
            assert_eq!(v("i16"), Value::I16(-2));
            assert_eq!(v("u32"), Value::U32(1 << 24));
            assert_eq!(v("i32"), Value::I32(-3));
            assert_eq!(v("f32"), Value::F32(1.5));
            assert_eq!(v("bool"), Value::Bool(true));
            assert_eq!(v("u64"), Value::U64((1 << 56) + 1));
            assert_eq!(v("i64"), Value::I64(-4));
            assert_eq!(v("f64"), Value::F64(1.5));
            assert_eq!(v("string"), Value::String("héllo".into()));
            assert_eq!(
                v("strings"),
                Value::Array(vec![
                    Value::String("a".into()),
                    Value::String(String::new())
                ])
            );
            assert_eq!(
                v("nested"),
                Value::Array(vec![Value::Array(vec![Value::I32(7), Value::I32(-7)])])
            );
            assert_eq!(c.tensor_data_offset % 64, 0);
            assert_eq!(c.tensor_data_offset as usize, bytes.len() - 256);
            let t = &c.tensor_infos["t"];
            assert_eq!(
                (t.dims.as_slice(), t.ty, t.bytes),
                (&[2, 32][..], TensorType::F32, 256)
            );
            let data = &bytes[c.tensor_range(t).unwrap()];
            assert_eq!(&data[4..8], &1f32.to_le_bytes());
            let md = Metadata(&c.metadata);
            assert!(
                md.opt_ints("nested").is_err(),
                "an array of arrays is no int list"
            );
            assert_eq!(md.usize("u16").unwrap(), 257);
            assert!(md.usize("i8").is_err());
        }
    }

    #[test]
    fn truncated_or_inflated_files_are_one_line_errors() {
        let bytes = file(true);
        for end in 0..bytes.len() {
            let e = parse(&bytes[..end]).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        // The first array count (of "strings") made huge: refused before allocating.
        let at = bytes.windows(7).position(|w| w == b"strings").unwrap() + 7 + 8;
        let mut huge = bytes.clone();
        huge[at..at + 8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        assert!(parse(&huge).unwrap_err().contains("exceeds the file"));
        let mut bad_version = bytes.clone();
        bad_version[4] = 9;
        assert!(parse(&bad_version).unwrap_err().contains("version 9"));
    }
}
