//! The transformer: Llama-family decoders (`llama`, and `qwen2`, which adds q/k/v biases
//! and non-interleaved rotary embeddings) on candle's quantized CPU kernels.
//!
//! Written here rather than taken from `candle_transformers::models::quantized_llama`
//! because that model caps positions at 4,096 (SmolLM2's window is 8,192), copies the whole
//! KV cache on every token, cannot keep a prompt prefix between calls, and runs Q4_1 (the
//! default model's type) without SIMD. Projections are in [`crate::linear`]; q/k/v and
//! gate/up are fused so each layer makes four products, not seven.

use crate::error::LocalError;
use crate::gguf::Metadata;
use crate::linear::{BLOCK, Linear, Q8Matrix};
use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use std::io::{Read, Seek};
use std::path::Path;
use std::sync::Arc;

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
    /// Divides each rotary frequency: `rope_freqs.weight` (Llama 3.1+ long-context
    /// scaling, stored by llama.cpp's converter) times a linear `rope.scaling.factor`.
    pub(crate) rope_divisors: Option<Vec<f32>>,
    /// `rope.scaling.type = linear`: positions are divided by this.
    pub(crate) rope_linear: f32,
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
        if n_head == 0
            || n_kv_head == 0
            || !n_embd.is_multiple_of(n_head)
            || !n_head.is_multiple_of(n_kv_head)
        {
            return Err(bad(
                "attention.head_count",
                "heads must divide the embedding and be a multiple of the KV heads",
            ));
        }
        let head_dim = n_embd / n_head;
        let rope_dim = md
            .opt_usize(&key("rope.dimension_count"))?
            .unwrap_or(head_dim);
        if rope_dim != head_dim || !head_dim.is_multiple_of(2) {
            return Err(LocalError::Unsupported(format!(
                "partial or odd rotary embedding ({rope_dim} of {head_dim} dimensions)"
            )));
        }
        let rope_base = md.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        // YaRN and others change long-context behaviour only; they are not applied.
        let rope_linear = match md.opt_string(&key("rope.scaling.type"))? {
            Some("linear") => md
                .opt_f32(&key("rope.scaling.factor"))?
                .filter(|f| f.is_finite() && *f > 0.0)
                .unwrap_or(1.0),
            _ => 1.0,
        };
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
            rope_divisors: None,
            rope_linear,
            rms_eps,
            qkv_bias,
        })
    }
}

/// Most bytes of f32 weight copies kept for prompt processing (SmolLM2-135M needs 425 MB);
/// matrices beyond it are dequantized each time a prompt chunk uses them, about 15% slower.
const DENSE_BUDGET_BYTES: usize = 512 << 20;

struct Layer {
    attn_norm: Tensor,
    /// q, k and v stacked: `n_embd + 2 * kv_dim` output rows.
    qkv: Linear,
    o: Linear,
    ffn_norm: Tensor,
    /// gate and up stacked: `2 * n_ff` output rows.
    gate_up: Linear,
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
    embed: Arc<Q8Matrix>,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Linear,
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

    /// Reads one tensor as f32, checking its shape.
    fn read(&mut self, name: &str, shape: &[usize]) -> Result<Tensor, LocalError> {
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
        if shape.last().is_some_and(|cols| !cols.is_multiple_of(block)) {
            return Err(self.invalid(format!(
                "tensor {name}: rows are not whole quantization blocks"
            )));
        }
        let q = self
            .content
            .tensor(self.reader, name, &self.device)
            .map_err(|e| {
                self.invalid(format!(
                    "tensor {name}: {}",
                    whittle_protocol::first_line(&e.to_string())
                ))
            })?;
        Ok(q.dequantize(&self.device)?)
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// A projection from the weights (and biases) of `parts`, stacked by output row.
    fn linear(
        &mut self,
        parts: &[(&str, usize)],
        cols: usize,
        bias: bool,
    ) -> Result<Linear, LocalError> {
        let mut weights = Vec::with_capacity(parts.len());
        let mut biases = Vec::with_capacity(parts.len());
        for (name, rows) in parts {
            weights.push(self.read(&format!("{name}.weight"), &[*rows, cols])?);
            let bias_name = format!("{name}.bias");
            if bias || self.has(&bias_name) {
                biases.push(self.read(&bias_name, &[*rows])?);
            }
        }
        let weight = Tensor::cat(&weights, 0)?;
        let bias = match biases.len() {
            0 => None,
            n if n == parts.len() => Some(Tensor::cat(&biases, 0)?),
            _ => {
                let first = parts.first().map_or("", |p| p.0);
                return Err(self.invalid(format!("{first} has biases on only some of its parts")));
            }
        };
        let bytes = weight.elem_count() * 4;
        let keep_dense = bytes <= self.dense_budget;
        if keep_dense {
            self.dense_budget -= bytes;
        }
        Ok(Linear::new(weight, bias, keep_dense)?)
    }
}

impl Transformer {
    pub(crate) fn load<R: Read + Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        path: &Path,
        mut cfg: Config,
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
        let (e, kv, ff) = (cfg.n_embd, cfg.n_kv_head * cfg.head_dim, cfg.n_ff);
        if !e.is_multiple_of(BLOCK) || !ff.is_multiple_of(BLOCK) {
            return Err(LocalError::Unsupported(format!(
                "embedding {e} or feed-forward {ff} is not a multiple of {BLOCK}"
            )));
        }
        let table = l.read("token_embd.weight", &[vocab, e])?;
        let values: Vec<f32> = table.flatten_all()?.to_vec1()?;
        let embed = Arc::new(Q8Matrix::new(&values, vocab, e)?);
        drop(values);
        let norm = l.read("output_norm.weight", &[e])?;
        let output = if l.has("output.weight") {
            Linear::new(l.read("output.weight", &[vocab, e])?, None, false)?
        } else {
            // Tied embeddings (SmolLM2): the output projection is the embedding table.
            Linear::shared(embed.clone())
        };
        // Every layer has several tensors: a block_count beyond that is a lie.
        if cfg.n_layer > content.tensor_infos.len() {
            return Err(l.invalid(format!(
                "block_count is {} but the file holds {} tensors",
                cfg.n_layer,
                content.tensor_infos.len()
            )));
        }
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let p = |name: &str| format!("blk.{i}.{name}");
            let (q, k, v) = (p("attn_q"), p("attn_k"), p("attn_v"));
            let (gate, up) = (p("ffn_gate"), p("ffn_up"));
            layers.push(Layer {
                attn_norm: l.read(&p("attn_norm.weight"), &[e])?,
                qkv: l.linear(&[(&q, e), (&k, kv), (&v, kv)], e, cfg.qkv_bias)?,
                o: l.linear(&[(&p("attn_output"), e)], e, false)?,
                ffn_norm: l.read(&p("ffn_norm.weight"), &[e])?,
                gate_up: l.linear(&[(&gate, ff), (&up, ff)], e, false)?,
                down: l.linear(&[(&p("ffn_down"), e)], ff, false)?,
            });
        }
        if l.has("rope_freqs.weight") {
            let factors: Vec<f32> = l
                .read("rope_freqs.weight", &[cfg.head_dim / 2])?
                .to_vec1()?;
            if factors.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
                return Err(l.invalid("rope_freqs.weight holds a non-positive factor".into()));
            }
            cfg.rope_divisors = Some(factors);
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
        let mut rows = vec![0f32; seq * c.n_embd];
        for (&id, row) in tokens.iter().zip(rows.chunks_exact_mut(c.n_embd)) {
            if id as usize >= self.vocab {
                candle_core::bail!("token {id} is outside the vocabulary");
            }
            self.embed.row(id as usize, row);
        }
        let mut x = Tensor::from_vec(rows, (seq, c.n_embd), &self.device)?;
        let (cos, sin) = rope_tables(c, pos, seq, &self.device)?;
        let mask = (seq > 1)
            .then(|| causal_mask(pos, seq, &self.device))
            .transpose()?;
        let scale = 1.0 / (hd as f64).sqrt();
        for (i, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, c.rms_eps)?;
            let heads = |t: Tensor, n: usize| -> candle_core::Result<Tensor> {
                t.contiguous()?
                    .reshape((1, seq, n, hd))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let qkv = layer.qkv.forward(&h)?;
            let (e, kvd) = (n_head * hd, n_kv * hd);
            let q = heads(qkv.narrow(1, 0, e)?, n_head)?;
            let k = heads(qkv.narrow(1, e, kvd)?, n_kv)?;
            let v = heads(qkv.narrow(1, e + kvd, kvd)?, n_kv)?;
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
            let gate_up = layer.gate_up.forward(&h)?;
            let g = candle_nn::ops::silu(&gate_up.narrow(1, 0, c.n_ff)?)?;
            let y = layer
                .down
                .forward(&(g * gate_up.narrow(1, c.n_ff, c.n_ff)?)?)?;
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
    let divisor = |i: usize| {
        let factor = c.rope_divisors.as_ref().and_then(|d| d.get(i)).copied();
        f64::from(factor.unwrap_or(1.0)) * f64::from(c.rope_linear)
    };
    let inv_freq: Vec<f64> = (0..half)
        .map(|i| 1.0 / (base.powf((2 * i) as f64 / c.head_dim as f64) * divisor(i)))
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

    #[test]
    fn rope_divisors_and_linear_scaling_slow_the_rotation() {
        let cfg = |divisors: Option<Vec<f32>>, linear: f32| Config {
            n_layer: 1,
            n_embd: 8,
            n_head: 2,
            n_kv_head: 2,
            head_dim: 4,
            n_ff: 8,
            context_length: 64,
            rope_base: 10_000.0,
            rope_neox: false,
            rope_divisors: divisors,
            rope_linear: linear,
            rms_eps: 1e-6,
            qkv_bias: false,
        };
        let cos = |c: &Config, pos: usize| -> Vec<f32> {
            let (cos, _) = rope_tables(c, pos, 1, &Device::Cpu).unwrap();
            cos.flatten_all().unwrap().to_vec1().unwrap()
        };
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        let plain = cfg(None, 1.0);
        // A divisor of 2 at position 10 turns as far as no divisor at position 5.
        let halved = cfg(Some(vec![2.0, 2.0]), 1.0);
        assert!(close(&cos(&halved, 10), &cos(&plain, 5)));
        assert!(close(&cos(&cfg(None, 2.0), 10), &cos(&plain, 5)));
        assert!(!close(&cos(&plain, 10), &cos(&plain, 5)));
        // Per frequency: only the second one slows down.
        let mixed = cos(&cfg(Some(vec![1.0, 4.0]), 1.0), 8);
        assert!(close(&mixed[..1], &cos(&plain, 8)[..1]));
        assert!(close(&mixed[1..], &cos(&plain, 2)[1..]));
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
