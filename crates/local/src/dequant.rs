//! Tensors as f32, for what has no kernel in [`crate::quant`]: norms and biases (stored as
//! F32), and weight matrices in the other GGML types, which the loader converts once to
//! Q8_0. Scalar and block by block, as GGML's `dequantize_row_*` reads each layout: this
//! runs once per tensor at load time.

use crate::gguf::TensorType;
use crate::quant;

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_K's and Q5_K's 6-bit scale and min of sub-block `j` (GGML's `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    let (d, m) = if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    };
    (f32::from(d), f32::from(m))
}

/// The values of `data` (whole blocks of `ty`), or `None` for a type not read here.
pub(crate) fn dequantize(ty: TensorType, data: &[u8]) -> Option<Vec<f32>> {
    let kind = ty.kernel_kind();
    if let Some(kind) = kind {
        let mut out = vec![0f32; data.len() / kind.block_bytes() * kind.block_values()];
        quant::dequantize_row(kind, data, &mut out);
        return Some(out);
    }
    let mut out = Vec::with_capacity(data.len() / ty.block_bytes() * ty.block_values());
    for b in data.chunks_exact(ty.block_bytes()) {
        match ty {
            TensorType::F32 => out.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            TensorType::F16 => out.push(f16_at(b, 0)),
            TensorType::BF16 => out.push(half::bf16::from_le_bytes([b[0], b[1]]).to_f32()),
            TensorType::Q5_0 | TensorType::Q5_1 => q5(ty, b, &mut out),
            TensorType::Q8_1 => {
                let d = f16_at(b, 0);
                out.extend(b[4..36].iter().map(|&q| f32::from(q as i8) * d));
            }
            TensorType::Q8K => {
                let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                out.extend(b[4..260].iter().map(|&q| f32::from(q as i8) * d));
            }
            TensorType::Q2K => q2k(b, &mut out),
            TensorType::Q3K => q3k(b, &mut out),
            TensorType::Q5K => q5k(b, &mut out),
            _ => return None,
        }
    }
    Some(out)
}

/// Q5_0 (d, qh, qs; values minus 16) and Q5_1 (d, m, qh, qs; plus m).
fn q5(ty: TensorType, b: &[u8], out: &mut Vec<f32>) {
    let d = f16_at(b, 0);
    let (m, rest) = match ty {
        TensorType::Q5_1 => (Some(f16_at(b, 2)), &b[4..]),
        _ => (None, &b[2..]),
    };
    let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let qs = &rest[4..20];
    let value = |j: usize, high: bool| {
        let (nibble, bit) = if high {
            (qs[j] >> 4, (qh >> (j + 16)) & 1)
        } else {
            (qs[j] & 0xF, (qh >> j) & 1)
        };
        let q = u32::from(nibble) | (bit << 4);
        match m {
            Some(m) => q as f32 * d + m,
            None => (q as i32 - 16) as f32 * d,
        }
    };
    out.extend((0..16).map(|j| value(j, false)));
    out.extend((0..16).map(|j| value(j, true)));
}

/// Q2_K: scales[16] (4-bit scale, 4-bit min), qs[64] (2 bits a value), d, dmin.
fn q2k(b: &[u8], out: &mut Vec<f32>) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    let mut is = 0;
    for half in 0..2 {
        let q = &qs[32 * half..32 * half + 32];
        for shift in [0, 2, 4, 6] {
            for part in 0..2 {
                let sc = scales[is];
                is += 1;
                let (dl, ml) = (d * f32::from(sc & 0xF), dmin * f32::from(sc >> 4));
                for &q in &q[16 * part..16 * part + 16] {
                    out.push(dl * f32::from((q >> shift) & 3) - ml);
                }
            }
        }
    }
}

/// Q3_K: hmask[32] (the third bit, set meaning no -4), qs[64] (low 2 bits), scales[12]
/// (sixteen 6-bit scales, offset by 32), d.
fn q3k(b: &[u8], out: &mut Vec<f32>) {
    let (hmask, qs, packed) = (&b[0..32], &b[32..96], &b[96..108]);
    let d = f16_at(b, 108);
    let mut scales = [0i32; 16];
    for (j, s) in scales.iter_mut().enumerate() {
        let low = if j < 8 {
            packed[j] & 0xF
        } else {
            packed[j - 8] >> 4
        };
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        *s = i32::from(low | (high << 4)) - 32;
    }
    let mut is = 0;
    let mut m = 1u8;
    for half in 0..2 {
        let q = &qs[32 * half..32 * half + 32];
        for shift in [0, 2, 4, 6] {
            for part in 0..2 {
                let dl = d * scales[is] as f32;
                is += 1;
                for l in 16 * part..16 * part + 16 {
                    let low = i32::from((q[l] >> shift) & 3);
                    let minus = if hmask[l] & m != 0 { 0 } else { 4 };
                    out.push(dl * (low - minus) as f32);
                }
            }
            m <<= 1;
        }
    }
}

/// Q5_K: d, dmin, scales[12] (as Q4_K), qh[32] (the fifth bit), qs[128] (low 4 bits).
fn q5k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for chunk in 0..4 {
        let ql = &qs[32 * chunk..32 * chunk + 32];
        for half in 0..2 {
            let (sc, mn) = scale_min_k4(2 * chunk + half, scales);
            let (dl, ml) = (d * sc, dmin * mn);
            let bit = 1u8 << (2 * chunk + half);
            for l in 0..32 {
                let low = if half == 0 { ql[l] & 0xF } else { ql[l] >> 4 };
                let high = if qh[l] & bit != 0 { 16 } else { 0 };
                out.push(dl * f32::from(low + high) - ml);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16(v: f32) -> [u8; 2] {
        half::f16::from_f32(v).to_le_bytes()
    }

    /// Blocks worked out by hand from GGML's layouts.
    #[test]
    fn each_layout_reads_as_ggml_defines_it() {
        // Q5_0: d = 2; value 0 low nibble 3 with its fifth bit, value 16 high nibble 1.
        let mut b = f16(2.0).to_vec();
        b.extend_from_slice(&(1u32 | (1 << 17)).to_le_bytes());
        b.extend((0..16u8).map(|_| 3 | (1 << 4)));
        let y = dequantize(TensorType::Q5_0, &b).unwrap();
        assert_eq!((y[0], y[1], y[16], y[17]), (6.0, -26.0, -30.0, 2.0));
        // Q5_1: d = 1, m = 0.5.
        let mut b = f16(1.0).to_vec();
        b.extend_from_slice(&f16(0.5));
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend((0..16u8).map(|_| 3 | (1 << 4)));
        let y = dequantize(TensorType::Q5_1, &b).unwrap();
        assert_eq!((y[0], y[1], y[16]), (19.5, 3.5, 1.5));
        // Q8_1: d = 0.5 (then the sum, ignored), 32 signed bytes.
        let mut b = f16(0.5).to_vec();
        b.extend_from_slice(&f16(9.0));
        b.extend((0..32u8).map(|j| (j as i8 - 4) as u8));
        let y = dequantize(TensorType::Q8_1, &b).unwrap();
        assert_eq!((y[0], y[31]), (-2.0, 13.5));
        // Q2_K: scale 3 min 1 for the first 16 values, quants 2 in bits 0-1.
        let mut b = vec![0u8; 84];
        b[0] = 3 | (1 << 4);
        b[16..80].fill(0b0000_0110);
        b[80..82].copy_from_slice(&f16(1.0));
        b[82..84].copy_from_slice(&f16(2.0));
        let y = dequantize(TensorType::Q2K, &b).unwrap();
        assert_eq!((y[0], y[16], y[32]), (3.0 * 2.0 - 2.0, 0.0, 0.0));
        // Q3_K: all scales 32 + 1 = 33 (low 4 bits 1, high bits 2 => 1 | 32), d = 1; quants
        // 1 with the high bit set for value 0 (no -4), clear for value 1 (-4).
        let mut b = vec![0u8; 110];
        b[0] = 1;
        b[32..96].fill(1);
        b[96..104].fill(0x11);
        b[104..108].fill(0b1010_1010);
        b[108..110].copy_from_slice(&f16(1.0));
        let y = dequantize(TensorType::Q3K, &b).unwrap();
        assert_eq!((y[0], y[1], y[255]), (1.0, -3.0, -4.0));
        // Q5_K: d = 1, dmin = 1; sub-block 0 scale 2 min 1; value 0 has its fifth bit.
        let mut b = vec![0u8; 176];
        b[0..2].copy_from_slice(&f16(1.0));
        b[2..4].copy_from_slice(&f16(1.0));
        b[4] = 2;
        b[8] = 1;
        b[16] = 1;
        b[48..176].fill(0x53);
        let y = dequantize(TensorType::Q5K, &b).unwrap();
        assert_eq!(
            (y[0], y[1], y[32]),
            (2.0 * 19.0 - 1.0, 2.0 * 3.0 - 1.0, 0.0)
        );
        // Q8_K: f32 d, 256 signed bytes.
        let mut b = 0.25f32.to_le_bytes().to_vec();
        b.extend((0..256).map(|j| j as u8));
        b.extend([0u8; 32]);
        let y = dequantize(TensorType::Q8K, &b).unwrap();
        assert_eq!((y[4], y[255]), (1.0, -0.25));
    }
}
