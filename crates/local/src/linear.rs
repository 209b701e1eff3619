//! Projections (`x · Wᵀ + b`) on weights kept in their GGUF blocks (see [`crate::quant`]).
//!
//! One kernel serves every row count: activations are quantized to 8 bits per 32 values,
//! then each weight row is read once per chunk of up to [`TILE`] activation rows. Decoding
//! (one row) is memory-bound and reads 4.5–6.5 bits a weight instead of 32; prompt
//! processing reuses each unpacked block for eight tokens, so integer dot products
//! (`maddubs`: 32 products an instruction) keep pace with an f32 GEMM without the f32
//! copy of the weights, which was 425 MB for SmolLM2-135M.
//!
//! Work is split over output rows on rayon. Work stealing matters here: when the machine
//! is busy, a spinning thread pool stalls at every barrier (measured: 3 tokens/s instead of
//! 25 under a parallel build), while rayon lets the running thread take over chunks a
//! descheduled one has not started. A decoding step's products go to a
//! [`crate::team::Team`] instead, which keeps that property (every thread claims chunks
//! from one counter, the caller included) without the workers sleeping between products.

use crate::error::LocalError;
use crate::quant::{self, BLOCK, Kind, TILE, XBlock};
use crate::team::{Task, Team};
use crate::tensor_bytes::TensorBytes;
use rayon::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Output rows per rayon task for one activation row (decoding): 32 splits a 576-row
/// projection into 18 tasks, which two threads share evenly (64 gave 9: one thread did 5).
const MATVEC_CHUNK: usize = 32;

/// Output rows per rayon task for many activation rows (prompt processing).
const MATMUL_CHUNK: usize = 16;

/// Tokens per task when a prompt chunk's products are put back in token order.
const TRANSPOSE_TOKENS: usize = 16;

/// A row-major matrix in one of the [`Kind`]s, as the file stores it: one or more
/// tensors' bytes stacked by row (q, k and v are separate tensors in the file but one
/// matrix here; stacking keeps them where they are instead of copying them together).
pub(crate) struct QMatrix {
    kind: Kind,
    rows: usize,
    cols: usize,
    /// Whole rows each, top to bottom, with their row counts.
    parts: Vec<(TensorBytes, usize)>,
}

/// The rows of a [`QMatrix`] as plain slices, resolved once per product so the inner
/// loops index slices instead of matching on where the bytes live.
struct Rows<'a> {
    parts: Vec<(&'a [u8], usize)>,
    row_bytes: usize,
}

impl<'a> Rows<'a> {
    /// Rows `first..first + len` as one slice, when one part holds them all.
    #[inline]
    fn run(&self, mut first: usize, len: usize) -> Option<&'a [u8]> {
        for &(bytes, rows) in &self.parts {
            if first < rows {
                return (first + len <= rows)
                    .then(|| bytes.get(first * self.row_bytes..(first + len) * self.row_bytes))
                    .flatten();
            }
            first -= rows;
        }
        None
    }

    /// Row `r`'s blocks (`r` below the matrix's rows).
    #[inline]
    fn get(&self, mut r: usize) -> &'a [u8] {
        for &(bytes, rows) in &self.parts {
            if r < rows {
                return &bytes[r * self.row_bytes..(r + 1) * self.row_bytes];
            }
            r -= rows;
        }
        &[]
    }
}

/// `act(gate) · up` for each row of `gate_up` (rows of `2 · ff`: the gate, then up).
pub(crate) fn gated(gate_up: &[f32], ff: usize, act: fn(f32) -> f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(gate_up.len() / 2);
    for row in gate_up.chunks_exact(2 * ff) {
        let (gate, up) = row.split_at(ff);
        out.extend(gate.iter().zip(up).map(|(&g, &u)| act(g) * u));
    }
    out
}

/// Quantizes `x` (whole rows of `cols` values, `cols` a multiple of [`BLOCK`]) to
/// activation blocks, in parallel when large.
pub(crate) fn quantize_activations(x: &[f32], cols: usize) -> Vec<XBlock> {
    let per_row = cols / BLOCK;
    let mut blocks = vec![XBlock::default(); x.len() / cols * per_row];
    if x.len() <= 4 * cols {
        quant::quantize_into(x, &mut blocks);
    } else {
        blocks
            .par_chunks_mut(per_row)
            .zip(x.par_chunks(cols))
            .for_each(|(b, x)| quant::quantize_into(x, b));
    }
    blocks
}

/// Q8_0 blocks (f16 scale, 32 signed bytes) for values with no kernel of their own (f32,
/// f16 and the quantizations without a kernel here).
pub(crate) fn q8_0_bytes(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / BLOCK * 34);
    for x in values.chunks_exact(BLOCK) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = half::f16::from_f32(amax / 127.0);
        let df = d.to_f32();
        let inv = if df > 0.0 { 1.0 / df } else { 0.0 };
        out.extend_from_slice(&d.to_bits().to_le_bytes());
        out.extend(
            x.iter()
                .map(|v| (v * inv).round().clamp(-127.0, 127.0) as i8 as u8),
        );
    }
    out
}

/// `x · Wᵀ` as the model computes it, for `W` (`rows` × `cols`) given as `kind` blocks in
/// `weights` and `x` as whole rows of `cols` values: exposed so the kernels can be checked
/// against an independent dequantization and measured on their own.
pub fn quantized_matmul(
    kind: Kind,
    weights: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
) -> Result<Vec<f32>, LocalError> {
    if cols == 0 || !cols.is_multiple_of(kind.block_values()) || !x.len().is_multiple_of(cols) {
        return Err(LocalError::Inference(format!(
            "{} inputs are not rows of {cols} values in {kind:?} blocks",
            x.len()
        )));
    }
    let m = QMatrix::new(kind, rows, cols, TensorBytes::Owned(weights.to_vec()))?;
    let seq = x.len() / cols;
    let mut out = vec![0f32; seq * rows];
    m.matmul(&quantize_activations(x, cols), seq, &mut out);
    Ok(out)
}

impl QMatrix {
    /// `data` holds `rows` rows of `cols` values in `kind`'s blocks.
    pub(crate) fn new(
        kind: Kind,
        rows: usize,
        cols: usize,
        data: TensorBytes,
    ) -> Result<Self, LocalError> {
        if !cols.is_multiple_of(kind.block_values())
            || rows.checked_mul(kind.row_bytes(cols)) != Some(data.len())
        {
            return Err(LocalError::Inference(format!(
                "{} bytes are not a {rows}x{cols} {kind:?} matrix",
                data.len()
            )));
        }
        Ok(QMatrix {
            kind,
            rows,
            cols,
            parts: vec![(data, rows)],
        })
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// `self` with `below`'s rows appended (same kind and columns).
    pub(crate) fn stacked(mut self, below: QMatrix) -> Result<Self, LocalError> {
        if below.kind != self.kind || below.cols != self.cols {
            return Err(LocalError::Inference(
                "only matrices of one kind and width stack".into(),
            ));
        }
        self.parts.extend(below.parts);
        self.rows += below.rows;
        Ok(self)
    }

    fn slices(&self) -> Rows<'_> {
        Rows {
            parts: self.parts.iter().map(|(b, n)| (&**b, *n)).collect(),
            row_bytes: self.kind.row_bytes(self.cols),
        }
    }

    /// Row `r` as f32 (an embedding lookup).
    pub(crate) fn row(&self, r: usize, out: &mut [f32]) {
        quant::dequantize_row(self.kind, self.slices().get(r), &mut out[..self.cols]);
    }

    /// `out[i] = W[first + i] · x` for one activation row: four weight rows per kernel
    /// call, the rest one at a time (every row gets the same bits either way).
    fn matvec_rows(&self, weights: &Rows<'_>, x: &[XBlock], first: usize, out: &mut [f32]) {
        let len = out.len();
        let rb = weights.row_bytes;
        // The run's rows in one part (almost always): sliced directly rather than
        // looked up part by part, four times per kernel call.
        let run = weights.run(first, len);
        let mut quads = out.chunks_exact_mut(4);
        for (q, o) in (&mut quads).enumerate() {
            let r = first + 4 * q;
            let rows = match run {
                Some(run) => {
                    let four = &run[4 * q * rb..];
                    [
                        &four[..rb],
                        &four[rb..2 * rb],
                        &four[2 * rb..3 * rb],
                        &four[3 * rb..4 * rb],
                    ]
                }
                None => [r, r + 1, r + 2, r + 3].map(|r| weights.get(r)),
            };
            o.copy_from_slice(&quant::dot_rows4(self.kind, rows, x));
        }
        let rest = quads.into_remainder();
        let done = len - rest.len();
        for (i, o) in rest.iter_mut().enumerate() {
            let w = weights.get(first + done + i);
            quant::dot_rows(self.kind, w, &[x], std::slice::from_mut(o));
        }
    }

    /// `out[t * rows + r] = W[r] · x[t]` for the `seq` activation rows in `x`.
    pub(crate) fn matmul(&self, x: &[XBlock], seq: usize, out: &mut [f32]) {
        let per_row = self.cols / BLOCK;
        let xrows: Vec<&[XBlock]> = x.chunks_exact(per_row).take(seq).collect();
        if seq == 0 {
            return;
        }
        let weights = self.slices();
        if seq == 1 {
            let x = xrows[0];
            out[..self.rows]
                .par_chunks_mut(MATVEC_CHUNK)
                .enumerate()
                .for_each(|(chunk, out)| {
                    self.matvec_rows(&weights, x, chunk * MATVEC_CHUNK, out);
                });
            return;
        }
        // Row-major by weight row, so each task writes one contiguous run; transposed after.
        // Within a task, each tile of activation rows meets all the task's weight rows
        // before the next tile is read, so both stay in L1.
        let tile_lanes: Vec<Vec<quant::Lanes>> = xrows.chunks(TILE).map(quant::lanes).collect();
        let mut by_row = vec![0f32; self.rows * seq];
        by_row
            .par_chunks_mut(MATMUL_CHUNK * seq)
            .enumerate()
            .for_each(|(chunk, block)| {
                for (ti, (xs, lanes)) in xrows.chunks(TILE).zip(&tile_lanes).enumerate() {
                    for (i, o) in block.chunks_exact_mut(seq).enumerate() {
                        let w = weights.get(chunk * MATMUL_CHUNK + i);
                        quant::dot_rows_lanes(self.kind, w, xs, lanes, &mut o[ti * TILE..]);
                    }
                }
            });
        // The transpose in parallel, by runs of tokens: each task reads one short
        // contiguous run per weight row (done serially, it was 4% of a prompt's time at
        // 1 thread, and at 2 threads the other thread waited on it).
        let rows = self.rows;
        out[..seq * rows]
            .par_chunks_mut(TRANSPOSE_TOKENS * rows)
            .enumerate()
            .for_each(|(run, o)| {
                let (first, n) = (run * TRANSPOSE_TOKENS, o.len() / rows);
                for (r, col) in by_row.chunks_exact(seq).enumerate() {
                    for (k, v) in col[first..first + n].iter().enumerate() {
                        o[k * rows + r] = *v;
                    }
                }
            });
    }
}

/// Rows per chunk of a decoding product on a [`Team`]: about 16 chunks a product
/// (fewer below 32 rows each), so threads claiming them stay even, in multiples of four
/// for the four-row kernel (32 chunks measured 0.5-2% slower at 2 threads, 8 the same).
fn team_chunk(rows: usize) -> usize {
    (rows / 16).next_multiple_of(4).max(MATVEC_CHUNK)
}

/// One decoding product as a [`Task`]: chunk `i` is rows `i * chunk..` of `m` against
/// `x`, written to `out[at..]` as f32 bits (each row by one thread, so relaxed stores;
/// the team's completion count publishes them).
struct Matvec {
    m: Arc<QMatrix>,
    x: Arc<Vec<XBlock>>,
    out: Arc<Vec<AtomicU32>>,
    at: usize,
    chunk: usize,
}

impl Task for Matvec {
    fn chunks(&self) -> usize {
        self.m.rows.div_ceil(self.chunk)
    }

    fn run(&self, i: usize) {
        let first = i * self.chunk;
        let end = (first + self.chunk).min(self.m.rows);
        let weights = self.m.slices();
        let mut buf = [0f32; 64];
        for from in (first..end).step_by(buf.len()) {
            let to = (from + buf.len()).min(end);
            let y = &mut buf[..to - from];
            self.m.matvec_rows(&weights, &self.x, from, y);
            for (o, v) in self.out[self.at + from..].iter().zip(y.iter()) {
                o.store(v.to_bits(), Ordering::Relaxed);
            }
        }
    }
}

/// The gate and up products of a feed-forward layer (one matrix, gate rows on top)
/// as a [`Task`], each chunk finishing its rows into `out[j] = act(gate[j]) · up[j]`:
/// done after the product on one thread, the activation's `exp` per value was a few
/// percent of a decoding step with the other threads waiting.
struct GatedMatvec {
    m: Arc<QMatrix>,
    x: Arc<Vec<XBlock>>,
    out: Arc<Vec<AtomicU32>>,
    act: fn(f32) -> f32,
    chunk: usize,
}

impl Task for GatedMatvec {
    fn chunks(&self) -> usize {
        self.out.len().div_ceil(self.chunk)
    }

    fn run(&self, i: usize) {
        let ff = self.out.len();
        let first = i * self.chunk;
        let end = (first + self.chunk).min(ff);
        let weights = self.m.slices();
        let (mut gate, mut up) = ([0f32; 64], [0f32; 64]);
        for from in (first..end).step_by(gate.len()) {
            let len = (end - from).min(gate.len());
            self.m
                .matvec_rows(&weights, &self.x, from, &mut gate[..len]);
            self.m
                .matvec_rows(&weights, &self.x, ff + from, &mut up[..len]);
            for ((o, g), u) in self.out[from..].iter().zip(&gate[..len]).zip(&up[..len]) {
                o.store(((self.act)(*g) * u).to_bits(), Ordering::Relaxed);
            }
        }
    }
}

/// A projection: quantized weights (one matrix, or several stacked by output row when
/// the file stores them in different kinds), an optional bias.
pub(crate) struct Linear {
    parts: Vec<Arc<QMatrix>>,
    cols: usize,
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// A projection from matrices of `cols` columns, stacked by output row.
    pub(crate) fn new(
        parts: Vec<Arc<QMatrix>>,
        bias: Option<Vec<f32>>,
    ) -> Result<Self, LocalError> {
        let fail = |m: &str| Err(LocalError::Inference(m.to_string()));
        let Some(cols) = parts.first().map(|p| p.cols) else {
            return fail("a projection needs a weight matrix");
        };
        if parts.iter().any(|p| p.cols != cols) || !cols.is_multiple_of(BLOCK) {
            return fail("the parts of a projection disagree on their columns");
        }
        let rows: usize = parts.iter().map(|p| p.rows).sum();
        if bias.as_ref().is_some_and(|b| b.len() != rows) {
            return fail("a projection's bias does not match its rows");
        }
        Ok(Linear { parts, cols, bias })
    }

    fn rows(&self) -> usize {
        self.parts.iter().map(|p| p.rows).sum()
    }

    /// `x · Wᵀ + b` for one row `x`, on `team`: the numbers of [`Linear::forward`].
    pub(crate) fn forward_one(&self, x: &[f32], team: &Team) -> Result<Vec<f32>, LocalError> {
        if x.len() != self.cols {
            return Err(LocalError::Inference(format!(
                "projection expects {} columns, got {} values",
                self.cols,
                x.len()
            )));
        }
        let xq = Arc::new(quantize_activations(x, self.cols));
        let rows = self.rows();
        let out: Arc<Vec<AtomicU32>> = Arc::new((0..rows).map(|_| AtomicU32::new(0)).collect());
        let mut at = 0;
        for part in &self.parts {
            team.run(Arc::new(Matvec {
                m: part.clone(),
                x: xq.clone(),
                out: out.clone(),
                at,
                chunk: team_chunk(part.rows),
            }));
            at += part.rows;
        }
        let mut y: Vec<f32> = out
            .iter()
            .map(|v| f32::from_bits(v.load(Ordering::Relaxed)))
            .collect();
        if let Some(b) = &self.bias {
            for (y, b) in y.iter_mut().zip(b) {
                *y += b;
            }
        }
        Ok(y)
    }

    /// `act(gate) · up` for one row `x`, on `team`, where this projection's first `ff`
    /// outputs are the gate and the next `ff` the up product: the numbers of
    /// [`Linear::forward`] followed by that product.
    pub(crate) fn gated_one(
        &self,
        x: &[f32],
        ff: usize,
        act: fn(f32) -> f32,
        team: &Team,
    ) -> Result<Vec<f32>, LocalError> {
        let [only] = self.parts.as_slice() else {
            return Ok(gated(&self.forward_one(x, team)?, ff, act));
        };
        if self.bias.is_some() || only.rows != 2 * ff || x.len() != self.cols {
            return Ok(gated(&self.forward_one(x, team)?, ff, act));
        }
        let out: Arc<Vec<AtomicU32>> = Arc::new((0..ff).map(|_| AtomicU32::new(0)).collect());
        team.run(Arc::new(GatedMatvec {
            m: only.clone(),
            x: Arc::new(quantize_activations(x, self.cols)),
            out: out.clone(),
            act,
            chunk: team_chunk(ff),
        }));
        Ok(out
            .iter()
            .map(|v| f32::from_bits(v.load(Ordering::Relaxed)))
            .collect())
    }

    /// `x · Wᵀ + b` for `x` holding `m` rows (row-major), as `m` rows of output.
    pub(crate) fn forward(&self, x: &[f32], m: usize) -> Result<Vec<f32>, LocalError> {
        if m.checked_mul(self.cols) != Some(x.len()) {
            return Err(LocalError::Inference(format!(
                "projection expects {m} rows of {} columns, got {} values",
                self.cols,
                x.len()
            )));
        }
        let cols = self.cols;
        let xq = quantize_activations(x, cols);
        let rows = self.rows();
        let mut out = vec![0f32; m * rows];
        match self.parts.as_slice() {
            [only] => only.matmul(&xq, m, &mut out),
            parts => {
                let mut first = 0;
                for part in parts {
                    let mut y = vec![0f32; m * part.rows];
                    part.matmul(&xq, m, &mut y);
                    for (o, y) in out.chunks_exact_mut(rows).zip(y.chunks_exact(part.rows)) {
                        o[first..first + part.rows].copy_from_slice(y);
                    }
                    first += part.rows;
                }
            }
        }
        if let Some(b) = &self.bias {
            for row in out.chunks_exact_mut(rows) {
                for (y, b) in row.iter_mut().zip(b) {
                    *y += b;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_map::FileMap;
    use proptest::prelude::*;
    use std::io::Write;

    fn dense(values: &[f32], rows: usize, cols: usize) -> Arc<QMatrix> {
        let bytes = TensorBytes::Owned(q8_0_bytes(values));
        Arc::new(QMatrix::new(Kind::Q8_0, rows, cols, bytes).unwrap())
    }

    /// One row at a time and many rows at once give the same numbers, stacked parts the
    /// same as one matrix, and both are close to f32 arithmetic.
    #[test]
    fn row_counts_and_stacking_agree() {
        let (rows, cols) = (70, 64);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let x: Vec<f32> = (0..11 * cols)
            .map(|i| ((i * 13 % 29) as f32 / 14.0) - 1.0)
            .collect();
        let one = Linear::new(vec![dense(&w, rows, cols)], None).unwrap();
        let split = Linear::new(
            vec![
                dense(&w[..30 * cols], 30, cols),
                dense(&w[30 * cols..], 40, cols),
            ],
            None,
        )
        .unwrap();
        let a = one.forward(&x, 11).unwrap();
        let b = split.forward(&x, 11).unwrap();
        assert_eq!(a, b);
        for t in 0..11 {
            let single = one.forward(&x[t * cols..(t + 1) * cols], 1).unwrap();
            for r in 0..rows {
                let got = a[t * rows + r];
                assert!((single[r] - got).abs() <= 1e-4 * (1.0 + got.abs()));
                let exact: f32 = (0..cols).map(|c| w[r * cols + c] * x[t * cols + c]).sum();
                assert!(
                    (got - exact).abs() < 0.05 * (1.0 + exact.abs()),
                    "{got} vs {exact}"
                );
            }
        }
        assert!(one.forward(&[0.0; 32], 1).is_err());
        assert!(one.forward(&x, 10).is_err());
        let owned = |n| TensorBytes::Owned(vec![0; n]);
        assert!(QMatrix::new(Kind::Q4_1, 2, 32, owned(39)).is_err());
        assert!(QMatrix::new(Kind::Q4K, 1, 32, owned(144)).is_err());
    }

    /// `rows` rows of `cols` values in `kind`'s blocks from `noise`, with every f16 scale
    /// set to `scale` (random bytes there could be NaN, and NaN equals nothing).
    fn blocks(kind: Kind, rows: usize, cols: usize, noise: &[u8], scale: f32) -> Vec<u8> {
        let len = rows * kind.row_bytes(cols);
        quant::with_scale(
            kind,
            noise.iter().cycle().take(len).copied().collect(),
            scale,
        )
    }

    proptest! {
        /// Weights read from the mapped file at any byte offset (so f16 scales and blocks
        /// at odd addresses) give exactly the products of the same bytes owned: the
        /// kernels assume no alignment.
        #[test]
        fn a_view_at_any_offset_computes_what_owned_bytes_do(
            kind in prop::sample::select(vec![Kind::Q4_0, Kind::Q4_1, Kind::Q8_0, Kind::Q4K, Kind::Q6K]),
            rows in 1usize..40,
            seq in 1usize..11,
            offset in 0usize..8,
            noise in prop::collection::vec(any::<u8>(), 1..512),
            scale in 0.001f32..0.1,
        ) {
            let cols = kind.block_values();
            let bytes = blocks(kind, rows, cols, &noise, scale);
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&vec![0xA5; offset]).unwrap();
            file.write_all(&bytes).unwrap();
            let map = Arc::new(FileMap::new(&file).unwrap());
            let view = TensorBytes::mapped(&map, offset..offset + bytes.len()).unwrap();
            let mapped = QMatrix::new(kind, rows, cols, view).unwrap();
            // The same rows as a view on top and owned bytes below, stacked as q/k/v are.
            let (top, rb) = (rows / 2 + 1, kind.row_bytes(cols));
            let upper = TensorBytes::mapped(&map, offset..offset + top * rb).unwrap();
            let lower = TensorBytes::Owned(bytes[top * rb..].to_vec());
            let stacked = QMatrix::new(kind, top, cols, upper)
                .unwrap()
                .stacked(QMatrix::new(kind, rows - top, cols, lower).unwrap())
                .unwrap();
            let owned = QMatrix::new(kind, rows, cols, TensorBytes::Owned(bytes)).unwrap();
            let x: Vec<f32> = (0..seq * cols).map(|i| ((i * 7 % 13) as f32 - 6.0) / 3.0).collect();
            let xq = quantize_activations(&x, cols);
            let (mut a, mut b) = (vec![0f32; seq * rows], vec![0f32; seq * rows]);
            mapped.matmul(&xq, seq, &mut a);
            owned.matmul(&xq, seq, &mut b);
            let mut c = vec![0f32; seq * rows];
            stacked.matmul(&xq, seq, &mut c);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(&c, &b);
            let (mut ra, mut rb) = (vec![0f32; cols], vec![0f32; cols]);
            mapped.row(rows - 1, &mut ra);
            owned.row(rows - 1, &mut rb);
            prop_assert_eq!(ra, rb);
        }
    }

    proptest! {
        /// A decoding product on a team gives the bits of the rayon path, whatever the
        /// chunk size (rows per claim, four-row kernel calls cut anywhere), the number
        /// of helpers, and for a projection of parts in two kinds with a bias.
        #[test]
        fn a_product_on_a_team_gives_the_same_bits_whatever_the_split(
            kind in prop::sample::select(vec![Kind::Q4_0, Kind::Q4_1, Kind::Q8_0, Kind::Q4K, Kind::Q6K]),
            rows in 1usize..150,
            chunk in 1usize..70,
            helpers in 0usize..3,
            noise in prop::collection::vec(any::<u8>(), 1..512),
            scale in 0.001f32..0.1,
        ) {
            let cols = 2 * kind.block_values();
            let m = Arc::new(
                QMatrix::new(kind, rows, cols, TensorBytes::Owned(blocks(kind, rows, cols, &noise, scale)))
                    .unwrap(),
            );
            let x: Vec<f32> = (0..cols).map(|i| ((i * 7 % 13) as f32 - 6.0) / 3.0).collect();
            let xq = Arc::new(quantize_activations(&x, cols));
            let mut want = vec![0f32; rows];
            m.matmul(&xq, 1, &mut want);
            let team = Team::new();
            let out: Arc<Vec<AtomicU32>> = Arc::new((0..rows).map(|_| AtomicU32::new(0)).collect());
            rayon::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|_| team.help());
                }
                let _finish = crate::team::Finish(&team);
                team.run(Arc::new(Matvec { m: m.clone(), x: xq.clone(), out: out.clone(), at: 0, chunk }));
            });
            let got: Vec<f32> = out.iter().map(|v| f32::from_bits(v.load(Ordering::Relaxed))).collect();
            prop_assert_eq!(&got, &want);
            // Two parts (the second in Q8_0) and a bias, as a Linear: forward_one's
            // numbers are forward's.
            let other = dense(&x.iter().cycle().take(3 * cols).copied().collect::<Vec<_>>(), 3, cols);
            let bias: Vec<f32> = (0..rows + 3).map(|i| i as f32 / 7.0).collect();
            let lin = Linear::new(vec![m, other], Some(bias)).unwrap();
            let team = Team::new();
            let one = rayon::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|_| team.help());
                }
                let _finish = crate::team::Finish(&team);
                lin.forward_one(&x, &team).unwrap()
            });
            prop_assert_eq!(one, lin.forward(&x, 1).unwrap());
            // Gate and up stacked (`rows` each), finished on the team: the product then
            // the activation, as forward and `gated` give them.
            let both = Arc::new(
                QMatrix::new(kind, 2 * rows, cols, TensorBytes::Owned(blocks(kind, 2 * rows, cols, &noise, scale)))
                    .unwrap(),
            );
            let lin = Linear::new(vec![both], None).unwrap();
            let act: fn(f32) -> f32 = |v| v / (1.0 + (-v).exp());
            let team = Team::new();
            let fused = rayon::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|_| team.help());
                }
                let _finish = crate::team::Finish(&team);
                lin.gated_one(&x, rows, act, &team).unwrap()
            });
            prop_assert_eq!(fused, gated(&lin.forward(&x, 1).unwrap(), rows, act));
        }
    }
}
