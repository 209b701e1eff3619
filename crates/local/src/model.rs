//! The transformer: Llama-family decoders (`llama`, and `qwen2`, which adds q/k/v biases
//! and non-interleaved rotary embeddings) on this crate's quantized CPU kernels, in plain
//! `Vec<f32>` arithmetic between the projections.
//!
//! Written here rather than taken from a library because the quantized Llama we measured
//! capped positions at 4,096 (SmolLM2's window is 8,192), copied the whole KV cache on every
//! token, could not keep a prompt prefix between calls, and ran Q4_1 (the default model's
//! type) without SIMD. Projections are in [`crate::linear`]; q/k/v and
//! gate/up are fused so each layer makes four products, not seven.

use crate::attention::{Shape, attend};
use crate::error::LocalError;
use crate::file_map::FileMap;
use crate::gguf::{Content, Metadata, TensorInfo};
use crate::linear::{Linear, QMatrix, gated, q8_0_bytes};
use crate::prompt_cache::KvShape;
use crate::quant::{BLOCK, Kind};
use crate::team::{Finish, Team};
use crate::tensor_bytes::TensorBytes;
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

struct Layer {
    attn_norm: Vec<f32>,
    /// q, k and v stacked: `n_embd + 2 * kv_dim` output rows.
    qkv: Linear,
    o: Linear,
    ffn_norm: Vec<f32>,
    /// gate and up stacked: `2 * n_ff` output rows.
    gate_up: Linear,
    down: Linear,
}

/// Keys and values of past positions, per layer, laid out `[kv head][position][dim]` in
/// buffers that grow by doubling, so a decode step writes one row instead of copying.
struct KvCache {
    /// Per layer: keys, values.
    layers: Vec<(Vec<f32>, Vec<f32>)>,
    len: usize,
    capacity: usize,
}

impl KvCache {
    fn new(n_layer: usize) -> Self {
        KvCache {
            layers: (0..n_layer).map(|_| (Vec::new(), Vec::new())).collect(),
            len: 0,
            capacity: 0,
        }
    }

    fn clear(&mut self) {
        self.layers
            .iter_mut()
            .for_each(|l| *l = (Vec::new(), Vec::new()));
        self.len = 0;
        self.capacity = 0;
    }

    /// Makes room for `needed` positions in every layer, keeping what is cached.
    fn reserve(&mut self, needed: usize, max: usize, n_kv: usize, head_dim: usize) {
        if needed <= self.capacity {
            return;
        }
        let capacity = needed.max(self.capacity * 2).max(256).min(max.max(needed));
        let (old, len) = (self.capacity, self.len);
        for (k, v) in &mut self.layers {
            for buf in [k, v] {
                let mut grown = vec![0f32; n_kv * capacity * head_dim];
                for g in 0..n_kv {
                    let from = &buf[g * old * head_dim..][..len * head_dim];
                    grown[g * capacity * head_dim..][..len * head_dim].copy_from_slice(from);
                }
                *buf = grown;
            }
        }
        self.capacity = capacity;
    }
}

/// The loaded weights and the KV cache.
pub(crate) struct Transformer {
    cfg: Config,
    embed: Arc<QMatrix>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Linear,
    vocab: usize,
    cache: KvCache,
    /// Decoding steps left to run on rayon alone, after a step's team stalled on a
    /// helper that lost its core (see [`crate::team`]).
    team_backoff: usize,
}

/// Decoding steps run without a team after one stalled: a busy machine stays busy for
/// a while, and one step in this many retries the team.
const TEAM_BACKOFF: usize = 64;

/// Finds one tensor in the mapped file, checking its shape, and converts quantizations
/// without fast kernels.
struct Loader<'a> {
    content: &'a Content,
    map: &'a Arc<FileMap>,
    path: &'a Path,
}

impl<'a> Loader<'a> {
    fn invalid(&self, message: String) -> LocalError {
        LocalError::InvalidModel {
            path: self.path.to_path_buf(),
            message,
        }
    }

    fn info(&self, name: &str) -> Result<&'a TensorInfo, LocalError> {
        let content: &'a Content = self.content;
        content
            .tensor_infos
            .get(name)
            .ok_or_else(|| self.invalid(format!("tensor {name} is missing")))
    }

    /// The stored bytes of tensor `info`: a view of the map, checked to lie inside it.
    fn bytes(&self, name: &str, info: &TensorInfo) -> Result<TensorBytes, LocalError> {
        self.content
            .tensor_range(info)
            .and_then(|range| TensorBytes::mapped(self.map, range))
            .ok_or_else(|| self.invalid(format!("tensor {name} lies beyond the end of the file")))
    }

    /// Reads one tensor as f32, checking its shape.
    fn read(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LocalError> {
        let info = self.info(name)?;
        if info.dims != shape {
            return Err(self.invalid(format!(
                "tensor {name} has shape {:?}, expected {shape:?}",
                info.dims
            )));
        }
        if shape
            .last()
            .is_some_and(|cols| !cols.is_multiple_of(info.ty.block_values()))
        {
            return Err(self.invalid(format!(
                "tensor {name}: rows are not whole quantization blocks"
            )));
        }
        let data = self.bytes(name, info)?;
        crate::dequant::dequantize(info.ty, &data).ok_or_else(|| {
            self.invalid(format!(
                "tensor {name}: type {:?} is not supported",
                info.ty
            ))
        })
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// One weight matrix in its file blocks: the kinds with a kernel are read as stored;
    /// any other is converted once to Q8_0 (never kept as f32).
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<QMatrix, LocalError> {
        let info = self.info(name)?;
        if info.dims != [rows, cols] {
            return Err(self.invalid(format!(
                "tensor {name} has shape {:?}, expected {:?}",
                info.dims,
                [rows, cols]
            )));
        }
        let kind = info.ty.kernel_kind();
        let Some(kind) = kind.filter(|k| cols.is_multiple_of(k.block_values())) else {
            let values = self.read(name, &[rows, cols])?;
            let converted = TensorBytes::Owned(q8_0_bytes(&values));
            return QMatrix::new(Kind::Q8_0, rows, cols, converted);
        };
        let data = self.bytes(name, info)?;
        QMatrix::new(kind, rows, cols, data)
    }

    /// A projection from the weights (and biases) of `parts`, stacked by output row: one
    /// matrix when they share a kind (q/k/v and gate/up are fused so each layer makes four
    /// products, not seven).
    fn linear(
        &self,
        parts: &[(&str, usize)],
        cols: usize,
        bias: bool,
    ) -> Result<Linear, LocalError> {
        let mut weights: Vec<QMatrix> = Vec::with_capacity(parts.len());
        let mut biases = Vec::with_capacity(parts.len());
        for (name, rows) in parts {
            weights.push(self.matrix(&format!("{name}.weight"), *rows, cols)?);
            let bias_name = format!("{name}.bias");
            if bias || self.has(&bias_name) {
                biases.push(self.read(&bias_name, &[*rows])?);
            }
        }
        let bias = match biases.len() {
            0 => None,
            n if n == parts.len() => Some(biases.concat()),
            _ => {
                let first = parts.first().map_or("", |p| p.0);
                return Err(self.invalid(format!("{first} has biases on only some of its parts")));
            }
        };
        let mut fused: Vec<QMatrix> = Vec::with_capacity(weights.len());
        for w in weights {
            match fused.pop() {
                Some(last) if last.kind() == w.kind() => {
                    fused.push(last.stacked(w).map_err(|e| self.invalid(e.to_string()))?);
                }
                Some(last) => fused.extend([last, w]),
                None => fused.push(w),
            }
        }
        Linear::new(fused.into_iter().map(Arc::new).collect(), bias)
            .map_err(|e| self.invalid(e.to_string()))
    }
}

impl Transformer {
    /// The weights of the file `map` (whose header is `content`), as views of the map
    /// where the kernels read the stored type.
    pub(crate) fn load(
        content: &Content,
        map: &Arc<FileMap>,
        path: &Path,
        mut cfg: Config,
    ) -> Result<Self, LocalError> {
        let l = Loader { content, map, path };
        let Some(embd_info) = content.tensor_infos.get("token_embd.weight") else {
            return Err(l.invalid("tensor token_embd.weight is missing".into()));
        };
        let vocab = embd_info.dims.first().copied().unwrap_or(0);
        let (e, kv, ff) = (cfg.n_embd, cfg.n_kv_head * cfg.head_dim, cfg.n_ff);
        if !e.is_multiple_of(BLOCK) || !ff.is_multiple_of(BLOCK) {
            return Err(LocalError::Unsupported(format!(
                "embedding {e} or feed-forward {ff} is not a multiple of {BLOCK}"
            )));
        }
        let embed = Arc::new(l.matrix("token_embd.weight", vocab, e)?);
        let norm = l.read("output_norm.weight", &[e])?;
        let output = if l.has("output.weight") {
            Linear::new(vec![Arc::new(l.matrix("output.weight", vocab, e)?)], None)?
        } else {
            // Tied embeddings (SmolLM2): the output projection is the embedding table.
            Linear::new(vec![embed.clone()], None)?
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
            let factors = l.read("rope_freqs.weight", &[cfg.head_dim / 2])?;
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
            team_backoff: 0,
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

    /// The shape of the KV cache.
    pub(crate) fn kv_shape(&self) -> KvShape {
        KvShape {
            n_layer: self.cfg.n_layer,
            n_kv: self.cfg.n_kv_head,
            head_dim: self.cfg.head_dim,
        }
    }

    /// Keys and values of the first `n` cached positions, laid out as
    /// [`KvShape::values`] says (`None` when fewer are cached).
    pub(crate) fn export_prefix(&self, n: usize) -> Option<Vec<f32>> {
        if n > self.cache.len {
            return None;
        }
        let (cap, hd) = (self.cache.capacity, self.cfg.head_dim);
        let mut out = Vec::with_capacity(self.kv_shape().values(n));
        for (k, v) in &self.cache.layers {
            for buf in [k, v] {
                for g in 0..self.cfg.n_kv_head {
                    out.extend_from_slice(&buf[g * cap * hd..][..n * hd]);
                }
            }
        }
        Some(out)
    }

    /// Replaces the cache with `n` positions of keys and values from
    /// [`Transformer::export_prefix`]; false (cache cleared) when they do not fit.
    pub(crate) fn import_prefix(&mut self, n: usize, kv: &[f32]) -> bool {
        self.cache.clear();
        if n == 0 || kv.len() != self.kv_shape().values(n) || n >= self.cfg.context_length {
            return false;
        }
        let (n_kv, hd) = (self.cfg.n_kv_head, self.cfg.head_dim);
        self.cache.reserve(n, self.cfg.context_length, n_kv, hd);
        let cap = self.cache.capacity;
        let mut from = kv.chunks_exact(n * hd.max(1));
        for (k, v) in &mut self.cache.layers {
            for buf in [k, v] {
                for g in 0..n_kv {
                    let Some(src) = from.next() else {
                        return false;
                    };
                    buf[g * cap * hd..][..n * hd].copy_from_slice(src);
                }
            }
        }
        self.cache.len = n;
        true
    }

    /// Runs `tokens` at positions `cached_len()..`, extends the cache, and returns the
    /// logits after the last token. On error the cache is cleared, never left half-written.
    ///
    /// The pass runs on a rayon worker (`rayon::scope` moves it there): a parallel loop
    /// started from outside the pool blocks its caller on a lock and wakes it afterwards,
    /// about 150 times per decoded token (two context switches each, a fifth of the
    /// time at 1 thread), while one started on a worker only pushes jobs to its deque.
    ///
    /// A single token (a decoding step) keeps the other workers on the step as a
    /// [`Team`]: its products are published to them chunk by chunk.
    pub(crate) fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        let helpers = rayon::current_num_threads().saturating_sub(1);
        let backoff = self.team_backoff;
        self.team_backoff = backoff.saturating_sub(1);
        let result = if tokens.len() == 1 && helpers > 0 && backoff == 0 {
            let team = Team::new();
            let result = rayon::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|_| team.help());
                }
                let _finish = Finish(&team);
                self.forward_inner(tokens, Some(&team))
            });
            if team.stalled() {
                self.team_backoff = TEAM_BACKOFF;
            }
            result
        } else {
            rayon::scope(|_| self.forward_inner(tokens, None))
        };
        if result.is_err() {
            self.cache.clear();
        }
        result
    }

    fn forward_inner(
        &mut self,
        tokens: &[u32],
        team: Option<&Team>,
    ) -> Result<Vec<f32>, LocalError> {
        let seq = tokens.len();
        let pos = self.cache.len;
        if seq == 0 || pos + seq > self.cfg.context_length {
            return Err(LocalError::Inference(format!(
                "{seq} tokens at position {pos} do not fit the context window"
            )));
        }
        let c = &self.cfg;
        let (n_head, n_kv, hd) = (c.n_head, c.n_kv_head, c.head_dim);
        let (e, kvd) = (n_head * hd, n_kv * hd);
        self.cache.reserve(pos + seq, c.context_length, n_kv, hd);
        let mut x = vec![0f32; seq * c.n_embd];
        for (&id, row) in tokens.iter().zip(x.chunks_exact_mut(c.n_embd)) {
            if id as usize >= self.vocab {
                return Err(LocalError::Inference(format!(
                    "token {id} is outside the vocabulary"
                )));
            }
            self.embed.row(id as usize, row);
        }
        let (cos, sin) = rope_tables(c, pos, seq);
        let rope = Rope {
            cos: &cos,
            sin: &sin,
            half: hd / 2,
            neox: c.rope_neox,
        };
        let mut q = vec![0f32; n_head * seq * hd];
        // One token goes through the decoding team; a prompt chunk through rayon.
        let project = |l: &Linear, x: &[f32]| match team {
            Some(team) => l.forward_one(x, team),
            None => l.forward(x, seq),
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.attn_norm, c.rms_eps);
            let qkv = project(&layer.qkv, &h)?;
            let cap = self.cache.capacity;
            let Some((ck, cv)) = self.cache.layers.get_mut(i) else {
                return Err(LocalError::Inference(format!("kv cache has no layer {i}")));
            };
            // Queries to [head][position][dim]; keys and values straight into the cache.
            for (t, row) in qkv.chunks_exact(e + 2 * kvd).enumerate() {
                for g in 0..n_head {
                    let to = (g * seq + t) * hd;
                    rope.apply(&row[g * hd..][..hd], t, &mut q[to..to + hd]);
                }
                for g in 0..n_kv {
                    let to = (g * cap + pos + t) * hd;
                    rope.apply(&row[e + g * hd..][..hd], t, &mut ck[to..to + hd]);
                    cv[to..to + hd].copy_from_slice(&row[e + kvd + g * hd..][..hd]);
                }
            }
            let shape = Shape {
                capacity: cap,
                pos,
                seq,
                n_head,
                n_kv,
                head_dim: hd,
            };
            let y = attend(&q, ck, cv, shape);
            add_assign(&mut x, &project(&layer.o, &y)?);
            let h = rms_norm(&x, &layer.ffn_norm, c.rms_eps);
            let gated = match team {
                Some(team) => layer.gate_up.gated_one(&h, c.n_ff, silu, team)?,
                None => gated(&layer.gate_up.forward(&h, seq)?, c.n_ff, silu),
            };
            add_assign(&mut x, &project(&layer.down, &gated)?);
        }
        self.cache.len = pos + seq;
        let last = &x[(seq - 1) * c.n_embd..];
        let last = rms_norm(last, &self.norm, c.rms_eps);
        match team {
            Some(team) => self.output.forward_one(&last, team),
            None => self.output.forward(&last, 1),
        }
    }
}

/// `x += y`, element by element.
fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// SiLU, `v · σ(v)`, computed as `v / (1 + e^-v)`.
fn silu(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

/// RMS normalization of each row of `x` (rows as long as `alpha`), scaled by `alpha`:
/// the sum of squares in order, in f32, then `x / rms * alpha`, value by value.
fn rms_norm(x: &[f32], alpha: &[f32], eps: f32) -> Vec<f32> {
    let n = alpha.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n) {
        let sum2: f32 = row.iter().map(|v| v * v).sum();
        let m = (sum2 / n as f32 + eps).sqrt();
        out.extend(row.iter().zip(alpha).map(|(s, a)| s / m * a));
    }
    out
}

/// The rotary embedding of one batch of positions: [`rope_tables`] and the pairing.
struct Rope<'a> {
    cos: &'a [f32],
    sin: &'a [f32],
    half: usize,
    /// Pairs dimension `i` with `i + half` (NeoX, qwen2) instead of `2i` with `2i + 1`.
    neox: bool,
}

impl Rope<'_> {
    /// Rotates one head's vector `src` at batch position `t` into `dst`.
    fn apply(&self, src: &[f32], t: usize, dst: &mut [f32]) {
        let h = self.half;
        let (cos, sin) = (&self.cos[t * h..][..h], &self.sin[t * h..][..h]);
        for j in 0..h {
            let (a, b) = if self.neox {
                (j, j + h)
            } else {
                (2 * j, 2 * j + 1)
            };
            let (x, y) = (src[a], src[b]);
            dst[a] = x * cos[j] - y * sin[j];
            dst[b] = x * sin[j] + y * cos[j];
        }
    }
}

/// Cosines and sines of the rotary embedding for positions `pos..pos + seq`, `[position][i]`.
fn rope_tables(c: &Config, pos: usize, seq: usize) -> (Vec<f32>, Vec<f32>) {
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
    (cos, sin)
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
        let cos = |c: &Config, pos: usize| -> Vec<f32> { rope_tables(c, pos, 1).0 };
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
}
