//! Causal attention over the KV cache, for a prompt chunk or one decoding step.
//!
//! At 800 prompt tokens attention is an eighth of the arithmetic but was half the time:
//! one scalar dot product per (query, key), a fresh score vector per query and a scalar
//! `exp`. The AVX2 path here scores eight keys at once against a query held in registers
//! (eight FMA chains, reduced by a transpose of `hadd`s), takes the softmax with a
//! polynomial `exp` eight lanes at a time, and accumulates the values in registers, with
//! one scratch buffer per worker.
//!
//! Every (query, head) is computed on its own, in the same order whatever the chunk it
//! arrived in and whatever the worker: key `j` always lands in lane `j % 8`, and the tail
//! past the last key is padded with zero keys (scores masked out), never a different
//! code path. The prefix cache then changes what is computed, never the numbers.

use rayon::prelude::*;

/// Shapes of one attention call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// Positions each KV head's buffer has room for (the stride between KV heads).
    pub(crate) capacity: usize,
    /// Position of the first query.
    pub(crate) pos: usize,
    /// Queries (tokens) in this call.
    pub(crate) seq: usize,
    pub(crate) n_head: usize,
    pub(crate) n_kv: usize,
    pub(crate) head_dim: usize,
}

/// Causal attention of `seq` queries at positions `pos..` over the cache of one layer.
/// `q` is `[head][token][dim]`, `keys` and `values` `[kv head][position][dim]`; the
/// result is `[token][head · dim]`.
pub(crate) fn attend(q: &[f32], keys: &[f32], values: &[f32], s: Shape) -> Vec<f32> {
    let hd = s.head_dim;
    let n_rep = s.n_head / s.n_kv;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; s.seq * s.n_head * hd];
    out.par_chunks_mut(hd)
        .enumerate()
        .for_each_init(Vec::new, |scores, (i, o)| {
            let (t, h) = (i / s.n_head, i % s.n_head);
            let g = h / n_rep;
            let q = &q[(h * s.seq + t) * hd..][..hd];
            let k = &keys[g * s.capacity * hd..];
            let v = &values[g * s.capacity * hd..];
            let n = s.pos + t + 1;
            one_query(q, &k[..n * hd], &v[..n * hd], scale, scores, o);
        });
    out
}

/// `o = softmax(q·Kᵀ · scale) · V` for one query over `keys.len() / o.len()` positions.
pub(crate) fn one_query(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    scale: f32,
    scores: &mut Vec<f32>,
    o: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = crate::quant::avx2()
        && o.len().is_multiple_of(8)
    {
        simd.vectorize(|| avx2::one_query(simd, q, keys, values, scale, scores, o));
        return;
    }
    one_query_scalar(q, keys, values, scale, scores, o);
}

/// The portable path (and the reference the AVX2 path is tested against).
pub(crate) fn one_query_scalar(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    scale: f32,
    scores: &mut Vec<f32>,
    o: &mut [f32],
) {
    let hd = o.len();
    scores.clear();
    scores.extend(
        keys.chunks_exact(hd)
            .map(|k| q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale),
    );
    let max = scores.iter().fold(f32::NEG_INFINITY, |m, s| m.max(*s));
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    o.fill(0.0);
    for (p, v) in scores.iter().zip(values.chunks_exact(hd)) {
        for (o, v) in o.iter_mut().zip(v) {
            *o += p * v;
        }
    }
    let inv = 1.0 / sum;
    o.iter_mut().for_each(|o| *o *= inv);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! Written without closures, as the matmul kernels: a closure inside `vectorize`
    //! would be compiled without AVX2.

    use pulp::bytemuck::cast;
    use pulp::x86::V3;
    use std::arch::x86_64::__m256;

    #[inline(always)]
    fn load(simd: V3, x: &[f32]) -> __m256 {
        let _ = simd;
        let mut a = [0f32; 8];
        a.copy_from_slice(&x[..8]);
        cast(a)
    }

    #[inline(always)]
    fn store(x: __m256, out: &mut [f32]) {
        let a: [f32; 8] = cast(x);
        out[..8].copy_from_slice(&a);
    }

    /// Lane `i` of the result is the sum of the lanes of `a[i]`.
    #[inline(always)]
    fn transpose_sum(simd: V3, a: [__m256; 8]) -> __m256 {
        let x = simd.avx;
        let h01 = x._mm256_hadd_ps(a[0], a[1]);
        let h23 = x._mm256_hadd_ps(a[2], a[3]);
        let h45 = x._mm256_hadd_ps(a[4], a[5]);
        let h67 = x._mm256_hadd_ps(a[6], a[7]);
        let lo = x._mm256_hadd_ps(h01, h23);
        let hi = x._mm256_hadd_ps(h45, h67);
        x._mm256_add_ps(
            x._mm256_permute2f128_ps::<0x20>(lo, hi),
            x._mm256_permute2f128_ps::<0x31>(lo, hi),
        )
    }

    /// `exp` of eight lanes (Cephes' polynomial, as in avx_mathfun; relative error about
    /// 2e-7). Inputs below -87.3 give 0.
    #[inline(always)]
    fn exp(simd: V3, x: __m256) -> __m256 {
        let (a, a2, f) = (simd.avx, simd.avx2, simd.fma);
        let c = |v: f32| a._mm256_set1_ps(v);
        let x = a._mm256_min_ps(x, c(88.376_26));
        let x = a._mm256_max_ps(x, c(-88.376_26));
        let fx = a._mm256_floor_ps(f._mm256_fmadd_ps(x, c(std::f32::consts::LOG2_E), c(0.5)));
        let x = f._mm256_fnmadd_ps(fx, c(0.693_359_4), x);
        let x = f._mm256_fnmadd_ps(fx, c(-2.121_944_4e-4), x);
        let mut y = c(1.987_569_1e-4);
        for k in [
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ] {
            y = f._mm256_fmadd_ps(y, x, c(k));
        }
        let xx = a._mm256_mul_ps(x, x);
        y = f._mm256_fmadd_ps(y, xx, a._mm256_add_ps(x, c(1.0)));
        let n = a._mm256_cvttps_epi32(fx);
        let n = a2._mm256_add_epi32(n, a._mm256_set1_epi32(0x7f));
        let n = a2._mm256_max_epi32(n, a._mm256_setzero_si256());
        let pow2 = a._mm256_castsi256_ps(a2._mm256_slli_epi32::<23>(n));
        a._mm256_mul_ps(y, pow2)
    }

    #[inline(always)]
    pub(super) fn one_query(
        simd: V3,
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        scale: f32,
        scores: &mut Vec<f32>,
        o: &mut [f32],
    ) {
        let (a, f) = (simd.avx, simd.fma);
        let hd = o.len();
        let n = keys.len() / hd;
        let padded = n.div_ceil(8) * 8;
        scores.clear();
        scores.resize(padded + 8 * hd, 0.0);
        let (scores, tail) = scores.split_at_mut(padded);
        let zero = a._mm256_setzero_ps();
        let scale_v = a._mm256_set1_ps(scale);
        let mut max_v = a._mm256_set1_ps(f32::NEG_INFINITY);
        for (block, out) in scores.chunks_exact_mut(8).enumerate() {
            let first = block * 8;
            // The last block's missing keys are zeros (masked below), so every key is
            // scored by the same instructions in the same lane.
            let k: &[f32] = if first + 8 <= n {
                &keys[first * hd..(first + 8) * hd]
            } else {
                let have = (n - first) * hd;
                tail[..have].copy_from_slice(&keys[first * hd..]);
                tail[have..].fill(0.0);
                &*tail
            };
            let mut acc = [zero; 8];
            for d in (0..hd).step_by(8) {
                let qv = load(simd, &q[d..]);
                for (s, acc) in acc.iter_mut().enumerate() {
                    *acc = f._mm256_fmadd_ps(qv, load(simd, &k[s * hd + d..]), *acc);
                }
            }
            let s = a._mm256_mul_ps(transpose_sum(simd, acc), scale_v);
            store(s, out);
            if first + 8 > n {
                out[n - first..].fill(f32::NEG_INFINITY);
            }
            max_v = a._mm256_max_ps(max_v, load(simd, out));
        }
        let lanes: [f32; 8] = cast(max_v);
        let max = lanes.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
        let max_v = a._mm256_set1_ps(max);
        let mut sum_v = zero;
        for (block, out) in scores.chunks_exact_mut(8).enumerate() {
            let mut p = exp(simd, a._mm256_sub_ps(load(simd, out), max_v));
            if block * 8 + 8 > n {
                let mut lanes: [f32; 8] = cast(p);
                lanes[n - block * 8..].fill(0.0);
                p = cast(lanes);
            }
            sum_v = a._mm256_add_ps(sum_v, p);
            store(p, out);
        }
        let lanes: [f32; 8] = cast(sum_v);
        let inv = a._mm256_set1_ps(1.0 / lanes.iter().sum::<f32>());
        let scores = &scores[..n];
        let mut d = 0;
        while d + 64 <= hd {
            let mut acc = [zero; 8];
            for (p, v) in scores.iter().zip(values.chunks_exact(hd)) {
                let p = a._mm256_set1_ps(*p);
                for (i, acc) in acc.iter_mut().enumerate() {
                    *acc = f._mm256_fmadd_ps(p, load(simd, &v[d + 8 * i..]), *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                store(a._mm256_mul_ps(*acc, inv), &mut o[d + 8 * i..]);
            }
            d += 64;
        }
        while d < hd {
            let mut acc = zero;
            for (p, v) in scores.iter().zip(values.chunks_exact(hd)) {
                acc = f._mm256_fmadd_ps(a._mm256_set1_ps(*p), load(simd, &v[d..]), acc);
            }
            store(a._mm256_mul_ps(acc, inv), &mut o[d..]);
            d += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed);
                (x >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
            })
            .collect()
    }

    proptest! {
        /// The vectorised path agrees with plain arithmetic for any key count and head
        /// width the models use (including a tail of keys past the last full eight).
        #[test]
        fn vectorised_attention_matches_the_scalar_reference(
            n in 1usize..70, hd_eighths in 1usize..18, seed in any::<u32>()
        ) {
            let hd = hd_eighths * 8;
            let q = values(hd, seed);
            let k = values(n * hd, seed ^ 1);
            let v = values(n * hd, seed ^ 2);
            let scale = 1.0 / (hd as f32).sqrt();
            let (mut a, mut b) = (vec![0f32; hd], vec![0f32; hd]);
            one_query(&q, &k, &v, scale, &mut Vec::new(), &mut a);
            one_query_scalar(&q, &k, &v, scale, &mut Vec::new(), &mut b);
            for (x, y) in a.iter().zip(&b) {
                prop_assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{x} vs {y}");
            }
        }
    }

    /// A query's result does not depend on the chunk it came in: the same numbers from a
    /// whole prompt at once and from the last token alone over the same cache.
    #[test]
    fn a_query_gives_the_same_bits_in_any_chunk() {
        let (n_head, n_kv, hd, seq) = (4, 2, 64, 13);
        let cap = 16;
        let keys = values(n_kv * cap * hd, 7);
        let vals = values(n_kv * cap * hd, 8);
        let q = values(n_head * seq * hd, 9);
        let shape = |pos, seq| Shape {
            capacity: cap,
            pos,
            seq,
            n_head,
            n_kv,
            head_dim: hd,
        };
        let all = attend(&q, &keys, &vals, shape(0, seq));
        // The last token's query alone, `[head][1][dim]`.
        let last: Vec<f32> = (0..n_head)
            .flat_map(|h| q[(h * seq + seq - 1) * hd..][..hd].to_vec())
            .collect();
        let one = attend(&last, &keys, &vals, shape(seq - 1, 1));
        assert_eq!(&all[(seq - 1) * n_head * hd..], &one[..]);
        assert!(one.iter().any(|x| *x != 0.0));
    }
}
