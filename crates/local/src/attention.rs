//! Causal attention over the KV cache, for a prompt chunk or one decoding step.
//!
//! At 800 prompt tokens attention is an eighth of the arithmetic but was half the time:
//! one scalar dot product per (query, key), a fresh score vector per query and a scalar
//! `exp`. The AVX2 path here scores eight keys at once against a query held in registers
//! (eight FMA chains, reduced by a transpose of `hadd`s), takes the softmax with a
//! polynomial `exp` eight lanes at a time, and accumulates the values in registers, with
//! one scratch buffer per worker.
//!
//! The query heads that share a KV head (grouped-query attention: SmolLM2-135M has three
//! per KV head) are computed together: a block of eight keys is scored against every
//! query of the group while it is in L1, and one pass over the values accumulates all of
//! their outputs. Decoding after a few thousand prompt tokens is bound by reading the KV
//! cache, and each query reading it on its own read it three times.
//!
//! Every query is still computed on its own numbers, in the same order whatever the
//! chunk it arrived in, the worker, and the other queries of its group: key `j` always
//! lands in lane `j % 8`, the tail past the last key is padded with zero keys (scores
//! masked out), never a different code path, and each output value is one chain of
//! fused multiply-adds over the positions in order (the group only interleaves the
//! chains). The prefix cache then changes what is computed, never the numbers.

use rayon::prelude::*;

/// Below this many (query, key) pairs in a call, attention runs on the calling worker:
/// a decoding step at short context is a few microseconds of work, about what handing
/// out three tasks and joining them costs.
const SERIAL_PAIRS: usize = 2048;

/// Most keys per task in the first phase of a split decoding step ([`split_step`]):
/// 2,000 positions of three KV groups make 24 tasks, which two workers share evenly.
/// Shorter contexts get chunks of a quarter of their keys (at least 32).
const SCORE_CHUNK: usize = 256;

/// From this many (query, key) pairs on, a decoding step is split over the workers
/// ([`split_step`]): a decoding team's helpers are waiting on the step anyway, and
/// run a task they find in microseconds.
const SPLIT_PAIRS: usize = 512;

/// Positions whose values are accumulated for every query of a group before moving on:
/// 32 positions of 64 values are 8 KB, which stay in L1 while each query passes over them.
const VALUE_BLOCK: usize = 32;

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
/// result is `[token][head · dim]`. The work is split over (token, KV head): the heads of
/// a group are adjacent in the result, so each task writes one contiguous run.
pub(crate) fn attend(q: &[f32], keys: &[f32], values: &[f32], s: Shape) -> Vec<f32> {
    let hd = s.head_dim;
    let n_rep = s.n_head / s.n_kv;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; s.seq * s.n_head * hd];
    let group = |scratch: &mut Vec<f32>, (i, o): (usize, &mut [f32])| {
        let (t, g) = (i / s.n_kv, i % s.n_kv);
        let n = s.pos + t + 1;
        let work = Group {
            q: &q[(g * n_rep * s.seq + t) * hd..],
            stride: s.seq * hd,
            keys: &keys[g * s.capacity * hd..][..n * hd],
            values: &values[g * s.capacity * hd..][..n * hd],
            scale,
            head_dim: hd,
        };
        group_query(&work, scratch, o);
    };
    let pairs = s.seq * (s.pos + s.seq) * s.n_head;
    if s.seq == 1 && pairs >= SPLIT_PAIRS && split_step(q, keys, values, s, &mut out) {
        // Done in two balanced phases.
    } else if pairs < SERIAL_PAIRS {
        let mut scratch = Vec::new();
        for item in out.chunks_mut(n_rep * hd).enumerate() {
            group(&mut scratch, item);
        }
    } else {
        out.par_chunks_mut(n_rep * hd)
            .enumerate()
            .for_each_init(Vec::new, group);
    }
    out
}

/// One decoding step (one query per head) in two parallel phases, each split evenly
/// over the workers: the scores of every KV group by chunks of up to [`SCORE_CHUNK`] keys,
/// then each group's softmax and values by halves of the output dims. Split over KV groups, as prompt
/// processing is, a step has three tasks (SmolLM2) for two workers and one of them
/// does two thirds of the work; after a few thousand tokens that is most of a step.
/// Every query gets [`group_query`]'s bits (same instructions, same order). False, with
/// nothing written, when the AVX2 path is not available.
#[cfg(target_arch = "x86_64")]
fn split_step(q: &[f32], keys: &[f32], values: &[f32], s: Shape, out: &mut [f32]) -> bool {
    let Some(simd) = crate::quant::avx2() else {
        return false;
    };
    let hd = s.head_dim;
    if s.seq != 1 || hd == 0 || !hd.is_multiple_of(8) {
        return false;
    }
    let rep = s.n_head / s.n_kv;
    let n = s.pos + 1;
    let padded = n.div_ceil(8) * 8;
    let scale = 1.0 / (hd as f32).sqrt();
    let kv = |g: usize| g * s.capacity * hd..g * s.capacity * hd + n * hd;
    let chunk = (n / 4).next_multiple_of(8).clamp(32, SCORE_CHUNK);
    // `[group][chunk][query][position in chunk]`: each task writes one contiguous run.
    let mut scores = vec![0f32; s.n_kv * rep * padded];
    scores
        .par_chunks_mut(rep * padded)
        .enumerate()
        .flat_map(|(g, sc)| {
            sc.par_chunks_mut(rep * chunk)
                .enumerate()
                .map(move |(c, sc)| (g, c, sc))
        })
        .for_each_init(Vec::new, |tail, (g, c, sc)| {
            let work = Group {
                q: &q[g * rep * hd..],
                stride: hd,
                keys: &keys[kv(g)],
                values: &values[kv(g)],
                scale,
                head_dim: hd,
            };
            let first_block = c * chunk / 8;
            simd.vectorize(|| avx2::score_chunk(simd, &work, rep, first_block, tail, sc));
        });
    // Each group's outputs in halves of their dims: the values are read once, and
    // three groups make six even tasks.
    let width = if hd.is_multiple_of(16) { hd / 2 } else { hd };
    let parts = hd / width;
    let halves: Vec<Vec<f32>> = (0..s.n_kv * parts)
        .into_par_iter()
        .map_init(Vec::new, |p, item| {
            let (g, part) = (item / parts, item % parts);
            let pieces: Vec<&[f32]> = scores[g * rep * padded..][..rep * padded]
                .chunks(rep * chunk)
                .collect();
            let values = &values[kv(g)];
            let mut o = vec![0f32; rep * width];
            let dims = (hd, part * width, rep);
            simd.vectorize(|| avx2::finish_dims(simd, &pieces, values, dims, p, &mut o));
            o
        })
        .collect();
    for (item, half) in halves.iter().enumerate() {
        let (g, part) = (item / parts, item % parts);
        for (r, half) in half.chunks_exact(width).enumerate() {
            out[(g * rep + r) * hd + part * width..][..width].copy_from_slice(half);
        }
    }
    true
}

#[cfg(not(target_arch = "x86_64"))]
fn split_step(_: &[f32], _: &[f32], _: &[f32], _: Shape, _: &mut [f32]) -> bool {
    false
}

/// `o = softmax(q·Kᵀ · scale) · V` for one query over `keys.len() / o.len()` positions.
#[cfg(test)]
pub(crate) fn one_query(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    scale: f32,
    scratch: &mut Vec<f32>,
    o: &mut [f32],
) {
    let group = Group {
        q,
        stride: o.len(),
        keys,
        values,
        scale,
        head_dim: o.len(),
    };
    group_query(&group, scratch, o);
}

/// The queries of one KV group at one position, over the keys and values they see.
pub(crate) struct Group<'a> {
    /// Query `r` is `q[r · stride..][..head_dim]`.
    pub(crate) q: &'a [f32],
    pub(crate) stride: usize,
    /// `[position][dim]`, as many positions in both.
    pub(crate) keys: &'a [f32],
    pub(crate) values: &'a [f32],
    pub(crate) scale: f32,
    pub(crate) head_dim: usize,
}

/// `o[r] = softmax(q[r]·Kᵀ · scale) · V` for the `o.len() / head_dim` queries of a
/// group, each with the numbers it gets on its own.
pub(crate) fn group_query(g: &Group<'_>, scratch: &mut Vec<f32>, o: &mut [f32]) {
    let hd = g.head_dim;
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = crate::quant::avx2()
        && hd.is_multiple_of(8)
    {
        simd.vectorize(|| avx2::group(simd, g, scratch, o));
        return;
    }
    for (r, o) in o.chunks_exact_mut(hd).enumerate() {
        let q = &g.q[r * g.stride..][..hd];
        one_query_scalar(q, g.keys, g.values, g.scale, scratch, o);
    }
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

    /// Each query of the group gets exactly the instructions, in the same order, that it
    /// gets alone: its score chains, its running max block by block, its softmax, and
    /// one FMA chain per output value over the positions in order. Only the loops over
    /// queries sit inside the loops over blocks of keys and values.
    #[inline(always)]
    pub(super) fn group(simd: V3, g: &super::Group<'_>, scratch: &mut Vec<f32>, o: &mut [f32]) {
        let a = simd.avx;
        let hd = g.head_dim;
        let rep = o.len() / hd;
        let (keys, values) = (g.keys, g.values);
        let n = keys.len() / hd;
        let padded = n.div_ceil(8) * 8;
        scratch.clear();
        scratch.resize(rep * padded + 8 * hd + rep, 0.0);
        let (scores, rest) = scratch.split_at_mut(rep * padded);
        let (tail, sums) = rest.split_at_mut(8 * hd);
        let zero = a._mm256_setzero_ps();
        let scale_v = a._mm256_set1_ps(g.scale);
        for block in 0..padded / 8 {
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
            for r in 0..rep {
                let q = &g.q[r * g.stride..][..hd];
                let out = &mut scores[r * padded + first..][..8];
                store(score8(simd, q, k, scale_v), out);
                if first + 8 > n {
                    out[n - first..].fill(f32::NEG_INFINITY);
                }
            }
        }
        for (scores, sum) in scores.chunks_exact_mut(padded).zip(sums.iter_mut()) {
            let mut max_v = a._mm256_set1_ps(f32::NEG_INFINITY);
            for out in scores.chunks_exact(8) {
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
            *sum = lanes.iter().sum::<f32>();
        }
        // `o` holds the running sums between blocks of positions: storing an f32
        // accumulator and loading it back leaves its bits alone.
        o.fill(0.0);
        for start in (0..n).step_by(super::VALUE_BLOCK) {
            let end = (start + super::VALUE_BLOCK).min(n);
            let v = &values[start * hd..end * hd];
            for (r, o) in o.chunks_exact_mut(hd).enumerate() {
                accumulate(
                    simd,
                    &scores[r * padded + start..r * padded + end],
                    v,
                    hd,
                    0,
                    o,
                );
            }
        }
        for (o, sum) in o.chunks_exact_mut(hd).zip(sums.iter()) {
            normalize(simd, o, *sum);
        }
    }

    /// `o += Σ p[i] · v[i][from..]` over the positions of `p` (`v` their values,
    /// `[position][dim]`, `o` one query's running sums for dims `from..from + o.len()`):
    /// one FMA chain per output value, positions in order, eight, four or one vector
    /// of them interleaved. The three blocks are written out: as one const-generic
    /// function (same operations) decoding after a long prompt measured 3-9% slower.
    #[inline(always)]
    fn accumulate(simd: V3, p: &[f32], v: &[f32], hd: usize, from: usize, o: &mut [f32]) {
        let (a, f) = (simd.avx, simd.fma);
        let width = o.len();
        let zero = a._mm256_setzero_ps();
        let mut d = 0;
        while d + 64 <= width {
            let mut acc = [zero; 8];
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = load(simd, &o[d + 8 * i..]);
            }
            for (p, v) in p.iter().zip(v.chunks_exact(hd)) {
                let p = a._mm256_set1_ps(*p);
                for (i, acc) in acc.iter_mut().enumerate() {
                    *acc = f._mm256_fmadd_ps(p, load(simd, &v[from + d + 8 * i..]), *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                store(*acc, &mut o[d + 8 * i..]);
            }
            d += 64;
        }
        while d + 32 <= width {
            let mut acc = [zero; 4];
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = load(simd, &o[d + 8 * i..]);
            }
            for (p, v) in p.iter().zip(v.chunks_exact(hd)) {
                let p = a._mm256_set1_ps(*p);
                for (i, acc) in acc.iter_mut().enumerate() {
                    *acc = f._mm256_fmadd_ps(p, load(simd, &v[from + d + 8 * i..]), *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                store(*acc, &mut o[d + 8 * i..]);
            }
            d += 32;
        }
        while d < width {
            let mut acc = load(simd, &o[d..]);
            for (p, v) in p.iter().zip(v.chunks_exact(hd)) {
                acc = f._mm256_fmadd_ps(a._mm256_set1_ps(*p), load(simd, &v[from + d..]), acc);
            }
            store(acc, &mut o[d..]);
            d += 8;
        }
    }

    /// `o /= sum`, as one multiplication by the reciprocal.
    #[inline(always)]
    fn normalize(simd: V3, o: &mut [f32], sum: f32) {
        let a = simd.avx;
        let inv = a._mm256_set1_ps(1.0 / sum);
        for d in (0..o.len()).step_by(8) {
            store(a._mm256_mul_ps(load(simd, &o[d..]), inv), &mut o[d..]);
        }
    }

    /// Eight keys (`k`, `[key][dim]`) scored against one query: lane `i` is key `i`'s
    /// scaled dot product, eight FMA chains reduced by [`transpose_sum`].
    #[inline(always)]
    fn score8(simd: V3, q: &[f32], k: &[f32], scale: __m256) -> __m256 {
        let (a, f) = (simd.avx, simd.fma);
        let hd = q.len();
        let mut acc = [a._mm256_setzero_ps(); 8];
        for d in (0..hd).step_by(8) {
            let qv = load(simd, &q[d..]);
            for (s, acc) in acc.iter_mut().enumerate() {
                *acc = f._mm256_fmadd_ps(qv, load(simd, &k[s * hd + d..]), *acc);
            }
        }
        a._mm256_mul_ps(transpose_sum(simd, acc), scale)
    }

    /// Phase one of a split decoding step: the scores of one KV group's queries over key
    /// blocks `first_block..`, as many as `out` holds (`out` is `[query][position]`,
    /// `out.len() / rep` positions each), computed as [`group`] computes them.
    #[inline(always)]
    pub(super) fn score_chunk(
        simd: V3,
        g: &super::Group<'_>,
        rep: usize,
        first_block: usize,
        tail: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let hd = g.head_dim;
        let n = g.keys.len() / hd;
        let len = out.len() / rep;
        tail.clear();
        tail.resize(8 * hd, 0.0);
        let scale_v = simd.avx._mm256_set1_ps(g.scale);
        for b in 0..len / 8 {
            let first = (first_block + b) * 8;
            prefetch(simd, g.keys, first * hd, 8 * hd);
            let k: &[f32] = if first + 8 <= n {
                &g.keys[first * hd..(first + 8) * hd]
            } else {
                let have = (n - first) * hd;
                tail[..have].copy_from_slice(&g.keys[first * hd..]);
                tail[have..].fill(0.0);
                &tail[..]
            };
            for r in 0..rep {
                let q = &g.q[r * g.stride..][..hd];
                let scores = &mut out[r * len + b * 8..][..8];
                store(score8(simd, q, k, scale_v), scores);
                if first + 8 > n {
                    scores[n - first..].fill(f32::NEG_INFINITY);
                }
            }
        }
    }

    /// Bytes this far ahead of the keys or values being read are requested now: after a
    /// few thousand positions the KV cache no longer fits the caches, and a decoding step
    /// waited on it.
    const AHEAD: usize = 4096;

    /// Asks for the cache lines of `x[at..at + len]`, [`AHEAD`] bytes further on (a hint:
    /// nothing is read, and addresses past the end are harmless).
    #[inline(always)]
    fn prefetch(simd: V3, x: &[f32], at: usize, len: usize) {
        let base = x.as_ptr().cast::<i8>().wrapping_add(4 * at + AHEAD);
        for line in (0..4 * len).step_by(64) {
            simd.sse
                ._mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(base.wrapping_add(line));
        }
    }

    /// Phase two of a split decoding step, for the `rep` queries of one KV group and
    /// output dims `from..from + width` (`o` is `[query][width]`): each query's softmax over
    /// its scores in `pieces` (`pieces[c]` is chunk `c`'s `[query][position]`), then its
    /// outputs, with [`group`]'s instructions in [`group`]'s order for every value.
    #[inline(always)]
    pub(super) fn finish_dims(
        simd: V3,
        pieces: &[&[f32]],
        values: &[f32],
        (hd, from, rep): (usize, usize, usize),
        p: &mut Vec<f32>,
        o: &mut [f32],
    ) {
        let a = simd.avx;
        let width = o.len() / rep.max(1);
        let n = values.len() / hd;
        let padded = n.div_ceil(8) * 8;
        p.clear();
        p.resize(rep * padded + rep, 0.0);
        let (p, sums) = p.split_at_mut(rep * padded);
        for (r, (p, sum)) in p.chunks_exact_mut(padded).zip(sums.iter_mut()).enumerate() {
            let mut max_v = a._mm256_set1_ps(f32::NEG_INFINITY);
            for piece in pieces {
                let len = piece.len() / rep;
                for s in piece[r * len..][..len].chunks_exact(8) {
                    max_v = a._mm256_max_ps(max_v, load(simd, s));
                }
            }
            let lanes: [f32; 8] = cast(max_v);
            let max = lanes.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
            let max_v = a._mm256_set1_ps(max);
            let mut sum_v = a._mm256_setzero_ps();
            let mut block = 0;
            for piece in pieces {
                let len = piece.len() / rep;
                for s in piece[r * len..][..len].chunks_exact(8) {
                    let mut e = exp(simd, a._mm256_sub_ps(load(simd, s), max_v));
                    if block * 8 + 8 > n {
                        let mut lanes: [f32; 8] = cast(e);
                        lanes[n - block * 8..].fill(0.0);
                        e = cast(lanes);
                    }
                    sum_v = a._mm256_add_ps(sum_v, e);
                    store(e, &mut p[block * 8..]);
                    block += 1;
                }
            }
            let lanes: [f32; 8] = cast(sum_v);
            *sum = lanes.iter().sum::<f32>();
        }
        o.fill(0.0);
        for start in (0..n).step_by(super::VALUE_BLOCK) {
            let end = (start + super::VALUE_BLOCK).min(n);
            let v = &values[start * hd..end * hd];
            for row in 0..end - start {
                prefetch(simd, v, row * hd + from, width);
            }
            for (r, o) in o.chunks_exact_mut(width).enumerate() {
                accumulate(
                    simd,
                    &p[r * padded + start..r * padded + end],
                    v,
                    hd,
                    from,
                    o,
                );
            }
        }
        for (o, sum) in o.chunks_exact_mut(width).zip(sums.iter()) {
            normalize(simd, o, *sum);
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

        /// The queries of a group computed together get the bits each gets alone, for
        /// any group size, key count (past a block of values too) and head width.
        #[test]
        fn a_grouped_query_gives_the_same_bits_as_alone(
            rep in 1usize..5, n in 1usize..80, hd_eighths in 1usize..18, gap in 0usize..3,
            seed in any::<u32>()
        ) {
            let hd = hd_eighths * 8;
            let stride = hd * (1 + gap);
            let q = values(rep * stride, seed);
            let k = values(n * hd, seed ^ 1);
            let v = values(n * hd, seed ^ 2);
            let scale = 1.0 / (hd as f32).sqrt();
            let group = Group { q: &q, stride, keys: &k, values: &v, scale, head_dim: hd };
            let mut together = vec![0f32; rep * hd];
            group_query(&group, &mut Vec::new(), &mut together);
            for (r, together) in together.chunks_exact(hd).enumerate() {
                let mut alone = vec![0f32; hd];
                one_query(&q[r * stride..][..hd], &k, &v, scale, &mut Vec::new(), &mut alone);
                let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(together), bits(&alone));
            }
        }
    }

    proptest! {
        /// A decoding step split in two phases (scores by chunks of keys, then each
        /// query on its own) gives every query the bits of its group computed whole, for
        /// any group shape, head width and position (across chunks of keys too).
        #[test]
        fn a_split_decoding_step_gives_each_query_its_bits(
            n_kv in 1usize..4, rep in 1usize..4, hd_eighths in 1usize..18,
            pos in 0usize..700, room in 0usize..9, seed in any::<u32>()
        ) {
            let hd = hd_eighths * 8;
            let n_head = n_kv * rep;
            let capacity = pos + 1 + room;
            let keys = values(n_kv * capacity * hd, seed ^ 1);
            let vals = values(n_kv * capacity * hd, seed ^ 2);
            let q = values(n_head * hd, seed);
            let shape = Shape { capacity, pos, seq: 1, n_head, n_kv, head_dim: hd };
            let mut split = vec![0f32; n_head * hd];
            let done = split_step(&q, &keys, &vals, shape, &mut split);
            if !done {
                // No AVX2 here: nothing to compare.
                return Ok(());
            }
            let n = pos + 1;
            for g in 0..n_kv {
                let group = Group {
                    q: &q[g * rep * hd..],
                    stride: hd,
                    keys: &keys[g * capacity * hd..][..n * hd],
                    values: &vals[g * capacity * hd..][..n * hd],
                    scale: 1.0 / (hd as f32).sqrt(),
                    head_dim: hd,
                };
                let mut whole = vec![0f32; rep * hd];
                group_query(&group, &mut Vec::new(), &mut whole);
                let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&split[g * rep * hd..][..rep * hd]), bits(&whole), "group {}", g);
            }
        }
    }

    /// A query's result does not depend on the chunk it came in: the same numbers from a
    /// whole prompt at once (split over workers) and from the last token alone over the
    /// same cache (on the calling thread).
    #[test]
    fn a_query_gives_the_same_bits_in_any_chunk() {
        let (n_head, n_kv, hd, seq) = (6, 2, 64, 60);
        let cap = 64;
        assert!(seq * seq * n_head >= SERIAL_PAIRS && seq * n_head < SERIAL_PAIRS);
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
