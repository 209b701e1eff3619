//! Q8 blocks with f32 scales and their dot product: the inner loop of decoding.
//!
//! ggml's Q8_0 stores each block's scale as f16; candle's x86 kernel converts two scales
//! per 32 products through a function call, which profiling showed to be a large share of
//! decoding. Here scales are f32 (36-byte blocks instead of 34), which made decoding 1.5x
//! faster in an A/B run, and the AVX2 path is reached at run time through `pulp`'s safe
//! intrinsics (no `unsafe`); other CPUs use the scalar loop.

#[cfg(target_arch = "x86_64")]
use pulp::bytemuck::cast;
#[cfg(target_arch = "x86_64")]
use pulp::x86::V3;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m256, __m256i};

/// Values per block.
pub(crate) const BLOCK: usize = 32;

/// 32 signed 8-bit values and their scale: value `i` is `d * qs[i]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Q8Block {
    pub(crate) d: f32,
    pub(crate) qs: [i8; BLOCK],
}

/// Quantizes `x` into `out` (`out.len() * BLOCK == x.len()`), rounding to nearest.
pub(crate) fn quantize_into(x: &[f32], out: &mut [Q8Block]) {
    for (block, x) in out.iter_mut().zip(x.chunks_exact(BLOCK)) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        block.d = d;
        for (q, v) in block.qs.iter_mut().zip(x) {
            *q = (v * inv).round().clamp(-127.0, 127.0) as i8;
        }
    }
}

/// Writes the values of `blocks` into `out`.
pub(crate) fn dequantize_into(blocks: &[Q8Block], out: &mut [f32]) {
    for (block, out) in blocks.iter().zip(out.chunks_exact_mut(BLOCK)) {
        for (o, q) in out.iter_mut().zip(block.qs) {
            *o = block.d * f32::from(q);
        }
    }
}

/// The AVX2 kernel, if this CPU has it (checked once).
#[cfg(target_arch = "x86_64")]
fn avx2() -> Option<V3> {
    static V3_AVAILABLE: std::sync::OnceLock<Option<V3>> = std::sync::OnceLock::new();
    *V3_AVAILABLE.get_or_init(V3::try_new)
}

/// Dot products of four weight rows with one activation row (all the same length).
pub(crate) fn dot4(rows: [&[Q8Block]; 4], x: &[Q8Block]) -> [f32; 4] {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2() {
        return simd.vectorize(|| dot4_avx2(simd, rows, x));
    }
    rows.map(|r| dot_scalar(r, x))
}

/// Dot product of one weight row with an activation row.
pub(crate) fn dot(row: &[Q8Block], x: &[Q8Block]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2() {
        return simd.vectorize(|| dot_avx2(simd, row, x));
    }
    dot_scalar(row, x)
}

fn dot_scalar(row: &[Q8Block], x: &[Q8Block]) -> f32 {
    row.iter()
        .zip(x)
        .map(|(w, x)| {
            let s: i32 =
                w.qs.iter()
                    .zip(x.qs)
                    .map(|(a, b)| i32::from(*a) * i32::from(b))
                    .sum();
            w.d * x.d * s as f32
        })
        .sum()
}

/// Eight partial sums of `Σ w·x` over one block pair, as f32.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn block_products(simd: V3, w: __m256i, x: __m256i) -> __m256 {
    let avx2 = simd.avx2;
    // maddubs multiplies unsigned by signed bytes: move w's sign onto x.
    let abs_w = avx2._mm256_sign_epi8(w, w);
    let signed_x = avx2._mm256_sign_epi8(x, w);
    let pairs = avx2._mm256_maddubs_epi16(abs_w, signed_x);
    let quads = avx2._mm256_madd_epi16(pairs, simd.avx._mm256_set1_epi16(1));
    simd.avx._mm256_cvtepi32_ps(quads)
}

/// One row's dot product. Rows are done one after another: each is one sequential stream,
/// which the prefetcher follows better than four interleaved ones (measured). No closures
/// inside: they would be compiled without AVX2 and every intrinsic would become a call.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2(simd: V3, row: &[Q8Block], x: &[Q8Block]) -> f32 {
    let mut even = simd.avx._mm256_setzero_ps();
    let mut odd = simd.avx._mm256_setzero_ps();
    let mut pairs_w = row.chunks_exact(2);
    let mut pairs_x = x.chunks_exact(2);
    for (w, xs) in (&mut pairs_w).zip(&mut pairs_x) {
        let p0 = block_products(simd, cast(w[0].qs), cast(xs[0].qs));
        let p1 = block_products(simd, cast(w[1].qs), cast(xs[1].qs));
        even = simd
            .fma
            ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(w[0].d * xs[0].d), p0, even);
        odd = simd
            .fma
            ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(w[1].d * xs[1].d), p1, odd);
    }
    for (w, xs) in pairs_w.remainder().iter().zip(pairs_x.remainder()) {
        let p = block_products(simd, cast(w.qs), cast(xs.qs));
        even = simd
            .fma
            ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(w.d * xs.d), p, even);
    }
    let lanes: [f32; 8] = cast(simd.avx._mm256_add_ps(even, odd));
    let mut sum = 0f32;
    for lane in lanes {
        sum += lane;
    }
    sum
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot4_avx2(simd: V3, rows: [&[Q8Block]; 4], x: &[Q8Block]) -> [f32; 4] {
    let mut out = [0f32; 4];
    for (row, out) in rows.iter().zip(out.iter_mut()) {
        *out = dot_avx2(simd, row, x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn blocks(values: &[f32]) -> Vec<Q8Block> {
        let mut out = vec![Q8Block::default(); values.len() / BLOCK];
        quantize_into(values, &mut out);
        out
    }

    proptest! {
        /// The SIMD kernel, the scalar kernel and f32 arithmetic on the quantized values agree.
        #[test]
        fn kernels_agree(
            values in proptest::collection::vec(-3.0f32..3.0, 5 * BLOCK * 4),
            x in proptest::collection::vec(-3.0f32..3.0, 5 * BLOCK),
        ) {
            let rows: Vec<Vec<Q8Block>> = values.chunks(5 * BLOCK).map(blocks).collect();
            let xq = blocks(&x);
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &xq);
            for (r, row) in rows.iter().enumerate() {
                let mut w = vec![0f32; 5 * BLOCK];
                let mut xs = vec![0f32; 5 * BLOCK];
                dequantize_into(row, &mut w);
                dequantize_into(&xq, &mut xs);
                let exact: f32 = w.iter().zip(&xs).map(|(a, b)| a * b).sum();
                let tol = 1e-3 * (1.0 + exact.abs());
                prop_assert!((got[r] - exact).abs() < tol, "{} vs {}", got[r], exact);
                prop_assert!((dot(row, &xq) - exact).abs() < tol);
                prop_assert!((dot_scalar(row, &xq) - exact).abs() < tol);
            }
        }
    }

    #[test]
    fn quantization_round_trips_within_half_a_step() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 30.0) / 7.0).collect();
        let q = blocks(&x);
        let mut back = vec![0f32; 64];
        dequantize_into(&q, &mut back);
        for (b, (a, v)) in q.iter().flat_map(|b| [b; BLOCK]).zip(back.iter().zip(&x)) {
            assert!((a - v).abs() <= b.d / 2.0 + 1e-6);
        }
        let zeros = blocks(&[0.0; 32]);
        assert_eq!(zeros[0], Q8Block::default());
    }
}
