//! Projections (`x · Wᵀ + b`) with two kernels: one row at a time on 8-bit weights, and
//! many rows at once as a dense f32 GEMM.
//!
//! Decoding multiplies one row: memory-bound, so it reads 8-bit weights (see [`crate::q8`])
//! spread over rayon. Work stealing matters here: when the machine is busy, candle's own spinning thread pool stalls at every barrier (measured:
//! 3 tokens/s instead of 25 under a parallel build), while rayon lets the running thread
//! take over chunks a descheduled one has not started. Prompt processing multiplies many
//! rows: compute-bound, so it runs f32 weights through candle's GEMM, about five times
//! faster than quantized dot products.

use crate::q8::{self, Q8Block};
use candle_core::{Device, Tensor};
use rayon::prelude::*;

/// Rows at or above which a product runs as a dense GEMM.
pub(crate) const DENSE_MIN_ROWS: usize = 8;

/// Output rows per rayon task in a one-row product.
const MATVEC_CHUNK: usize = 64;

pub(crate) use crate::q8::BLOCK;

/// A row-major matrix in Q8 blocks.
pub(crate) struct Q8Matrix {
    rows: usize,
    cols: usize,
    blocks: Vec<Q8Block>,
}

/// Blocks quantized per rayon task when loading weights.
const QUANTIZE_CHUNK: usize = 4096;

/// Quantizes `x` (a multiple of [`BLOCK`] long) to Q8 blocks, in parallel when large.
pub(crate) fn quantize(x: &[f32]) -> Vec<Q8Block> {
    let mut blocks = vec![Q8Block::default(); x.len() / BLOCK];
    let x = &x[..blocks.len() * BLOCK];
    if blocks.len() <= QUANTIZE_CHUNK {
        q8::quantize_into(x, &mut blocks);
    } else {
        blocks
            .par_chunks_mut(QUANTIZE_CHUNK)
            .zip(x.par_chunks(QUANTIZE_CHUNK * BLOCK))
            .for_each(|(blocks, x)| q8::quantize_into(x, blocks));
    }
    blocks
}

impl Q8Matrix {
    /// Quantizes a row-major f32 matrix; `cols` must be a multiple of [`BLOCK`].
    pub(crate) fn new(values: &[f32], rows: usize, cols: usize) -> candle_core::Result<Self> {
        if !cols.is_multiple_of(BLOCK) || rows.checked_mul(cols) != Some(values.len()) {
            candle_core::bail!("a {rows}x{cols} matrix cannot be held in Q8 blocks");
        }
        Ok(Q8Matrix {
            rows,
            cols,
            blocks: quantize(values),
        })
    }

    fn row_blocks(&self, r: usize) -> &[Q8Block] {
        let per_row = self.cols / BLOCK;
        &self.blocks[r * per_row..(r + 1) * per_row]
    }

    /// `out[r] = W[r] · x` for a quantized row `x`.
    fn matvec(&self, x: &[Q8Block], out: &mut [f32]) {
        out.par_chunks_mut(MATVEC_CHUNK)
            .enumerate()
            .for_each(|(chunk, out)| {
                let first = chunk * MATVEC_CHUNK;
                let mut quads = out.chunks_exact_mut(4);
                let mut r = first;
                for quad in &mut quads {
                    let rows = [
                        self.row_blocks(r),
                        self.row_blocks(r + 1),
                        self.row_blocks(r + 2),
                        self.row_blocks(r + 3),
                    ];
                    quad.copy_from_slice(&q8::dot4(rows, x));
                    r += 4;
                }
                for o in quads.into_remainder() {
                    *o = q8::dot(self.row_blocks(r), x);
                    r += 1;
                }
            });
    }

    /// Row `r` as f32 (an embedding lookup).
    pub(crate) fn row(&self, r: usize, out: &mut [f32]) {
        q8::dequantize_into(self.row_blocks(r), &mut out[..self.cols]);
    }

    /// The whole matrix as an f32 tensor.
    fn dequantize(&self, device: &Device) -> candle_core::Result<Tensor> {
        let mut values = vec![0f32; self.rows * self.cols];
        q8::dequantize_into(&self.blocks, &mut values);
        Tensor::from_vec(values, (self.rows, self.cols), device)
    }
}

/// A projection: 8-bit weights, an optional f32 copy for many rows, an optional bias.
pub(crate) struct Linear {
    q8: std::sync::Arc<Q8Matrix>,
    dense: Option<Tensor>,
    bias: Option<Tensor>,
}

impl Linear {
    /// A projection from f32 weights `(rows, cols)`; keeps them for GEMMs when `keep_dense`.
    pub(crate) fn new(
        weight: Tensor,
        bias: Option<Tensor>,
        keep_dense: bool,
    ) -> candle_core::Result<Self> {
        let (rows, cols) = weight.dims2()?;
        let values: Vec<f32> = weight.flatten_all()?.to_vec1()?;
        let q8 = std::sync::Arc::new(Q8Matrix::new(&values, rows, cols)?);
        Ok(Linear {
            q8,
            dense: keep_dense.then_some(weight),
            bias,
        })
    }

    /// A projection sharing already quantized weights (tied embeddings).
    pub(crate) fn shared(q8: std::sync::Arc<Q8Matrix>) -> Self {
        Linear {
            q8,
            dense: None,
            bias: None,
        }
    }

    /// `x · Wᵀ + b` for `x` of shape `(rows, cols)`.
    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (m, cols) = x.dims2()?;
        if cols != self.q8.cols {
            candle_core::bail!("projection expects {} columns, got {cols}", self.q8.cols);
        }
        let y = if m >= DENSE_MIN_ROWS {
            let w = match &self.dense {
                Some(w) => w.clone(),
                None => self.q8.dequantize(x.device())?,
            };
            x.matmul(&w.t()?)?
        } else {
            let rows = self.q8.rows;
            let xs: Vec<f32> = x.flatten_all()?.to_vec1()?;
            let mut out = vec![0f32; m * rows];
            for (row, out) in xs.chunks_exact(cols).zip(out.chunks_exact_mut(rows)) {
                self.q8.matvec(&quantize(row), out);
            }
            Tensor::from_vec(out, (m, rows), x.device())?
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;

    /// Both kernels, and the dense kernel without a kept copy, agree up to the error of
    /// quantizing the input row.
    #[test]
    fn one_row_and_many_row_kernels_agree() {
        let dev = Device::Cpu;
        let w: Vec<f32> = (0..70 * 64)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let w = Tensor::from_vec(w, (70, 64), &dev).unwrap();
        let x: Vec<f32> = (0..10 * 64)
            .map(|i| ((i * 13 % 29) as f32 / 14.0) - 1.0)
            .collect();
        let x = Tensor::from_vec(x, (10, 64), &dev).unwrap();
        let bias = Some(Tensor::ones(70, DType::F32, &dev).unwrap());
        let kept = Linear::new(w.clone(), bias.clone(), true).unwrap();
        let on_use = Linear::new(w.clone(), bias, false).unwrap();
        let exact = x
            .matmul(&w.t().unwrap())
            .unwrap()
            .broadcast_add(&Tensor::ones(70, DType::F32, &dev).unwrap())
            .unwrap();
        let a = kept.forward(&x).unwrap();
        let b = on_use.forward(&x).unwrap();
        let rows: Vec<Tensor> = (0..10)
            .map(|r| kept.forward(&x.narrow(0, r, 1).unwrap()).unwrap())
            .collect();
        let c = Tensor::cat(&rows, 0).unwrap();
        let diff = |u: &Tensor, v: &Tensor| -> f32 {
            (u - v)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar()
                .unwrap()
        };
        let scale: f32 = exact.abs().unwrap().max_all().unwrap().to_scalar().unwrap();
        assert_eq!(diff(&a, &exact), 0.0);
        assert!(diff(&b, &exact) < 0.01 * scale, "{}", diff(&b, &exact));
        assert!(
            diff(&c, &exact) < 0.02 * scale,
            "{} vs {scale}",
            diff(&c, &exact)
        );
        assert!(
            kept.forward(&Tensor::zeros((1, 32), DType::F32, &dev).unwrap())
                .is_err()
        );
    }

    #[test]
    fn rows_dequantize_and_bad_shapes_are_refused() {
        let values: Vec<f32> = (0..2 * 32).map(|i| i as f32 / 8.0).collect();
        let m = Q8Matrix::new(&values, 2, 32).unwrap();
        let mut row = vec![0f32; 32];
        m.row(1, &mut row);
        for (got, want) in row.iter().zip(&values[32..]) {
            assert!((got - want).abs() < 0.05, "{got} vs {want}");
        }
        assert!(Q8Matrix::new(&values, 4, 16).is_err());
        assert!(Q8Matrix::new(&values, 3, 32).is_err());
    }
}
