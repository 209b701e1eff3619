//! The transformer: Llama-family decoders (`llama`, and `qwen2`, which adds q/k/v biases
//! and non-interleaved rotary embeddings) on candle's quantized CPU kernels.
//!
//! Written here rather than taken from `candle_transformers::models::quantized_llama`
//! because that model caps positions at 4,096 (SmolLM2's window is 8,192), copies the whole
//! KV cache on every token, and cannot keep a prompt prefix between calls. Weights in
//! quantizations candle has no SIMD kernel for (Q4_1, Q5_0, Q5_1) are converted to Q8_0 at
//! load, which is near-lossless and several times faster on x86. Prompt processing
//! (many rows at once) runs on f32 copies of the weights through candle's GEMM, about five
//! times faster than quantized dot products; decoding (one row) reads the quantized weights.

use crate::error::LocalError;
use crate::gguf::Metadata;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Tensor};
use std::io::{Read, Seek};
use std::path::Path;

/// Shapes and constants of a model, from `<arch>.*` metadata.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) n_layer: usize,
    pub(crate) n_embd: usize,
    pub(crate) n_head: usize,
    pub(crate) n_kv_head: usize,
    pub(crate) head_dim: usize,
    pub(crate) n_ff: usize,
    pub(crate) context_length: usize,
    pub(crate) rope_base: f32,
    pub(crate) rope_neox: bool,
    pub(crate) rms_eps: f32,
    pub(crate) qkv_bias: bool,
}

impl Config {
    pub(crate) fn from_metadata(md: &Metadata<'_>, arch: &str) -> Result<Self, LocalError> {
        let (rope_neox, qkv_bias) = match arch {
            "llama" => (false, false),
            "qwen2" => (true, true),
            other => {
                return Err(LocalError::Unsupported(format!(
                    "architecture {other:?} (supported: llama, qwen2)"
                )));
            }
        };
        let key = |k: &str| format!("{arch}.{k}");
        let n_layer = md.usize(&key("block_count"))?;
        let n_embd = md.usize(&key("embedding_length"))?;
        let n_head = md.usize(&key("attention.head_count"))?;
        let n_kv_head = md
            .opt_usize(&key("attention.head_count_kv"))?
            .unwrap_or(n_head);
        let n_ff = md.usize(&key("feed_forward_length"))?;
        let context_length = md.usize(&key("context_length"))?;
        let bad = |k: &str, m: &str| LocalError::Metadata {
            key: key(k),
            message: m.to_string(),
        };
        if n_layer == 0 || n_embd == 0 || n_ff == 0 || context_length == 0 {
            return Err(bad("block_count", "model dimensions must be positive"));
        }
        if n_head == 0 || n_kv_head == 0 || n_embd % n_head != 0 || n_head % n_kv_head != 0 {
            return Err(bad(
                "attention.head_count",
                "heads must divide the embedding and be a multiple of the KV heads",
            ));
        }
        let head_dim = n_embd / n_head;
        let rope_dim = md
            .opt_usize(&key("rope.dimension_count"))?
            .unwrap_or(head_dim);
        if rope_dim != head_dim || head_dim % 2 != 0 {
            return Err(LocalError::Unsupported(format!(
                "partial or odd rotary embedding ({rope_dim} of {head_dim} dimensions)"
            )));
        }
        let rope_base = md.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        let rms_eps = md
            .opt_f32(&key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-6);
        Ok(Config {
            n_layer,
            n_embd,
            n_head,
            n_kv_head,
            head_dim,
            n_ff,
            context_length,
            rope_base,
            rope_neox,
            rms_eps,
            qkv_bias,
        })
    }
}

/// Rows at or above which a projection runs as a dense f32 GEMM rather than quantized
/// dot products: prompt processing is compute-bound and the GEMM is several times faster,
/// while one row (decoding) is memory-bound and reads the smaller quantized weights.
const DENSE_MIN_ROWS: usize = 8;

/// Most bytes of f32 weight copies kept for dense prompt processing (SmolLM2-135M needs
/// 425 MB); matrices beyond it are dequantized each time they are used, about 15% slower.
const DENSE_BUDGET_BYTES: usize = 512 << 20;

/// A projection: quantized weight, optional f32 copy for many rows at once, optional bias.
struct Linear {
    weight: QMatMul,
    dense: Option<Tensor>,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = match (&self.weight, &self.dense) {
            (_, Some(w)) if x.dim(0)? >= DENSE_MIN_ROWS => x.matmul(&w.t()?)?,
            (QMatMul::QTensor(q), None) if x.dim(0)? >= DENSE_MIN_ROWS => {
                x.matmul(&q.dequantize(x.device())?.t()?)?
            }
            (w, _) => w.forward(x)?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

struct Layer {
    attn_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// Keys and values of past positions, per layer, in buffers that grow by doubling so a
/// decode step writes one row instead of copying the cache.
struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
    capacity: usize,
}

impl KvCache {
    fn new(n_layer: usize) -> Self {
        KvCache {
            layers: (0..n_layer).map(|_| None).collect(),
            len: 0,
            capacity: 0,
        }
    }

    fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| *l = None);
        self.len = 0;
        self.capacity = 0;
    }

    /// Makes room for `needed` positions in every layer, keeping what is cached.
    fn reserve(
        &mut self,
        needed: usize,
        max: usize,
        shape: (usize, usize),
        dev: &Device,
    ) -> candle_core::Result<()> {
        if needed <= self.capacity {
            return Ok(());
        }
        let capacity = needed.max(self.capacity * 2).max(256).min(max.max(needed));
        let (n_kv, head_dim) = shape;
        for slot in &mut self.layers {
            let k = Tensor::zeros((n_kv, capacity, head_dim), DType::F32, dev)?;
            let v = Tensor::zeros((n_kv, capacity, head_dim), DType::F32, dev)?;
            if let Some((old_k, old_v)) = slot.as_ref()
                && self.len > 0
            {
                k.slice_set(&old_k.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                v.slice_set(&old_v.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
            }
            *slot = Some((k, v));
        }
        self.capacity = capacity;
        Ok(())
    }

    /// Writes `k`, `v` (n_kv, seq, head_dim) at `pos` and returns the cache up to `pos + seq`.
    fn append(
        &self,
        layer: usize,
        pos: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let Some((ck, cv)) = self.layers.get(layer).and_then(Option::as_ref) else {
            candle_core::bail!("kv cache not reserved");
        };
        ck.slice_set(k, 1, pos)?;
        cv.slice_set(v, 1, pos)?;
        let len = pos + k.dim(1)?;
        Ok((ck.narrow(1, 0, len)?, cv.narrow(1, 0, len)?))
    }
}

/// The loaded weights and the KV cache.
pub(crate) struct Transformer {
    cfg: Config,
    embed: QTensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QMatMul,
    vocab: usize,
    cache: KvCache,
    device: Device,
}

/// Reads one tensor, checking its shape, and converts quantizations without fast kernels.
struct Loader<'a, R> {
    content: &'a gguf_file::Content,
    reader: &'a mut R,
    path: &'a Path,
    device: Device,
    /// Bytes of f32 copies still allowed.
    dense_budget: usize,
}

impl<R: Read + Seek> Loader<'_, R> {
    fn invalid(&self, message: String) -> LocalError {
        LocalError::InvalidModel {
            path: self.path.to_path_buf(),
            message,
        }
    }

    fn raw(&mut self, name: &str, shape: &[usize]) -> Result<QTensor, LocalError> {
        let Some(info) = self.content.tensor_infos.get(name) else {
            return Err(self.invalid(format!("tensor {name} is missing")));
        };
        if info.shape.dims() != shape {
            return Err(self.invalid(format!(
                "tensor {name} has shape {:?}, expected {shape:?}",
                info.shape.dims()
            )));
        }
        let block = info.ggml_dtype.block_size();
        if shape.last().is_some_and(|cols| cols % block != 0) {
            return Err(self.invalid(format!(
                "tensor {name}: rows are not whole quantization blocks"
            )));
        }
        self.content
            .tensor(self.reader, name, &self.device)
            .map_err(|e| {
                self.invalid(format!(
                    "tensor {name}: {}",
                    crate::error::one_line(&e.to_string())
                ))
            })
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor, LocalError> {
        let q = self.raw(name, &[len])?;
        Ok(q.dequantize(&self.device)?)
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<QMatMul, LocalError> {
        let q = fast_kernel(self.raw(name, &[rows, cols])?, &self.device)?;
        Ok(QMatMul::from_qtensor(q)?)
    }

    fn linear(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        bias: bool,
    ) -> Result<Linear, LocalError> {
        let weight = self.matrix(&format!("{name}.weight"), rows, cols)?;
        let bytes = rows * cols * 4;
        let dense = match &weight {
            QMatMul::QTensor(q) if bytes <= self.dense_budget => {
                self.dense_budget -= bytes;
                Some(q.dequantize(&self.device)?)
            }
            _ => None,
        };
        let bias_name = format!("{name}.bias");
        let bias = if bias || self.has(&bias_name) {
            Some(self.vector(&bias_name, rows)?)
        } else {
            None
        };
        Ok(Linear {
            weight,
            dense,
            bias,
        })
    }
}

/// Converts a quantized tensor to Q8_0 when candle has no SIMD dot product for its type.
fn fast_kernel(q: QTensor, device: &Device) -> Result<QTensor, LocalError> {
    match q.dtype() {
        GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
            let t = q.dequantize(device)?;
            Ok(QTensor::quantize(&t, GgmlDType::Q8_0)?)
        }
        _ => Ok(q),
    }
}

impl Transformer {
    pub(crate) fn load<R: Read + Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        path: &Path,
        cfg: Config,
    ) -> Result<Self, LocalError> {
        let device = Device::Cpu;
        let mut l = Loader {
            content,
            reader,
            path,
            device: device.clone(),
            dense_budget: DENSE_BUDGET_BYTES,
        };
        let Some(embd_info) = content.tensor_infos.get("token_embd.weight") else {
            return Err(l.invalid("tensor token_embd.weight is missing".into()));
        };
        let vocab = embd_info.shape.dims().first().copied().unwrap_or(0);
        let (e, kv) = (cfg.n_embd, cfg.n_kv_head * cfg.head_dim);
        let embed = fast_kernel(l.raw("token_embd.weight", &[vocab, e])?, &device)?;
        let norm = l.vector("output_norm.weight", e)?;
        let output = if l.has("output.weight") {
            l.matrix("output.weight", vocab, e)?
        } else {
            // Tied embeddings (SmolLM2): the output projection is the embedding table.
            QMatMul::from_qtensor(fast_kernel(
                l.raw("token_embd.weight", &[vocab, e])?,
                &device,
            )?)?
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let p = format!("blk.{i}");
            layers.push(Layer {
                attn_norm: l.vector(&format!("{p}.attn_norm.weight"), e)?,
                q: l.linear(&format!("{p}.attn_q"), e, e, cfg.qkv_bias)?,
                k: l.linear(&format!("{p}.attn_k"), kv, e, cfg.qkv_bias)?,
                v: l.linear(&format!("{p}.attn_v"), kv, e, cfg.qkv_bias)?,
                o: l.linear(&format!("{p}.attn_output"), e, e, false)?,
                ffn_norm: l.vector(&format!("{p}.ffn_norm.weight"), e)?,
                gate: l.linear(&format!("{p}.ffn_gate"), cfg.n_ff, e, false)?,
                up: l.linear(&format!("{p}.ffn_up"), cfg.n_ff, e, false)?,
                down: l.linear(&format!("{p}.ffn_down"), e, cfg.n_ff, false)?,
            });
        }
        let cache = KvCache::new(cfg.n_layer);
        Ok(Transformer {
            cfg,
            embed,
            layers,
            norm,
            output,
            vocab,
            cache,
            device,
        })
    }

    /// Rows of the embedding table (the logits' length).
    pub(crate) fn vocab(&self) -> usize {
        self.vocab
    }

    /// Positions currently held in the KV cache.
    pub(crate) fn cached_len(&self) -> usize {
        self.cache.len
    }

    /// Forgets cached positions from `len` on.
    pub(crate) fn truncate_cache(&mut self, len: usize) {
        self.cache.len = self.cache.len.min(len);
    }

    /// Drops the cache entirely (and its memory).
    pub(crate) fn clear_cache(&mut self) {
        self.cache.clear();
    }

    /// Runs `tokens` at positions `cached_len()..`, extends the cache, and returns the
    /// logits after the last token. On error the cache is cleared, never left half-written.
    pub(crate) fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        let result = self.forward_inner(tokens);
        if result.is_err() {
            self.cache.clear();
        }
        result.map_err(LocalError::from)
    }

    fn forward_inner(&mut self, tokens: &[u32]) -> candle_core::Result<Vec<f32>> {
        let seq = tokens.len();
        let pos = self.cache.len;
        if seq == 0 || pos + seq > self.cfg.context_length {
            candle_core::bail!("{seq} tokens at position {pos} do not fit the context window");
        }
        let c = &self.cfg;
        let (n_head, n_kv, hd) = (c.n_head, c.n_kv_head, c.head_dim);
        let n_rep = n_head / n_kv;
        self.cache
            .reserve(pos + seq, c.context_length, (n_kv, hd), &self.device)?;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = self.embed.embedding(&ids)?;
        let (cos, sin) = rope_tables(c, pos, seq, &self.device)?;
        let mask = (seq > 1)
            .then(|| causal_mask(pos, seq, &self.device))
            .transpose()?;
        let scale = 1.0 / (hd as f64).sqrt();
        for (i, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, c.rms_eps)?;
            let heads = |t: Tensor, n: usize| -> candle_core::Result<Tensor> {
                t.reshape((1, seq, n, hd))?.transpose(1, 2)?.contiguous()
            };
            let q = heads(layer.q.forward(&h)?, n_head)?;
            let k = heads(layer.k.forward(&h)?, n_kv)?;
            let v = heads(layer.v.forward(&h)?, n_kv)?;
            let (q, k) = if c.rope_neox {
                (
                    candle_nn::rotary_emb::rope(&q, &cos, &sin)?,
                    candle_nn::rotary_emb::rope(&k, &cos, &sin)?,
                )
            } else {
                (
                    candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?,
                    candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?,
                )
            };
            let (k, v) = self.cache.append(i, pos, &k.squeeze(0)?, &v.squeeze(0)?)?;
            let kv_len = pos + seq;
            // Query heads sharing a KV head are stacked as rows: no copy of K or V.
            let q = q.reshape((n_kv, n_rep * seq, hd))?;
            let mut att = (q.matmul(&k.t()?)? * scale)?;
            if let Some(mask) = &mask {
                att = att
                    .reshape((n_kv, n_rep, seq, kv_len))?
                    .broadcast_add(mask)?
                    .reshape((n_kv, n_rep * seq, kv_len))?;
            }
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att
                .matmul(&v)?
                .reshape((n_head, seq, hd))?
                .transpose(0, 1)?
                .reshape((seq, n_head * hd))?;
            x = (x + layer.o.forward(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, c.rms_eps)?;
            let g = candle_nn::ops::silu(&layer.gate.forward(&h)?)?;
            let y = layer.down.forward(&(g * layer.up.forward(&h)?)?)?;
            x = (x + y)?;
        }
        self.cache.len = pos + seq;
        let last = x.narrow(0, seq - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, c.rms_eps)?;
        self.output
            .forward(&last)?
            .squeeze(0)?
            .to_dtype(DType::F32)?
            .to_vec1()
    }
}

/// Cosines and sines of the rotary embedding for positions `pos..pos + seq`.
fn rope_tables(
    c: &Config,
    pos: usize,
    seq: usize,
    dev: &Device,
) -> candle_core::Result<(Tensor, Tensor)> {
    let half = c.head_dim / 2;
    let base = f64::from(c.rope_base);
    let inv_freq: Vec<f64> = (0..half)
        .map(|i| 1.0 / base.powf((2 * i) as f64 / c.head_dim as f64))
        .collect();
    let mut cos = Vec::with_capacity(seq * half);
    let mut sin = Vec::with_capacity(seq * half);
    for p in pos..pos + seq {
        for f in &inv_freq {
            let angle = p as f64 * f;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (seq, half), dev)?,
        Tensor::from_vec(sin, (seq, half), dev)?,
    ))
}

/// Additive mask (seq, pos + seq): query `i` sees keys up to `pos + i`.
fn causal_mask(pos: usize, seq: usize, dev: &Device) -> candle_core::Result<Tensor> {
    let kv = pos + seq;
    let mask: Vec<f32> = (0..seq)
        .flat_map(|i| (0..kv).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Tensor::from_vec(mask, (seq, kv), dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three ways a projection can run (kept f32 copy, dequantized on use, quantized
    /// dot products row by row) agree up to activation quantization error.
    #[test]
    fn dense_and_quantized_projections_agree() {
        let dev = Device::Cpu;
        let w: Vec<f32> = (0..48 * 64)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let w = Tensor::from_vec(w, (48, 64), &dev).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let x: Vec<f32> = (0..10 * 64)
            .map(|i| ((i * 13 % 29) as f32 / 14.0) - 1.0)
            .collect();
        let x = Tensor::from_vec(x, (10, 64), &dev).unwrap();
        let bias = Some(Tensor::ones(48, DType::F32, &dev).unwrap());
        let dense = q.dequantize(&dev).unwrap();
        let q = std::sync::Arc::new(q);
        let kept = Linear {
            weight: QMatMul::from_arc(q.clone()).unwrap(),
            dense: Some(dense),
            bias: bias.clone(),
        };
        let on_use = Linear {
            weight: QMatMul::from_arc(q).unwrap(),
            dense: None,
            bias,
        };
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
        assert_eq!(diff(&a, &b), 0.0);
        let scale: f32 = a.abs().unwrap().max_all().unwrap().to_scalar().unwrap();
        assert!(diff(&a, &c) < 0.02 * scale, "{} vs {scale}", diff(&a, &c));
    }

    #[test]
    fn causal_mask_lets_each_query_see_only_the_past() {
        let m: Vec<Vec<f32>> = causal_mask(2, 3, &Device::Cpu).unwrap().to_vec2().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(
            m,
            vec![
                vec![0.0, 0.0, 0.0, inf, inf],
                vec![0.0, 0.0, 0.0, 0.0, inf],
                vec![0.0, 0.0, 0.0, 0.0, 0.0],
            ]
        );
    }
}
