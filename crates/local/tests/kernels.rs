//! The quantized kernels against an independent reference: candle's dequantization of the
//! same GGUF blocks, then f32 arithmetic. The only difference allowed is the rounding of
//! the activations to 8 bits per 32 values, bounded exactly below.

use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{Device, Tensor};
use proptest::prelude::*;
use std::borrow::Cow;
use whittle_local::{QuantKind, quantized_matmul};

fn ggml(kind: QuantKind) -> GgmlDType {
    match kind {
        QuantKind::Q4_0 => GgmlDType::Q4_0,
        QuantKind::Q4_1 => GgmlDType::Q4_1,
        QuantKind::Q8_0 => GgmlDType::Q8_0,
        QuantKind::Q4K => GgmlDType::Q4K,
        QuantKind::Q6K => GgmlDType::Q6K,
    }
}

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

fn reference(kind: QuantKind, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let storage = QStorage::from_data(Cow::Borrowed(data), &Device::Cpu, ggml(kind)).unwrap();
    let t = QTensor::new(storage, (rows, cols)).unwrap();
    let w: Tensor = t.dequantize(&Device::Cpu).unwrap();
    w.flatten_all().unwrap().to_vec1().unwrap()
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
