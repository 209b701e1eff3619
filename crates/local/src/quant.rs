//! Weight blocks as stored in the GGUF file (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K) and their dot
//! products with 8-bit activations, read in place: no weight is ever expanded to f32.
//!
//! Activations are quantized per 32 values ([`XBlock`]: f32 scale, the scaled sum of the
//! block, 32 signed bytes), as llama.cpp's Q8_1. A weight block `w = d·q + m` (q unsigned,
//! 0..15 for the 4-bit types) then contributes `d·dx·Σ q·xq + m·sx`: one integer dot
//! product (`maddubs`, 32 products in one instruction) and two scalar multiply-adds.
//!
//! Every kernel computes one weight row against up to [`TILE`] activation rows, so a
//! 4-bit block is unpacked once and used for every token of a prompt chunk: the same code
//! serves decoding (one row, memory-bound) and prompt processing (compute-bound). The AVX2
//! path is reached through `pulp`'s safe intrinsics; other CPUs use the scalar loop, which
//! is also the reference the tests compare the AVX2 path against.
//!
//! f16 scales go through a 64 Ki-entry table: pulp exposes no safe F16C conversion, and a
//! table lookup (hot in L1: a model uses few distinct scales per row) costs one load.

#[cfg(target_arch = "x86_64")]
use pulp::x86::V3;
use std::sync::OnceLock;

/// Values per activation block (and per Q4_0/Q4_1/Q8_0 block).
pub(crate) const BLOCK: usize = 32;

/// Values per Q4_K and Q6_K super-block.
pub(crate) const SUPER: usize = 256;

/// Most activation rows one kernel call handles.
pub(crate) const TILE: usize = 8;

/// 32 activations: value `i` is `d * qs[i]`; `s` is `d * Σ qs`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct XBlock {
    pub(crate) d: f32,
    pub(crate) s: f32,
    pub(crate) qs: [i8; BLOCK],
}

/// The weight formats read in place, named as in GGUF (`QuantKind` outside the crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    #[allow(missing_docs)]
    Q4_0,
    #[allow(missing_docs)]
    Q4_1,
    #[allow(missing_docs)]
    Q8_0,
    #[allow(missing_docs)]
    Q4K,
    #[allow(missing_docs)]
    Q6K,
}

impl Kind {
    /// Values per block.
    pub fn block_values(self) -> usize {
        match self {
            Kind::Q4_0 | Kind::Q4_1 | Kind::Q8_0 => BLOCK,
            Kind::Q4K | Kind::Q6K => SUPER,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            Kind::Q4_0 => 18,
            Kind::Q4_1 => 20,
            Kind::Q8_0 => 34,
            Kind::Q4K => 144,
            Kind::Q6K => 210,
        }
    }

    /// Bytes of a row of `cols` values (`cols` a multiple of [`Kind::block_values`]).
    pub(crate) fn row_bytes(self, cols: usize) -> usize {
        cols / self.block_values() * self.block_bytes()
    }
}

fn f16_table() -> &'static [f32] {
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| half::f16::from_bits(bits).to_f32())
            .collect()
    })
}

#[inline(always)]
fn f16_at(table: &[f32], bytes: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    table[usize::from(bits)]
}

/// The f16 at `bytes[at..at + 2]` as f32 by bit arithmetic: exponent and mantissa moved
/// to f32's places, then rebiased by a multiplication by 2^112, which is exact for every
/// finite f16 (subnormals included). The kernels use this rather than the table: the
/// 256 KiB table lives in L2, and a dependent L2 load per block stalled the decoding loop.
/// Infinities and NaNs (never in a real model) take the table.
#[inline(always)]
fn f16_at_fast(table: &[f32], bytes: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    if bits & 0x7C00 == 0x7C00 {
        return table[usize::from(bits)];
    }
    let magnitude = f32::from_bits(u32::from(bits & 0x7FFF) << 13) * f32::from_bits(0x7780_0000);
    f32::from_bits(magnitude.to_bits() | (u32::from(bits & 0x8000) << 16))
}

/// `v.round().clamp(-127.0, 127.0) as i8` (halves away from zero, NaN to 0) without
/// `round`, which the baseline x86-64 target compiles to a call into libm per value: the
/// fraction left by truncation is exact, so comparing it with ±0.5 rounds the same way.
#[inline(always)]
fn round_to_i8(v: f32) -> i8 {
    let c = v.clamp(-127.0, 127.0);
    let t = c as i32;
    let frac = c - t as f32;
    (t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)) as i8
}

/// Quantizes `x` into `out` (`out.len() * BLOCK == x.len()`), rounding to nearest:
/// eight values at a time with AVX2 (the same numbers, see [`quantize_into_scalar`]).
pub(crate) fn quantize_into(x: &[f32], out: &mut [XBlock]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2() {
        simd.vectorize(avx2_kernels::QuantizeInto { simd, x, out });
        return;
    }
    quantize_into_scalar(x, out);
}

/// [`quantize_into`] a value at a time (and the AVX2 path's reference and fallback).
pub(crate) fn quantize_into_scalar(x: &[f32], out: &mut [XBlock]) {
    for (block, x) in out.iter_mut().zip(x.chunks_exact(BLOCK)) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        block.d = d;
        let mut sum = 0i32;
        for (q, v) in block.qs.iter_mut().zip(x) {
            *q = round_to_i8(v * inv);
            sum += i32::from(*q);
        }
        block.s = d * sum as f32;
    }
}

/// Q4_K's 6-bit scale and min of sub-block `j` (0..8), as ggml packs them.
#[inline(always)]
fn k4_scale_min(scales: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        (
            (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4),
            (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
        )
    }
}

/// Writes the values of one row (`row` holds whole blocks of `kind`) into `out`.
pub(crate) fn dequantize_row(kind: Kind, row: &[u8], out: &mut [f32]) {
    let t = f16_table();
    let blocks = row
        .chunks_exact(kind.block_bytes())
        .zip(out.chunks_exact_mut(kind.block_values()));
    match kind {
        Kind::Q4_0 | Kind::Q4_1 => {
            for (b, out) in blocks {
                let d = f16_at(t, b, 0);
                let (m, qs) = match kind {
                    Kind::Q4_1 => (f16_at(t, b, 2), &b[4..20]),
                    _ => (-8.0 * d, &b[2..18]),
                };
                for (j, q) in qs.iter().enumerate() {
                    out[j] = d * f32::from(q & 0xF) + m;
                    out[j + 16] = d * f32::from(q >> 4) + m;
                }
            }
        }
        Kind::Q8_0 => {
            for (b, out) in blocks {
                let d = f16_at(t, b, 0);
                for (o, q) in out.iter_mut().zip(&b[2..34]) {
                    *o = d * f32::from(*q as i8);
                }
            }
        }
        Kind::Q4K => {
            for (b, out) in blocks {
                let (d, dmin) = (f16_at(t, b, 0), f16_at(t, b, 2));
                let (scales, qs) = (&b[4..16], &b[16..144]);
                for pair in 0..4 {
                    let q = &qs[32 * pair..32 * pair + 32];
                    for half in 0..2 {
                        let (sc, mn) = k4_scale_min(scales, 2 * pair + half);
                        let (dd, mm) = (d * f32::from(sc), dmin * f32::from(mn));
                        let out = &mut out[64 * pair + 32 * half..][..32];
                        for (o, q) in out.iter_mut().zip(q) {
                            let v = if half == 0 { q & 0xF } else { q >> 4 };
                            *o = dd * f32::from(v) - mm;
                        }
                    }
                }
            }
        }
        Kind::Q6K => {
            for (b, out) in blocks {
                let d = f16_at(t, b, 208);
                for (h, out) in out.chunks_exact_mut(128).enumerate() {
                    let (values, scales) = q6k_half(b, h);
                    for (g, out) in out.chunks_exact_mut(32).enumerate() {
                        for (l, o) in out.iter_mut().enumerate() {
                            let sc = f32::from(scales[2 * g + l / 16]);
                            *o = d * sc * f32::from(values[g][l]);
                        }
                    }
                }
            }
        }
    }
}

/// Half `h` (0 or 1, 128 values) of a Q6_K block: four groups of 32 signed 6-bit values in
/// order, and the eight scales of their 16-value halves.
#[inline(always)]
fn q6k_half(b: &[u8], h: usize) -> ([[i8; 32]; 4], [i8; 8]) {
    let ql = &b[64 * h..64 * h + 64];
    let qh = &b[128 + 32 * h..128 + 32 * h + 32];
    let mut v = [[0i8; 32]; 4];
    for l in 0..32 {
        let hi = qh[l];
        v[0][l] = ((ql[l] & 0xF) | ((hi & 3) << 4)) as i8 - 32;
        v[1][l] = ((ql[l + 32] & 0xF) | (((hi >> 2) & 3) << 4)) as i8 - 32;
        v[2][l] = ((ql[l] >> 4) | (((hi >> 4) & 3) << 4)) as i8 - 32;
        v[3][l] = ((ql[l + 32] >> 4) | (((hi >> 6) & 3) << 4)) as i8 - 32;
    }
    let mut scales = [0i8; 8];
    for (s, b) in scales.iter_mut().zip(&b[192 + 8 * h..200 + 8 * h]) {
        *s = *b as i8;
    }
    (v, scales)
}

/// The AVX2 kernels, if this CPU has them (checked once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2() -> Option<V3> {
    static V3_AVAILABLE: OnceLock<Option<V3>> = OnceLock::new();
    *V3_AVAILABLE.get_or_init(V3::try_new)
}

/// `out[t] = row · xs[t]` for every activation row in `xs` (at most [`TILE`]); `row` holds
/// whole blocks of `kind`, each `xs[t]` as many values in [`XBlock`]s.
pub(crate) fn dot_rows(kind: Kind, row: &[u8], xs: &[&[XBlock]], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2() {
        let op = avx2_kernels::DotRows {
            simd,
            kind,
            row,
            xs,
            out,
        };
        simd.vectorize(op);
        return;
    }
    dot_rows_scalar(kind, row, xs, out);
}

/// Block `j` of up to [`TILE`] activation rows side by side (lane `t` from row `t`): their
/// scales and sums, so a 4-bit kernel scales all of a tile's rows with one vector multiply
/// per weight block instead of one scalar multiply and broadcast per row.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lanes {
    pub(crate) d: [f32; TILE],
    pub(crate) s: [f32; TILE],
}

/// The [`Lanes`] of a tile of activation rows (each as many blocks as the first).
pub(crate) fn lanes(xs: &[&[XBlock]]) -> Vec<Lanes> {
    let blocks = xs.first().map_or(0, |x| x.len());
    let mut out = vec![Lanes::default(); blocks];
    for (t, x) in xs.iter().take(TILE).enumerate() {
        for (l, b) in out.iter_mut().zip(x.iter()) {
            l.d[t] = b.d;
            l.s[t] = b.s;
        }
    }
    out
}

/// [`dot_rows`] given the tile's [`lanes`] too (used by the Q4_0 and Q4_1 kernels, which
/// prompt processing spends its time in; the same numbers as [`dot_rows`]).
pub(crate) fn dot_rows_lanes(
    kind: Kind,
    row: &[u8],
    xs: &[&[XBlock]],
    lanes: &[Lanes],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2()
        && matches!(kind, Kind::Q4_0 | Kind::Q4_1)
    {
        let op = avx2_kernels::DotRowsLanes {
            simd,
            kind,
            row,
            xs,
            lanes,
            out,
        };
        simd.vectorize(op);
        return;
    }
    dot_rows(kind, row, xs, out);
}

/// `rows[r] · x` for four weight rows of `kind` and one activation row: decoding reads
/// four rows per call so their accumulator chains overlap and each activation block is
/// loaded once for all four.
pub(crate) fn dot_rows4(kind: Kind, rows: [&[u8]; 4], x: &[XBlock]) -> [f32; 4] {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = avx2() {
        return simd.vectorize(avx2_kernels::DotRows4 {
            simd,
            kind,
            rows,
            x,
        });
    }
    rows.map(|row| {
        let mut out = [0f32];
        dot_rows_scalar(kind, row, &[x], &mut out);
        out[0]
    })
}

/// The portable kernel (and the AVX2 kernel's reference in tests).
pub(crate) fn dot_rows_scalar(kind: Kind, row: &[u8], xs: &[&[XBlock]], out: &mut [f32]) {
    let mut w = vec![0i8; kind.block_values()];
    let t = f16_table();
    for o in out.iter_mut() {
        *o = 0.0;
    }
    let idot = |w: &[i8], x: &[i8]| -> i32 {
        w.iter()
            .zip(x)
            .map(|(a, b)| i32::from(*a) * i32::from(*b))
            .sum()
    };
    for (bi, b) in row.chunks_exact(kind.block_bytes()).enumerate() {
        match kind {
            Kind::Q4_0 | Kind::Q4_1 | Kind::Q8_0 => {
                let d = f16_at(t, b, 0);
                let m = match kind {
                    Kind::Q4_0 => -8.0 * d,
                    Kind::Q4_1 => f16_at(t, b, 2),
                    _ => 0.0,
                };
                match kind {
                    Kind::Q8_0 => w.iter_mut().zip(&b[2..34]).for_each(|(w, q)| *w = *q as i8),
                    _ => {
                        let qs = if kind == Kind::Q4_1 {
                            &b[4..20]
                        } else {
                            &b[2..18]
                        };
                        for (j, q) in qs.iter().enumerate() {
                            w[j] = (q & 0xF) as i8;
                            w[j + 16] = (q >> 4) as i8;
                        }
                    }
                }
                for (o, x) in out.iter_mut().zip(xs) {
                    let x = &x[bi];
                    *o += d * x.d * idot(&w, &x.qs) as f32 + m * x.s;
                }
            }
            Kind::Q4K => {
                let (d, dmin) = (f16_at(t, b, 0), f16_at(t, b, 2));
                for sub in 0..8 {
                    let (sc, mn) = k4_scale_min(&b[4..16], sub);
                    let q = &b[16 + 32 * (sub / 2)..][..32];
                    for (w, q) in w.iter_mut().zip(q) {
                        *w = if sub % 2 == 0 { q & 0xF } else { q >> 4 } as i8;
                    }
                    let (dd, mm) = (d * f32::from(sc), dmin * f32::from(mn));
                    for (o, x) in out.iter_mut().zip(xs) {
                        let x = &x[bi * 8 + sub];
                        *o += dd * x.d * idot(&w[..32], &x.qs) as f32 - mm * x.s;
                    }
                }
            }
            Kind::Q6K => {
                let d = f16_at(t, b, 208);
                for h in 0..2 {
                    let (values, scales) = q6k_half(b, h);
                    for (g, v) in values.iter().enumerate() {
                        let (s0, s1) = (f32::from(scales[2 * g]), f32::from(scales[2 * g + 1]));
                        for (o, x) in out.iter_mut().zip(xs) {
                            let x = &x[bi * 8 + h * 4 + g];
                            let lo = idot(&v[..16], &x.qs[..16]) as f32;
                            let hi = idot(&v[16..], &x.qs[16..]) as f32;
                            *o += d * x.d * (s0 * lo + s1 * hi);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_kernels {
    //! Written without closures: a closure inside `vectorize` would be compiled without
    //! AVX2 and every intrinsic in it would become a call.

    use super::{Kind, Lanes, TILE, XBlock, f16_at_fast as f16_at, f16_table, k4_scale_min};
    use pulp::bytemuck::cast;
    use pulp::x86::V3;
    use std::arch::x86_64::{__m128i, __m256, __m256i};

    #[inline(always)]
    fn load32(b: &[u8]) -> __m256i {
        let mut a = [0u8; 32];
        a.copy_from_slice(&b[..32]);
        cast(a)
    }

    #[inline(always)]
    fn load16(b: &[u8]) -> __m128i {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        cast(a)
    }

    /// Bytes this far ahead of the block being read are requested now: a decode step
    /// streams every weight once, and the hardware prefetcher alone left the loop
    /// waiting on loads.
    const AHEAD: usize = 4096;

    /// Asks for the cache line `AHEAD` bytes past `at` in `bytes` (a hint: no access is
    /// made, and an address past the end is harmless).
    #[inline(always)]
    fn prefetch(simd: V3, bytes: &[u8], at: usize) {
        let p = bytes.as_ptr().wrapping_add(at + AHEAD).cast::<i8>();
        simd.sse
            ._mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
    }

    /// 16 bytes of packed nibbles as 32 bytes: low nibbles first, then high ones. The
    /// bytes go to both halves (a broadcast load), the upper half is shifted by four,
    /// then one mask: two ALU instructions, where masking and shifting each half and
    /// joining them took four, one of them on the shuffle port the scale broadcasts
    /// need too.
    #[inline(always)]
    fn unpack_nibbles(simd: V3, q: __m128i) -> __m256i {
        let a2 = simd.avx2;
        let both = a2._mm256_broadcastsi128_si256(q);
        let shifted =
            a2._mm256_srlv_epi32(both, simd.avx._mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
        a2._mm256_and_si256(shifted, simd.avx._mm256_set1_epi8(0xF))
    }

    /// Eight i32 partial sums of `Σ w·x` for unsigned `w` (< 128) and signed `x`, as f32.
    #[inline(always)]
    fn udot(simd: V3, w: __m256i, x: __m256i) -> __m256 {
        let pairs = simd.avx2._mm256_maddubs_epi16(w, x);
        let quads = simd
            .avx2
            ._mm256_madd_epi16(pairs, simd.avx._mm256_set1_epi16(1));
        simd.avx._mm256_cvtepi32_ps(quads)
    }

    /// The same for signed `w` (not -128).
    #[inline(always)]
    fn sdot(simd: V3, w: __m256i, x: __m256i) -> __m256 {
        let abs_w = simd.avx2._mm256_sign_epi8(w, w);
        let signed_x = simd.avx2._mm256_sign_epi8(x, w);
        udot(simd, abs_w, signed_x)
    }

    /// Bits `shift..shift + 2` of every byte of `qh`, moved to bits 4..6.
    #[inline(always)]
    fn q6_high(simd: V3, qh: __m256i, m3: __m256i, shift: i32) -> __m256i {
        let s = match shift {
            0 => qh,
            2 => simd.avx2._mm256_srli_epi16::<2>(qh),
            4 => simd.avx2._mm256_srli_epi16::<4>(qh),
            _ => simd.avx2._mm256_srli_epi16::<6>(qh),
        };
        simd.avx2
            ._mm256_slli_epi16::<4>(simd.avx2._mm256_and_si256(s, m3))
    }

    #[inline(always)]
    fn hsum(simd: V3, v: __m256) -> f32 {
        let lanes: [f32; 8] = cast(v);
        let _ = simd;
        let mut s = 0f32;
        for l in lanes {
            s += l;
        }
        s
    }

    #[inline(always)]
    fn load8f(x: &[f32]) -> __m256 {
        let mut lanes = [0f32; 8];
        lanes.copy_from_slice(&x[..8]);
        cast(lanes)
    }

    /// Eight lanes of [`super::round_to_i8`]`(v · inv)` (finite `v`) as i32.
    #[inline(always)]
    fn round8(simd: V3, v: __m256, inv: __m256) -> __m256i {
        let (a, a2) = (simd.avx, simd.avx2);
        let c = a._mm256_min_ps(
            a._mm256_max_ps(a._mm256_mul_ps(v, inv), a._mm256_set1_ps(-127.0)),
            a._mm256_set1_ps(127.0),
        );
        let t = a._mm256_cvttps_epi32(c);
        let frac = a._mm256_sub_ps(c, a._mm256_cvtepi32_ps(t));
        let up = a._mm256_castps_si256(
            a._mm256_cmp_ps::<{ std::arch::x86_64::_CMP_GE_OQ }>(frac, a._mm256_set1_ps(0.5)),
        );
        let down = a._mm256_castps_si256(
            a._mm256_cmp_ps::<{ std::arch::x86_64::_CMP_LE_OQ }>(frac, a._mm256_set1_ps(-0.5)),
        );
        a2._mm256_add_epi32(a2._mm256_sub_epi32(t, up), down)
    }

    /// [`super::quantize_into`]'s arguments, for the same reason as [`DotRows`]. Done
    /// a value at a time, quantizing each projection's input was 1.5% of a decoding
    /// step, on one thread while the others waited.
    pub(super) struct QuantizeInto<'a> {
        pub(super) simd: V3,
        pub(super) x: &'a [f32],
        pub(super) out: &'a mut [XBlock],
    }

    impl pulp::NullaryFnOnce for QuantizeInto<'_> {
        type Output = ();

        /// Per block: the largest magnitude (exact in any order), then each value as
        /// [`super::round_to_i8`] rounds it (clamp, truncate, compare the exact
        /// fraction with ±0.5), and the integer sum. A block holding a NaN or an
        /// infinity goes to the scalar loop, whose `clamp` and `max` treat them their
        /// own way.
        #[inline(always)]
        fn call(self) {
            let (simd, out) = (self.simd, self.out);
            let (a, a2) = (simd.avx, simd.avx2);
            let abs_mask = a._mm256_castsi256_ps(a._mm256_set1_epi32(0x7FFF_FFFF));
            let order = a._mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            for (block, x) in out.iter_mut().zip(self.x.chunks_exact(super::BLOCK)) {
                let v = [
                    load8f(&x[..8]),
                    load8f(&x[8..16]),
                    load8f(&x[16..24]),
                    load8f(&x[24..32]),
                ];
                let mut amax = a._mm256_setzero_ps();
                let mut bad = a._mm256_setzero_ps();
                for v in v {
                    let m = a._mm256_and_ps(v, abs_mask);
                    amax = a._mm256_max_ps(m, amax);
                    // NaN or infinite: not below the largest finite f32.
                    bad = a._mm256_or_ps(
                        bad,
                        a._mm256_cmp_ps::<{ std::arch::x86_64::_CMP_NLT_UQ }>(
                            m,
                            a._mm256_set1_ps(f32::MAX),
                        ),
                    );
                }
                if a._mm256_movemask_ps(bad) != 0 {
                    super::quantize_into_scalar(x, std::slice::from_mut(block));
                    continue;
                }
                let lanes: [f32; 8] = cast(amax);
                let amax = lanes.iter().fold(0f32, |m, v| m.max(*v));
                let d = amax / 127.0;
                let inv = a._mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
                let q = [
                    round8(simd, v[0], inv),
                    round8(simd, v[1], inv),
                    round8(simd, v[2], inv),
                    round8(simd, v[3], inv),
                ];
                let sum = a2._mm256_add_epi32(
                    a2._mm256_add_epi32(q[0], q[1]),
                    a2._mm256_add_epi32(q[2], q[3]),
                );
                let sums: [i32; 8] = cast(sum);
                let packed = a2._mm256_packs_epi16(
                    a2._mm256_packs_epi32(q[0], q[1]),
                    a2._mm256_packs_epi32(q[2], q[3]),
                );
                block.d = d;
                block.qs = cast(a2._mm256_permutevar8x32_epi32(packed, order));
                block.s = d * sums.iter().sum::<i32>() as f32;
            }
        }
    }

    /// [`dot_rows`]'s arguments, called through `pulp::NullaryFnOnce` with an
    /// `#[inline(always)]` body: `vectorize` is the function compiled with AVX2, and a
    /// closure this large would not be inlined into it, leaving every intrinsic a call.
    pub(super) struct DotRows<'a, 'x> {
        pub(super) simd: V3,
        pub(super) kind: Kind,
        pub(super) row: &'a [u8],
        pub(super) xs: &'a [&'x [XBlock]],
        pub(super) out: &'a mut [f32],
    }

    impl pulp::NullaryFnOnce for DotRows<'_, '_> {
        type Output = ();

        #[inline(always)]
        fn call(self) {
            dot_rows(self.simd, self.kind, self.row, self.xs, self.out);
        }
    }

    /// [`super::dot_rows_lanes`]'s arguments, for the same reason as [`DotRows`].
    pub(super) struct DotRowsLanes<'a, 'x> {
        pub(super) simd: V3,
        pub(super) kind: Kind,
        pub(super) row: &'a [u8],
        pub(super) xs: &'a [&'x [XBlock]],
        pub(super) lanes: &'a [Lanes],
        pub(super) out: &'a mut [f32],
    }

    impl pulp::NullaryFnOnce for DotRowsLanes<'_, '_> {
        type Output = ();

        #[inline(always)]
        fn call(self) {
            let (simd, row, xs, lanes, out) = (self.simd, self.row, self.xs, self.lanes, self.out);
            let q41 = self.kind == Kind::Q4_1;
            match (xs.len().min(TILE).min(out.len()), q41) {
                (1, false) => q4_lanes_into::<1, false>(simd, row, xs, lanes, out),
                (2, false) => q4_lanes_into::<2, false>(simd, row, xs, lanes, out),
                (3, false) => q4_lanes_into::<3, false>(simd, row, xs, lanes, out),
                (4, false) => q4_lanes_into::<4, false>(simd, row, xs, lanes, out),
                (5, false) => q4_lanes_into::<5, false>(simd, row, xs, lanes, out),
                (6, false) => q4_lanes_into::<6, false>(simd, row, xs, lanes, out),
                (7, false) => q4_lanes_into::<7, false>(simd, row, xs, lanes, out),
                (_, false) => q4_lanes_into::<8, false>(simd, row, xs, lanes, out),
                (1, true) => q4_lanes_into::<1, true>(simd, row, xs, lanes, out),
                (2, true) => q4_lanes_into::<2, true>(simd, row, xs, lanes, out),
                (3, true) => q4_lanes_into::<3, true>(simd, row, xs, lanes, out),
                (4, true) => q4_lanes_into::<4, true>(simd, row, xs, lanes, out),
                (5, true) => q4_lanes_into::<5, true>(simd, row, xs, lanes, out),
                (6, true) => q4_lanes_into::<6, true>(simd, row, xs, lanes, out),
                (7, true) => q4_lanes_into::<7, true>(simd, row, xs, lanes, out),
                (_, true) => q4_lanes_into::<8, true>(simd, row, xs, lanes, out),
            }
        }
    }

    #[inline(always)]
    fn q4_lanes_into<const N: usize, const Q41: bool>(
        simd: V3,
        row: &[u8],
        xs: &[&[XBlock]],
        lanes: &[Lanes],
        out: &mut [f32],
    ) {
        let (Some(xs), Some(out)) = (xs.first_chunk::<N>(), out.first_chunk_mut::<N>()) else {
            return;
        };
        *out = q4_lanes::<N, Q41>(simd, row, xs, lanes);
    }

    #[inline(always)]
    fn load8(v: &[f32; TILE]) -> __m256 {
        cast(*v)
    }

    /// [`q4`] with the tile's scales and sums read as vectors: per weight block one
    /// multiply gives every row's scale and one multiply-add every row's min term (each
    /// lane the same two roundings as the scalar form, so the same numbers).
    #[inline(always)]
    fn q4_lanes<const N: usize, const Q41: bool>(
        simd: V3,
        row: &[u8],
        xs: &[&[XBlock]; N],
        lanes: &[Lanes],
    ) -> [f32; N] {
        let (bytes, qs_at) = if Q41 { (20, 4) } else { (18, 2) };
        let t16 = f16_table();
        let nb = (row.len() / bytes).min(lanes.len());
        let xs: [&[XBlock]; N] = std::array::from_fn(|t| &xs[t][..nb.min(xs[t].len())]);
        let (a, f) = (simd.avx, simd.fma);
        let mut acc = [a._mm256_setzero_ps(); N];
        let mut mins = a._mm256_setzero_ps();
        for (bi, (b, l)) in row.chunks_exact(bytes).zip(lanes).enumerate() {
            let d = f16_at(t16, b, 0);
            let m = if Q41 { f16_at(t16, b, 2) } else { -8.0 * d };
            let scales: [f32; 8] = cast(a._mm256_mul_ps(a._mm256_set1_ps(d), load8(&l.d)));
            mins = a._mm256_add_ps(mins, a._mm256_mul_ps(a._mm256_set1_ps(m), load8(&l.s)));
            let w = unpack_nibbles(simd, load16(&b[qs_at..]));
            for t in 0..N {
                let p = udot(simd, w, cast(xs[t][bi].qs));
                acc[t] = f._mm256_fmadd_ps(a._mm256_set1_ps(scales[t]), p, acc[t]);
            }
        }
        let mins: [f32; 8] = cast(mins);
        finish(simd, acc, std::array::from_fn(|t| mins[t]))
    }

    /// [`dot_rows4`]'s arguments, for the same reason as [`DotRows`].
    pub(super) struct DotRows4<'a> {
        pub(super) simd: V3,
        pub(super) kind: Kind,
        pub(super) rows: [&'a [u8]; 4],
        pub(super) x: &'a [XBlock],
    }

    impl pulp::NullaryFnOnce for DotRows4<'_> {
        type Output = [f32; 4];

        #[inline(always)]
        fn call(self) -> [f32; 4] {
            dot_rows4(self.simd, self.kind, self.rows, self.x)
        }
    }

    /// `out[t] = row · xs[t]`, dispatched to a kernel whose activation-row count is a
    /// constant, so its accumulators are registers rather than a stack array reloaded
    /// and stored on every block.
    #[inline(always)]
    pub(super) fn dot_rows(simd: V3, kind: Kind, row: &[u8], xs: &[&[XBlock]], out: &mut [f32]) {
        let n = xs.len().min(TILE).min(out.len());
        match n {
            1 => tile_into::<1>(simd, kind, row, xs, out),
            2 => tile_into::<2>(simd, kind, row, xs, out),
            3 => tile_into::<3>(simd, kind, row, xs, out),
            4 => tile_into::<4>(simd, kind, row, xs, out),
            5 => tile_into::<5>(simd, kind, row, xs, out),
            6 => tile_into::<6>(simd, kind, row, xs, out),
            7 => tile_into::<7>(simd, kind, row, xs, out),
            _ => tile_into::<8>(simd, kind, row, xs, out),
        }
    }

    #[inline(always)]
    fn tile_into<const N: usize>(
        simd: V3,
        kind: Kind,
        row: &[u8],
        xs: &[&[XBlock]],
        out: &mut [f32],
    ) {
        let (Some(xs), Some(out)) = (xs.first_chunk::<N>(), out.first_chunk_mut::<N>()) else {
            return;
        };
        *out = match kind {
            Kind::Q4_0 => q4::<N, false>(simd, row, xs),
            Kind::Q4_1 => q4::<N, true>(simd, row, xs),
            Kind::Q8_0 => q8::<N>(simd, row, xs),
            Kind::Q4K => q4k::<N>(simd, row, xs),
            Kind::Q6K => q6k::<N>(simd, row, xs),
        };
    }

    /// `rows[r] · x` for four weight rows and one activation row (decoding): four
    /// independent accumulator chains, and each activation block loaded once for all four.
    #[inline(always)]
    pub(super) fn dot_rows4(simd: V3, kind: Kind, rows: [&[u8]; 4], x: &[XBlock]) -> [f32; 4] {
        match kind {
            Kind::Q4_0 => q4x4::<false>(simd, rows, x),
            Kind::Q4_1 => q4x4::<true>(simd, rows, x),
            Kind::Q8_0 => q8x4(simd, rows, x),
            // Written out: a closure here would be compiled without AVX2.
            Kind::Q4K => [
                q4k::<1>(simd, rows[0], &[x])[0],
                q4k::<1>(simd, rows[1], &[x])[0],
                q4k::<1>(simd, rows[2], &[x])[0],
                q4k::<1>(simd, rows[3], &[x])[0],
            ],
            Kind::Q6K => [
                q6k::<1>(simd, rows[0], &[x])[0],
                q6k::<1>(simd, rows[1], &[x])[0],
                q6k::<1>(simd, rows[2], &[x])[0],
                q6k::<1>(simd, rows[3], &[x])[0],
            ],
        }
    }

    /// The accumulators' final sums, as the scalar kernel adds them: lanes in order, then
    /// the min term.
    #[inline(always)]
    fn finish<const N: usize>(simd: V3, acc: [__m256; N], mins: [f32; N]) -> [f32; N] {
        let mut out = [0f32; N];
        for t in 0..N {
            out[t] = hsum(simd, acc[t]) + mins[t];
        }
        out
    }

    /// Q4_0 (`Q41 = false`: 18-byte blocks, min `-8·d`) and Q4_1 (20-byte blocks, min `m`).
    /// The min terms are summed in a second pass over the (L1-hot) row: kept in the
    /// main loop, their eight scalars pushed the eight vector accumulators out of the
    /// registers.
    #[inline(always)]
    fn q4<const N: usize, const Q41: bool>(simd: V3, row: &[u8], xs: &[&[XBlock]; N]) -> [f32; N] {
        let (bytes, qs_at) = if Q41 { (20, 4) } else { (18, 2) };
        let t16 = f16_table();
        let nb = row.len() / bytes;
        let xs: [&[XBlock]; N] = std::array::from_fn(|t| &xs[t][..nb.min(xs[t].len())]);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        for (bi, b) in row.chunks_exact(bytes).enumerate() {
            let d = f16_at(t16, b, 0);
            let w = unpack_nibbles(simd, load16(&b[qs_at..]));
            for t in 0..N {
                let x = &xs[t][bi];
                let p = udot(simd, w, cast(x.qs));
                acc[t] = simd
                    .fma
                    ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(d * x.d), p, acc[t]);
            }
        }
        let mut mins = [0f32; N];
        for (bi, b) in row.chunks_exact(bytes).enumerate() {
            let m = if Q41 {
                f16_at(t16, b, 2)
            } else {
                -8.0 * f16_at(t16, b, 0)
            };
            for t in 0..N {
                mins[t] += m * xs[t][bi].s;
            }
        }
        finish(simd, acc, mins)
    }

    /// The f16 pairs at the start of four blocks (one per row: the four bytes from
    /// `at`, low half first) as eight f32 lanes `[lo0, hi0, lo1, hi1, ..]`, converted
    /// eight at a time by [`f16_at`]'s bit arithmetic (the same values, lane by lane):
    /// done per value, the conversions, their byte loads and the scale products were
    /// two thirds of a 4-row decoding kernel's instructions. A lane in `check` holding
    /// an infinity or NaN takes the table for every lane, as [`f16_at`] does.
    #[inline(always)]
    fn f16_pairs(simd: V3, rows: [&[u8]; 4], at: usize, check: i32) -> __m256 {
        let (a, a2) = (simd.avx, simd.avx2);
        let word = |r: &[u8]| i32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
        let packed =
            simd.sse2
                ._mm_set_epi32(word(rows[3]), word(rows[2]), word(rows[1]), word(rows[0]));
        let bits = a2._mm256_cvtepu16_epi32(packed);
        let exp_mask = a._mm256_set1_epi32(0x7C00);
        let special = a2._mm256_cmpeq_epi32(a2._mm256_and_si256(bits, exp_mask), exp_mask);
        if a._mm256_movemask_ps(a._mm256_castsi256_ps(special)) & check != 0 {
            let t16 = f16_table();
            let lanes: [u32; 8] = cast(bits);
            return cast(lanes.map(|b| t16[(b & 0xFFFF) as usize]));
        }
        let magnitude = a._mm256_castsi256_ps(
            a2._mm256_slli_epi32::<13>(a2._mm256_and_si256(bits, a._mm256_set1_epi32(0x7FFF))),
        );
        let magnitude = a._mm256_mul_ps(
            magnitude,
            a._mm256_castsi256_ps(a._mm256_set1_epi32(0x7780_0000)),
        );
        let sign =
            a2._mm256_slli_epi32::<16>(a2._mm256_and_si256(bits, a._mm256_set1_epi32(0x8000)));
        a._mm256_or_ps(magnitude, a._mm256_castsi256_ps(sign))
    }

    /// Lane `2·r` of `v` in every lane (row `r`'s scale, from [`f16_pairs`]' layout).
    #[inline(always)]
    fn even_lane(simd: V3, v: __m256, r: i32) -> __m256 {
        simd.avx2
            ._mm256_permutevar8x32_ps(v, simd.avx._mm256_set1_epi32(2 * r))
    }

    /// Four Q4_0/Q4_1 rows against one activation row. The four rows' scales and mins
    /// are converted and multiplied by the activation's scale and sum as one vector (each
    /// lane the scalar kernel's two roundings, so the same numbers).
    #[inline(always)]
    fn q4x4<const Q41: bool>(simd: V3, rows: [&[u8]; 4], x: &[XBlock]) -> [f32; 4] {
        let (bytes, qs_at) = if Q41 { (20, 4) } else { (18, 2) };
        let (a, f) = (simd.avx, simd.fma);
        let nb = (rows[0]
            .len()
            .min(rows[1].len())
            .min(rows[2].len())
            .min(rows[3].len())
            / bytes)
            .min(x.len());
        let rows = rows.map(|r| &r[..nb * bytes]);
        let x = &x[..nb];
        // Q4_0's min is -8·d: the odd lanes (its first quants) are replaced by that.
        let (check, minus8) = if Q41 {
            (0xFF, a._mm256_set1_ps(1.0))
        } else {
            (
                0x55,
                a._mm256_setr_ps(1.0, -8.0, 1.0, -8.0, 1.0, -8.0, 1.0, -8.0),
            )
        };
        let mut acc = [a._mm256_setzero_ps(); 4];
        let mut mins = a._mm256_setzero_ps();
        for (bi, x) in x.iter().enumerate() {
            let xq: __m256i = cast(x.qs);
            let at = bi * bytes;
            let mut dm = f16_pairs(simd, rows, at, check);
            if !Q41 {
                dm = a._mm256_mul_ps(a._mm256_moveldup_ps(dm), minus8);
            }
            let xds = a._mm256_setr_ps(x.d, x.s, x.d, x.s, x.d, x.s, x.d, x.s);
            let scaled = a._mm256_mul_ps(dm, xds);
            // Odd lanes: each row's `m · x.s`, summed block by block as the scalar kernel
            // does (the even lanes' sums are never read).
            mins = a._mm256_add_ps(mins, scaled);
            for r in 0..4 {
                if bi % 2 == 0 {
                    prefetch(simd, rows[r], at);
                }
                let w = unpack_nibbles(simd, load16(&rows[r][at + qs_at..]));
                let p = udot(simd, w, xq);
                acc[r] = f._mm256_fmadd_ps(even_lane(simd, scaled, r as i32), p, acc[r]);
            }
        }
        let mins: [f32; 8] = cast(mins);
        finish(simd, acc, [mins[1], mins[3], mins[5], mins[7]])
    }

    #[inline(always)]
    fn q8<const N: usize>(simd: V3, row: &[u8], xs: &[&[XBlock]; N]) -> [f32; N] {
        let t16 = f16_table();
        let nb = row.len() / 34;
        let xs: [&[XBlock]; N] = std::array::from_fn(|t| &xs[t][..nb.min(xs[t].len())]);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        for (bi, b) in row.chunks_exact(34).enumerate() {
            let d = f16_at(t16, b, 0);
            let w = load32(&b[2..]);
            for t in 0..N {
                let x = &xs[t][bi];
                let p = sdot(simd, w, cast(x.qs));
                acc[t] = simd
                    .fma
                    ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(d * x.d), p, acc[t]);
            }
        }
        finish(simd, acc, [0f32; N])
    }

    /// Four Q8_0 rows against one activation row (the tied output projection), their
    /// scales converted and multiplied as one vector like [`q4x4`]'s.
    #[inline(always)]
    fn q8x4(simd: V3, rows: [&[u8]; 4], x: &[XBlock]) -> [f32; 4] {
        let (a, f) = (simd.avx, simd.fma);
        let nb = (rows[0]
            .len()
            .min(rows[1].len())
            .min(rows[2].len())
            .min(rows[3].len())
            / 34)
            .min(x.len());
        let rows = rows.map(|r| &r[..nb * 34]);
        let x = &x[..nb];
        let mut acc = [a._mm256_setzero_ps(); 4];
        for (bi, x) in x.iter().enumerate() {
            let xq: __m256i = cast(x.qs);
            let at = bi * 34;
            // Even lanes: the scales (odd lanes are the first quants, unused).
            let scaled = a._mm256_mul_ps(f16_pairs(simd, rows, at, 0x55), a._mm256_set1_ps(x.d));
            for r in 0..4 {
                prefetch(simd, rows[r], at);
                let p = sdot(simd, load32(&rows[r][at + 2..]), xq);
                acc[r] = f._mm256_fmadd_ps(even_lane(simd, scaled, r as i32), p, acc[r]);
            }
        }
        finish(simd, acc, [0f32; 4])
    }

    #[inline(always)]
    fn q4k<const N: usize>(simd: V3, row: &[u8], xs: &[&[XBlock]; N]) -> [f32; N] {
        let t16 = f16_table();
        let mask = simd.avx._mm256_set1_epi8(0xF);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        let mut mins = [0f32; N];
        for (bi, b) in row.chunks_exact(144).enumerate() {
            let (d, dmin) = (f16_at(t16, b, 0), f16_at(t16, b, 2));
            let scales = &b[4..16];
            for pair in 0..4 {
                let q = load32(&b[16 + 32 * pair..]);
                let halves = [
                    simd.avx2._mm256_and_si256(q, mask),
                    simd.avx2
                        ._mm256_and_si256(simd.avx2._mm256_srli_epi16::<4>(q), mask),
                ];
                for (h, w) in halves.into_iter().enumerate() {
                    let sub = 2 * pair + h;
                    let (sc, mn) = k4_scale_min(scales, sub);
                    let (dd, mm) = (d * f32::from(sc), dmin * f32::from(mn));
                    for t in 0..N {
                        let x = &xs[t][bi * 8 + sub];
                        let p = udot(simd, w, cast(x.qs));
                        acc[t] =
                            simd.fma
                                ._mm256_fmadd_ps(simd.avx._mm256_set1_ps(dd * x.d), p, acc[t]);
                        mins[t] -= mm * x.s;
                    }
                }
            }
        }
        finish(simd, acc, mins)
    }

    #[inline(always)]
    fn q6k<const N: usize>(simd: V3, row: &[u8], xs: &[&[XBlock]; N]) -> [f32; N] {
        let t16 = f16_table();
        let m4 = simd.avx._mm256_set1_epi8(0xF);
        let m3 = simd.avx._mm256_set1_epi8(3);
        let m32 = simd.avx._mm256_set1_epi8(32);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        for (bi, b) in row.chunks_exact(210).enumerate() {
            let d = f16_at(t16, b, 208);
            for h in 0..2 {
                let ql0 = load32(&b[64 * h..]);
                let ql1 = load32(&b[64 * h + 32..]);
                let qh = load32(&b[128 + 32 * h..]);
                let groups = [
                    simd.avx2._mm256_or_si256(
                        simd.avx2._mm256_and_si256(ql0, m4),
                        q6_high(simd, qh, m3, 0),
                    ),
                    simd.avx2._mm256_or_si256(
                        simd.avx2._mm256_and_si256(ql1, m4),
                        q6_high(simd, qh, m3, 2),
                    ),
                    simd.avx2._mm256_or_si256(
                        simd.avx2
                            ._mm256_and_si256(simd.avx2._mm256_srli_epi16::<4>(ql0), m4),
                        q6_high(simd, qh, m3, 4),
                    ),
                    simd.avx2._mm256_or_si256(
                        simd.avx2
                            ._mm256_and_si256(simd.avx2._mm256_srli_epi16::<4>(ql1), m4),
                        q6_high(simd, qh, m3, 6),
                    ),
                ];
                let sc = &b[192 + 8 * h..200 + 8 * h];
                for (g, q) in groups.into_iter().enumerate() {
                    let w = simd.avx2._mm256_sub_epi8(q, m32);
                    let (s0, s1) = (
                        d * f32::from(sc[2 * g] as i8),
                        d * f32::from(sc[2 * g + 1] as i8),
                    );
                    for t in 0..N {
                        let x = &xs[t][bi * 8 + h * 4 + g];
                        let p = sdot(simd, w, cast(x.qs));
                        let (a, c) = (s0 * x.d, s1 * x.d);
                        let scale = simd.avx._mm256_setr_ps(a, a, a, a, c, c, c, c);
                        acc[t] = simd.fma._mm256_fmadd_ps(scale, p, acc[t]);
                    }
                }
            }
        }
        finish(simd, acc, [0f32; N])
    }
}

/// Test blocks: `blocks` (whole blocks of `kind`) with every f16 scale set to `scale`,
/// since random bytes there could be NaN, and NaN equals nothing.
#[cfg(test)]
pub(crate) fn with_scale(kind: Kind, mut blocks: Vec<u8>, scale: f32) -> Vec<u8> {
    let at: &[usize] = match kind {
        Kind::Q4_0 | Kind::Q8_0 => &[0],
        Kind::Q4_1 | Kind::Q4K => &[0, 2],
        Kind::Q6K => &[208],
    };
    let bits = half::f16::from_f32(scale).to_bits().to_le_bytes();
    for block in blocks.chunks_exact_mut(kind.block_bytes()) {
        for &a in at {
            block[a..a + 2].copy_from_slice(&bits);
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [Kind; 5] = [Kind::Q4_0, Kind::Q4_1, Kind::Q8_0, Kind::Q4K, Kind::Q6K];

    /// Random quants with small f16 scales (random scale bytes could be NaN).
    fn row(kind: Kind, bytes: &[u8], scale: f32) -> Vec<u8> {
        with_scale(kind, bytes[..2 * kind.block_bytes()].to_vec(), scale)
    }

    proptest! {
        /// The AVX2 kernels give the scalar kernel's results, for one to eight rows, and
        /// the scalar kernel gives f32 arithmetic on the dequantized values.
        #[test]
        fn simd_scalar_and_dequantized_agree(
            bytes in proptest::collection::vec(any::<u8>(), 2 * 210),
            scale in -0.2f32..0.2,
            x in proptest::collection::vec(-2.0f32..2.0, TILE * 2 * SUPER),
            n in 1usize..=TILE,
        ) {
            for kind in KINDS {
                let w = row(kind, &bytes, scale);
                let cols = 2 * kind.block_values();
                let mut xq = vec![XBlock::default(); TILE * cols / BLOCK];
                quantize_into(&x[..TILE * cols], &mut xq);
                let xs: Vec<&[XBlock]> = xq.chunks_exact(cols / BLOCK).take(n).collect();
                let mut fast = vec![0f32; n];
                let mut slow = vec![0f32; n];
                dot_rows(kind, &w, &xs, &mut fast);
                dot_rows_scalar(kind, &w, &xs, &mut slow);
                // The tile kernel with lanes gives the same bits as without.
                let mut laned = vec![0f32; n];
                dot_rows_lanes(kind, &w, &xs, &lanes(&xs), &mut laned);
                prop_assert_eq!(&laned, &fast, "{:?}", kind);
                // Four rows at once give each row's single-row result.
                if n == 1 {
                    let rows = [&w[..], &w[..], &w[..], &w[..]];
                    prop_assert_eq!(dot_rows4(kind, rows, xs[0]), [fast[0]; 4], "{:?}", kind);
                }
                let mut wf = vec![0f32; cols];
                dequantize_row(kind, &w, &mut wf);
                for t in 0..n {
                    let mut xf = vec![0f32; cols];
                    for (b, out) in xs[t].iter().zip(xf.chunks_exact_mut(BLOCK)) {
                        for (o, q) in out.iter_mut().zip(b.qs) {
                            *o = b.d * f32::from(q);
                        }
                    }
                    let exact: f32 = wf.iter().zip(&xf).map(|(a, b)| a * b).sum();
                    let size: f32 = wf.iter().zip(&xf).map(|(a, b)| (a * b).abs()).sum();
                    let tol = 1e-4 * (1.0 + size);
                    prop_assert!((fast[t] - slow[t]).abs() <= tol, "{kind:?}: {} vs {}", fast[t], slow[t]);
                    prop_assert!((slow[t] - exact).abs() <= tol, "{kind:?}: {} vs {exact}", slow[t]);
                }
            }
        }
    }

    proptest! {
        /// Four different rows (each with its own scales and mins, random f16 bits, an
        /// infinity now and then) decoded at once give each row's own result, bit for bit:
        /// the 4-row kernels convert and scale the four rows' blocks side by side.
        #[test]
        fn four_rows_at_once_give_each_rows_bits(
            bytes in proptest::collection::vec(any::<u8>(), 4 * 2 * 210),
            scales in proptest::collection::vec(0u16..0x7C00, 4 * 2 * 2),
            negative in proptest::collection::vec(any::<bool>(), 4 * 2 * 2),
            infinite in 0usize..64,
            x in proptest::collection::vec(-2.0f32..2.0, 2 * SUPER),
        ) {
            for kind in KINDS {
                let len = 2 * kind.block_bytes();
                let mut rows: Vec<Vec<u8>> = bytes.chunks_exact(2 * 210).map(|b| b[..len].to_vec()).collect();
                let at: &[usize] = match kind {
                    Kind::Q4_0 | Kind::Q8_0 => &[0],
                    Kind::Q4_1 | Kind::Q4K => &[0, 2],
                    Kind::Q6K => &[208],
                };
                let mut i = 0;
                for row in &mut rows {
                    for block in row.chunks_exact_mut(kind.block_bytes()) {
                        for &a in at {
                            let mut bits = scales[i] | if negative[i] { 0x8000 } else { 0 };
                            if i == infinite {
                                bits = 0x7C00;
                            }
                            // Small magnitudes keep the products finite.
                            if bits & 0x7C00 != 0x7C00 {
                                bits = (bits & 0x83FF) | ((bits & 0x7C00) % 0x4000);
                            }
                            block[a..a + 2].copy_from_slice(&bits.to_le_bytes());
                            i += 1;
                        }
                    }
                }
                let cols = 2 * kind.block_values();
                let mut xq = vec![XBlock::default(); cols / BLOCK];
                quantize_into(&x[..cols], &mut xq);
                let four = dot_rows4(kind, [&rows[0][..], &rows[1][..], &rows[2][..], &rows[3][..]], &xq);
                for (r, row) in rows.iter().enumerate() {
                    let mut one = [0f32];
                    dot_rows(kind, row, &[&xq], &mut one);
                    prop_assert_eq!(four[r].to_bits(), one[0].to_bits(), "{:?} row {}: {} vs {}", kind, r, four[r], one[0]);
                }
            }
        }
    }

    /// The table-free conversion gives the table's value for every f16 bit pattern
    /// (NaNs compared by their bits).
    #[test]
    fn f16_arithmetic_matches_the_table() {
        let t = f16_table();
        for bits in 0..=u16::MAX {
            let b = bits.to_le_bytes();
            assert_eq!(
                f16_at_fast(t, &b, 0).to_bits(),
                f16_at(t, &b, 0).to_bits(),
                "{bits:#x}"
            );
        }
    }

    proptest! {
        /// The call-free rounding is `round`, clamped, for any value (halves included).
        #[test]
        fn rounding_to_bytes_matches_round(v in -200.0f32..200.0, halves in -300i32..300) {
            for v in [v, halves as f32 + 0.5, halves as f32 - 0.5, halves as f32] {
                prop_assert_eq!(round_to_i8(v), v.round().clamp(-127.0, 127.0) as i8, "{}", v);
            }
        }
    }

    #[test]
    fn rounding_edge_cases_match_round() {
        let below_half = f32::from_bits(0.5f32.to_bits() - 1);
        for v in [
            below_half,
            -below_half,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            127.5,
            -127.5,
            -0.0,
        ] {
            assert_eq!(round_to_i8(v), v.round().clamp(-127.0, 127.0) as i8, "{v}");
        }
    }

    proptest! {
        /// The AVX2 quantization gives the scalar loop's blocks exactly, halves, zeros,
        /// NaNs and infinities included.
        #[test]
        fn vector_quantization_matches_the_scalar_loop(
            x in proptest::collection::vec(-300.0f32..300.0, 4 * BLOCK),
            halves in proptest::collection::vec(-254i32..254, 4 * BLOCK),
            special in proptest::collection::vec(0usize..6 * BLOCK, 0..3),
        ) {
            // Values that land on halves after scaling (amax 127 makes the scale 1).
            let mut x = x;
            for (v, h) in x[BLOCK..2 * BLOCK].iter_mut().zip(&halves) {
                *v = *h as f32 / 2.0;
            }
            x[BLOCK] = 127.0;
            x[2 * BLOCK..3 * BLOCK].fill(0.0);
            for (k, s) in special.iter().enumerate() {
                if let Some(v) = x.get_mut(*s) {
                    *v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][k % 3];
                }
            }
            let mut fast = vec![XBlock::default(); 4];
            let mut slow = vec![XBlock::default(); 4];
            quantize_into(&x, &mut fast);
            quantize_into_scalar(&x, &mut slow);
            for (f, s) in fast.iter().zip(&slow) {
                prop_assert_eq!(f.qs, s.qs);
                prop_assert_eq!(f.d.to_bits(), s.d.to_bits());
                prop_assert_eq!(f.s.to_bits(), s.s.to_bits());
            }
        }
    }

    #[test]
    fn activation_blocks_carry_their_sum() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 30.0) / 7.0).collect();
        let mut q = vec![XBlock::default(); 2];
        quantize_into(&x, &mut q);
        for (b, x) in q.iter().zip(x.chunks(BLOCK)) {
            let s: f32 = b.qs.iter().map(|v| b.d * f32::from(*v)).sum();
            assert!((b.s - s).abs() < 1e-4);
            for (v, q) in x.iter().zip(b.qs) {
                assert!((v - b.d * f32::from(q)).abs() <= b.d / 2.0 + 1e-6);
            }
        }
        let mut zero = [XBlock::default()];
        quantize_into(&[0.0; 32], &mut zero);
        assert_eq!(zero[0], XBlock::default());
    }
}
