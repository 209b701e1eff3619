//! The quantized kernels against an independent reference: a scalar dequantization of the
//! same GGUF blocks written here from GGML's block layouts, then f32 arithmetic. The only
//! difference allowed is the rounding of the activations to 8 bits per 32 values, bounded
//! exactly below.

use proptest::prelude::*;
use whittle_local::{QuantKind, quantized_matmul};

/// Byte offsets of a block's f16 scales (random bytes there could be NaN or huge).
fn scale_offsets(kind: QuantKind) -> &'static [usize] {
    match kind {
        QuantKind::Q4_0 | QuantKind::Q8_0 => &[0],
        QuantKind::Q4_1 | QuantKind::Q4K => &[0, 2],
        QuantKind::Q6K => &[208],
    }
}

/// Random blocks: random quants, scales drawn from a sane range.
fn blocks(kind: QuantKind, n: usize, bytes: &[u8], scales: &[f32]) -> Vec<u8> {
    let mut out = bytes[..n * kind.block_bytes()].to_vec();
    let mut s = scales.iter().cycle();
    for block in out.chunks_exact_mut(kind.block_bytes()) {
        for &at in scale_offsets(kind) {
            let v = half::f16::from_f32(*s.next().unwrap_or(&0.01));
            block[at..at + 2].copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    out
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_K's 6-bit scale and min of sub-block `j`, unpacked as in GGML's `get_scale_min_k4`.
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

/// One block's values, transcribed from GGML's `dequantize_row_*` (scalar, block by block),
/// independently of the crate's kernels.
fn dequantize_block(kind: QuantKind, b: &[u8]) -> Vec<f32> {
    let mut y = vec![0f32; kind.block_values()];
    match kind {
        QuantKind::Q4_0 => {
            let d = f16_at(b, 0);
            for j in 0..16 {
                let q = b[2 + j];
                y[j] = (i32::from(q & 0x0F) - 8) as f32 * d;
                y[j + 16] = (i32::from(q >> 4) - 8) as f32 * d;
            }
        }
        QuantKind::Q4_1 => {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            for j in 0..16 {
                let q = b[4 + j];
                y[j] = f32::from(q & 0x0F) * d + m;
                y[j + 16] = f32::from(q >> 4) * d + m;
            }
        }
        QuantKind::Q8_0 => {
            let d = f16_at(b, 0);
            for j in 0..32 {
                y[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        QuantKind::Q4K => {
            // d, dmin, scales[12], qs[128].
            let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
            let (scales, qs) = (&b[4..16], &b[16..144]);
            let mut is = 0;
            for chunk in 0..4 {
                let q = &qs[32 * chunk..32 * chunk + 32];
                let (sc, m) = scale_min_k4(is, scales);
                let (d1, m1) = (d * sc, dmin * m);
                let (sc, m) = scale_min_k4(is + 1, scales);
                let (d2, m2) = (d * sc, dmin * m);
                for l in 0..32 {
                    y[64 * chunk + l] = d1 * f32::from(q[l] & 0xF) - m1;
                    y[64 * chunk + 32 + l] = d2 * f32::from(q[l] >> 4) - m2;
                }
                is += 2;
            }
        }
        QuantKind::Q6K => {
            // ql[128], qh[64], scales[16] (i8), d.
            let d = f16_at(b, 208);
            for half in 0..2 {
                let ql = &b[64 * half..64 * half + 64];
                let qh = &b[128 + 32 * half..128 + 32 * half + 32];
                let sc = &b[192 + 8 * half..192 + 8 * half + 8];
                let y = &mut y[128 * half..128 * half + 128];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = i32::from((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
                    let q2 = i32::from((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    let q3 = i32::from((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    let q4 = i32::from((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    let s = |i: usize| f32::from(sc[i] as i8);
                    y[l] = d * s(is) * q1 as f32;
                    y[l + 32] = d * s(is + 2) * q2 as f32;
                    y[l + 64] = d * s(is + 4) * q3 as f32;
                    y[l + 96] = d * s(is + 6) * q4 as f32;
                }
            }
        }
    }
    y
}

fn reference(kind: QuantKind, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let w: Vec<f32> = data
        .chunks_exact(kind.block_bytes())
        .flat_map(|b| dequantize_block(kind, b))
        .collect();
    assert_eq!(w.len(), rows * cols);
    w
}

/// The reference itself, on blocks worked out by hand.
#[test]
fn the_reference_dequantizer_reads_the_ggml_layouts() {
    let one = half::f16::from_f32(1.0).to_le_bytes();
    let two = half::f16::from_f32(2.0).to_le_bytes();
    // Q4_0: low nibbles are values 0..16, high nibbles values 16..32, minus 8.
    let mut b = one.to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let y = dequantize_block(QuantKind::Q4_0, &b);
    assert_eq!((y[0], y[15], y[16], y[31]), (-8.0, 7.0, 7.0, -8.0));
    // Q4_1: d = 2, m = 1.
    let mut b = two.to_vec();
    b.extend_from_slice(&one);
    b.extend((0..16u8).map(|j| j | (3 << 4)));
    let y = dequantize_block(QuantKind::Q4_1, &b);
    assert_eq!((y[0], y[5], y[16]), (1.0, 11.0, 7.0));
    // Q8_0: signed bytes times d.
    let mut b = two.to_vec();
    b.extend((0..32u8).map(|j| (j as i8 - 16) as u8));
    let y = dequantize_block(QuantKind::Q8_0, &b);
    assert_eq!((y[0], y[16], y[31]), (-32.0, 0.0, 30.0));
    // Q4_K: d = 1, dmin = 2; sub-block 0 scale 3 min 1, sub-block 5 scale 17 (4 bits low,
    // 2 high in byte 1) min 0; all quants 5 (low) and 9 (high).
    let mut b = one.to_vec();
    b.extend_from_slice(&two);
    let mut scales = [0u8; 12];
    scales[0] = 3;
    scales[4] = 1;
    scales[9] = 1; // low bits of sub-block 5's scale
    scales[1] = 1 << 6; // its high bits: 1 << 4
    b.extend_from_slice(&scales);
    b.extend(std::iter::repeat_n(5 | (9 << 4), 128));
    let y = dequantize_block(QuantKind::Q4K, &b);
    assert_eq!(y[0], 3.0 * 5.0 - 2.0);
    assert_eq!(y[160], 17.0 * 9.0);
    // Q6_K: d = 1, every scale 2, ql = 0x21, qh = 0b11_10_01_00: quants 1|0, 1|16, 2|32,
    // 2|48, minus 32.
    let mut b = vec![0x21u8; 128];
    b.extend(std::iter::repeat_n(0b1110_0100u8, 64));
    b.extend(std::iter::repeat_n(2u8, 16));
    b.extend_from_slice(&one);
    let y = dequantize_block(QuantKind::Q6K, &b);
    assert_eq!(
        (y[0], y[32], y[64], y[96], y[128]),
        (2.0 * -31.0, 2.0 * -15.0, 2.0 * 2.0, 2.0 * 18.0, 2.0 * -31.0)
    );
}

fn check(kind: QuantKind, bytes: &[u8], scales: &[f32], x: &[f32], rows: usize, cols: usize) {
    let n = rows * cols / kind.block_values();
    let data = blocks(kind, n, bytes, scales);
    let w = reference(kind, &data, rows, cols);
    let got = quantized_matmul(kind, &data, rows, cols, x).unwrap();
    let seq = x.len() / cols;
    assert_eq!(got.len(), seq * rows);
    for t in 0..seq {
        let x = &x[t * cols..(t + 1) * cols];
        for r in 0..rows {
            let w = &w[r * cols..(r + 1) * cols];
            let exact: f32 = w.iter().zip(x).map(|(a, b)| a * b).sum();
            // Rounding x to 8 bits moves each value by at most half a step of its block.
            let mut bound = 0f32;
            for (wb, xb) in w.chunks(32).zip(x.chunks(32)) {
                let step = xb.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                bound += wb.iter().map(|v| v.abs()).sum::<f32>() * step * 0.5;
            }
            let magnitude: f32 = w.iter().zip(x).map(|(a, b)| (a * b).abs()).sum();
            let tol = bound * 1.01 + 1e-4 * magnitude + 1e-5;
            let g = got[t * rows + r];
            assert!(
                (g - exact).abs() <= tol,
                "{kind:?} row {r} token {t}: {g} vs {exact} (tolerance {tol})"
            );
        }
    }
}

fn strategy(kind: QuantKind) -> impl Strategy<Value = (Vec<u8>, Vec<f32>, Vec<f32>, usize, usize)> {
    // 3 rows of 2 blocks (256 values each for the K kinds), 1 to 10 activation rows: both
    // the one-row and the tiled many-row paths, with a partial tile.
    let cols = 2 * kind.block_values();
    let rows = 3;
    let nbytes = rows * 2 * kind.block_bytes();
    (1usize..=10).prop_flat_map(move |seq| {
        (
            proptest::collection::vec(any::<u8>(), nbytes),
            proptest::collection::vec(prop_oneof![-0.5f32..0.5, -1e-3f32..1e-3, Just(0.0f32)], 16),
            proptest::collection::vec(
                prop_oneof![-4.0f32..4.0, Just(0.0f32), -1e-3f32..1e-3],
                seq * cols,
            ),
            Just(rows),
            Just(cols),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn q4_0_matches_dequantized_f32((b, s, x, r, c) in strategy(QuantKind::Q4_0)) {
        check(QuantKind::Q4_0, &b, &s, &x, r, c);
    }

    #[test]
    fn q4_1_matches_dequantized_f32((b, s, x, r, c) in strategy(QuantKind::Q4_1)) {
        check(QuantKind::Q4_1, &b, &s, &x, r, c);
    }

    #[test]
    fn q8_0_matches_dequantized_f32((b, s, x, r, c) in strategy(QuantKind::Q8_0)) {
        check(QuantKind::Q8_0, &b, &s, &x, r, c);
    }

    #[test]
    fn q4_k_matches_dequantized_f32((b, s, x, r, c) in strategy(QuantKind::Q4K)) {
        check(QuantKind::Q4K, &b, &s, &x, r, c);
    }

    #[test]
    fn q6_k_matches_dequantized_f32((b, s, x, r, c) in strategy(QuantKind::Q6K)) {
        check(QuantKind::Q6K, &b, &s, &x, r, c);
    }
}

#[test]
fn shapes_that_are_not_whole_blocks_are_errors() {
    let data = vec![0u8; 20];
    assert!(quantized_matmul(QuantKind::Q4_1, &data, 1, 32, &[0.0; 31]).is_err());
    assert!(quantized_matmul(QuantKind::Q4_1, &data, 1, 16, &[0.0; 16]).is_err());
    assert!(quantized_matmul(QuantKind::Q4_1, &data, 2, 32, &[0.0; 32]).is_err());
    assert_eq!(
        quantized_matmul(QuantKind::Q4_1, &data, 1, 32, &[]).unwrap(),
        Vec::<f32>::new()
    );
}
