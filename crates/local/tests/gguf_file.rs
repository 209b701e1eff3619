//! A GGUF writer for the tests, written from the GGUF spec independently of the crate's
//! reader (version 3, 32-byte alignment), with GGML's reference quantizers for the block
//! types the test models use.

use std::io::Write;

/// A metadata value.
#[derive(Clone, Debug)]
pub enum Value {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    fn type_id(&self) -> u32 {
        match self {
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::String(_) => 8,
            Value::Array(_) => 9,
            Value::U64(_) => 10,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Bool(v) => out.push(u8::from(*v)),
            Value::String(s) => string(out, s),
            Value::Array(items) => {
                let ty = items.first().map_or(4, Value::type_id);
                out.extend_from_slice(&ty.to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    item.write(out);
                }
            }
        }
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The GGML tensor types the tests write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlDType {
    F32,
    Q4_0,
    Q4_1,
    Q8_0,
}

impl GgmlDType {
    fn id(self) -> u32 {
        match self {
            GgmlDType::F32 => 0,
            GgmlDType::Q4_0 => 2,
            GgmlDType::Q4_1 => 3,
            GgmlDType::Q8_0 => 8,
        }
    }
}

/// A tensor as the file stores it.
#[derive(Clone, Debug)]
pub struct QTensor {
    dtype: GgmlDType,
    /// Outermost first (`[rows, cols]`).
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn f16(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

impl QTensor {
    /// `values` (row-major, `shape` outermost first) in `dtype`, quantized as GGML's
    /// `quantize_row_*_ref` does.
    pub fn quantize(values: &[f32], shape: &[usize], dtype: GgmlDType) -> QTensor {
        assert_eq!(values.len(), shape.iter().product::<usize>());
        let mut data = Vec::new();
        match dtype {
            GgmlDType::F32 => values
                .iter()
                .for_each(|v| data.extend_from_slice(&v.to_le_bytes())),
            GgmlDType::Q8_0 => {
                for x in values.chunks_exact(32) {
                    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
                    let d = amax / 127.0;
                    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                    data.extend_from_slice(&f16(d));
                    data.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
                }
            }
            GgmlDType::Q4_0 => {
                for x in values.chunks_exact(32) {
                    let (mut amax, mut max) = (0f32, 0f32);
                    for &v in x {
                        if v.abs() > amax {
                            amax = v.abs();
                            max = v;
                        }
                    }
                    let d = max / -8.0;
                    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                    data.extend_from_slice(&f16(d));
                    let q = |v: f32| ((v * id + 8.5) as u8).min(15);
                    data.extend((0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4)));
                }
            }
            GgmlDType::Q4_1 => {
                for x in values.chunks_exact(32) {
                    let min = x.iter().fold(f32::MAX, |m, v| m.min(*v));
                    let max = x.iter().fold(f32::MIN, |m, v| m.max(*v));
                    let d = (max - min) / 15.0;
                    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                    data.extend_from_slice(&f16(d));
                    data.extend_from_slice(&f16(min));
                    let q = |v: f32| (((v - min) * id + 0.5) as u8).min(15);
                    data.extend((0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4)));
                }
            }
        }
        QTensor {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }
}

const ALIGNMENT: usize = 32;

fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(ALIGNMENT) {
        out.push(0);
    }
}

/// Writes a GGUF (version 3): metadata in order (a repeated key is written twice), then
/// the tensor infos, then each tensor's data at the next multiple of 32 bytes.
pub fn write(
    file: &mut impl Write,
    metadata: &[(&str, &Value)],
    tensors: &[(&str, &QTensor)],
) -> std::io::Result<()> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        string(&mut out, key);
        out.extend_from_slice(&value.type_id().to_le_bytes());
        value.write(&mut out);
    }
    let mut offset = 0usize;
    for (name, t) in tensors {
        string(&mut out, name);
        out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for d in t.shape.iter().rev() {
            out.extend_from_slice(&(*d as u64).to_le_bytes());
        }
        out.extend_from_slice(&t.dtype.id().to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += t.data.len().div_ceil(ALIGNMENT) * ALIGNMENT;
    }
    pad(&mut out);
    for (_, t) in tensors {
        out.extend_from_slice(&t.data);
        pad(&mut out);
    }
    file.write_all(&out)
}
