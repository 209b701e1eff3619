//! The engine: a loaded model that turns a chat request into a streamed reply.

use crate::constraint::CallConstraint;
use crate::error::LocalError;
use crate::file_map::FileMap;
use crate::gguf::Metadata;
use crate::grammar::ToolCallGrammar;
use crate::model::{Config, Transformer};
use crate::prompt::{ChatRequest, template_messages};
use crate::prompt_cache::PromptCache;
use crate::sampler::{Sampler, penalize_repeats};
use crate::template::ChatTemplate;
use crate::tokenizer::Tokenizer;
use crate::tools::{Segment, ToolCallParser, segments_to_blocks};
use std::fs::File;
use std::io::Cursor;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use whittle_protocol::Block;

/// Recent tokens the repeat penalty looks at (llama.cpp's default).
const REPEAT_WINDOW: usize = 64;

/// Prompt tokens run through the model at once: bounds the attention scratch memory.
const PREFILL_CHUNK: usize = 256;

/// How to sample a reply.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationParams {
    /// Most tokens to generate (also capped by the room left in the context window).
    pub max_tokens: usize,
    /// Softmax temperature; 0 means greedy (always the likeliest token).
    pub temperature: f32,
    /// Nucleus sampling: draw only from the likeliest tokens holding this much probability.
    pub top_p: f32,
    /// Divides the logits of tokens among the last 64 (prompt or reply) by this (multiplies
    /// negative ones), as llama.cpp does; 1.0 is off. Small models loop without it.
    pub repeat_penalty: f32,
    /// Seed of the sampler. The same seed, model and prompt give the same reply from the
    /// same cache state: a fresh model, after [`LocalModel::reset_cache`], or the same
    /// sequence of calls. A prompt part reused from the cache was computed by another
    /// kernel (dense for many tokens, quantized for few), so its last bits may differ.
    pub seed: u64,
    /// The reply must be a tool call (the request must offer tools): for the first step
    /// of a question about the workspace, which a small model would otherwise answer
    /// from thin air. Calls are constrained to the tools' schemas either way.
    pub force_tool_call: bool,
}

impl Default for GenerationParams {
    /// SmolLM2's recommended sampling (temperature 0.2, top-p 0.9), llama.cpp's repeat
    /// penalty (1.1), 1,024 tokens, seed 0, no forced tool call.
    fn default() -> Self {
        GenerationParams {
            max_tokens: 1024,
            temperature: 0.2,
            top_p: 0.9,
            repeat_penalty: 1.1,
            seed: 0,
            force_tool_call: false,
        }
    }
}

/// Real token counts of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens in the rendered prompt (what the window must hold).
    pub prompt_tokens: usize,
    /// Of those, tokens whose keys and values were reused from the previous call.
    pub cached_prompt_tokens: usize,
    /// Tokens generated, including the end-of-turn token when there was one.
    pub completion_tokens: usize,
}

/// Where one call's time went, for tokens-per-second reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// Running the uncached part of the prompt through the model.
    pub prompt: Duration,
    /// Generating the reply (sampling and decode steps), first token to last.
    pub generation: Duration,
}

impl Timings {
    /// Prompt tokens processed per second (`None` when nothing was timed).
    pub fn prompt_tokens_per_second(&self, usage: &Usage) -> Option<f64> {
        let n = usage.prompt_tokens - usage.cached_prompt_tokens.min(usage.prompt_tokens);
        per_second(n, self.prompt)
    }

    /// Generated tokens per second (`None` when nothing was timed).
    pub fn generation_tokens_per_second(&self, usage: &Usage) -> Option<f64> {
        per_second(usage.completion_tokens, self.generation)
    }
}

fn per_second(tokens: usize, time: Duration) -> Option<f64> {
    (tokens > 0 && !time.is_zero()).then(|| tokens as f64 / time.as_secs_f64())
}

/// Totals over the calls a model has answered since it was loaded: how often the prefix
/// cache hit and how fast prompts and replies ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Calls answered.
    pub calls: usize,
    /// Calls that reused at least one cached prompt token.
    pub prefix_hits: usize,
    /// Calls whose fixed prefix (system prompt and tools) came from the prompt cache on
    /// disk (see [`LocalModel::set_prompt_cache_dir`]).
    pub disk_prefix_hits: usize,
    /// Token counts, summed.
    pub usage: Usage,
    /// Time, summed.
    pub timings: Timings,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn (EOS or an end-of-turn token).
    EndTurn,
    /// The model ended its turn after calling tools (only from [`LocalModel::complete`]).
    ToolUse,
    /// `max_tokens` was reached, or the context window filled up.
    MaxTokens,
    /// The callback asked to stop.
    Stopped,
}

/// A raw generation: the text as decoded, control tokens hidden.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Everything generated, as text.
    pub text: String,
    /// Token counts.
    pub usage: Usage,
    /// Time spent on the prompt and on the reply.
    pub timings: Timings,
    /// Why it ended.
    pub stop_reason: StopReason,
}

/// A chat reply: text and `tool_use` blocks, parsed from the generated text.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// Text blocks and `tool_use` blocks (fresh ids), in order.
    pub content: Vec<Block>,
    /// The raw generated text, `<tool_call>` spans included.
    pub raw_text: String,
    /// Token counts.
    pub usage: Usage,
    /// Time spent on the prompt and on the reply.
    pub timings: Timings,
    /// Why it ended; `ToolUse` when the turn ended with at least one tool call.
    pub stop_reason: StopReason,
}

/// A GGUF model loaded for CPU inference, with its tokenizer, chat template and KV cache.
///
/// Calls are blocking and CPU-bound; run them on a blocking thread. The KV cache of the
/// last call is kept, so a request that extends the previous one only processes what is new.
pub struct LocalModel {
    path: PathBuf,
    architecture: String,
    name: Option<String>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    transformer: Transformer,
    context_window: usize,
    /// The tokens whose keys and values are in the cache, in order.
    cached: Vec<u32>,
    stats: EngineStats,
    /// Keys and values of fixed prefixes on disk, when set.
    prompt_cache: Option<PromptCache>,
    /// A prompt-cache problem was reported (once is enough).
    warned: bool,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads a GGUF file: `llama` or `qwen2` architecture, `gpt2` or `llama` (SentencePiece) tokenizer.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LocalError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| LocalError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let map = Arc::new(FileMap::new(&file).map_err(io)?);
        let content = crate::gguf::read_content(&mut Cursor::new(&map[..])).map_err(|e| {
            LocalError::InvalidModel {
                path: path.clone(),
                message: whittle_protocol::first_line(&e).to_string(),
            }
        })?;
        let md = Metadata(&content.metadata);
        let architecture = md.string("general.architecture")?.to_string();
        let name = md.opt_string("general.name")?.map(str::to_string);
        let cfg = Config::from_metadata(&md, &architecture)?;
        let tokenizer = Tokenizer::from_metadata(&md)?;
        let token_text = |id: Option<u32>| {
            id.and_then(|i| tokenizer.token(i))
                .unwrap_or_default()
                .to_string()
        };
        let template = ChatTemplate::new(
            md.opt_string("tokenizer.chat_template")?,
            &token_text(tokenizer.bos()),
            &token_text(tokenizer.eos()),
        )?;
        let context_window = cfg.context_length;
        let transformer = Transformer::load(&content, &map, &path, cfg)?;
        if transformer.vocab() < tokenizer.vocab_size() {
            return Err(LocalError::InvalidModel {
                path,
                message: format!(
                    "embedding has {} rows but the tokenizer has {} tokens",
                    transformer.vocab(),
                    tokenizer.vocab_size()
                ),
            });
        }
        Ok(LocalModel {
            path,
            architecture,
            name,
            tokenizer,
            template,
            transformer,
            context_window,
            cached: Vec::new(),
            stats: EngineStats::default(),
            prompt_cache: None,
            warned: false,
        })
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `general.architecture`: `llama` or `qwen2`.
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// `general.name`, if the file has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The context window in tokens, from `<arch>.context_length`.
    pub fn context_window(&self) -> usize {
        self.context_window
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// Prefix-cache hits, token counts and time over every call so far.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Keeps the keys and values of each request's fixed prefix (its system message: the
    /// system prompt and the tools) in `dir`, so that another process with the same model
    /// and prefix skips computing it; `None` turns that off (the default). An entry that
    /// cannot be read is ignored with one warning on stderr.
    pub fn set_prompt_cache_dir(&mut self, dir: Option<PathBuf>) -> Result<(), LocalError> {
        self.prompt_cache = match dir {
            Some(dir) => {
                Some(
                    PromptCache::new(dir, &self.path).map_err(|source| LocalError::Io {
                        path: self.path.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        Ok(())
    }

    /// Forgets the KV cache (the next call processes its whole prompt).
    pub fn reset_cache(&mut self) {
        self.transformer.clear_cache();
        self.cached.clear();
    }

    /// The prompt text for a request: messages through the chat template, with the
    /// assistant's turn opened.
    pub fn render(&self, request: &ChatRequest<'_>) -> Result<String, LocalError> {
        let messages = template_messages(request, self.template.has_tool_role());
        self.template.render(&messages, true)
    }

    /// Tokens of a prompt text as the model will see it (with BOS when the model wants one).
    pub fn prompt_tokens(&self, prompt: &str) -> Result<Vec<u32>, LocalError> {
        let mut ids = self.tokenizer.encode(prompt)?;
        if self.tokenizer.adds_bos()
            && let Some(bos) = self.tokenizer.bos()
            && ids.first() != Some(&bos)
        {
            ids.insert(0, bos);
        }
        Ok(ids)
    }

    /// Answers a chat request. `on_text` gets the visible text as it is generated
    /// (tool-call spans withheld; see [`ToolCallParser`]) and can stop generation.
    pub fn complete(
        &mut self,
        request: &ChatRequest<'_>,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Completion, LocalError> {
        let prompt = self.render(request)?;
        let fixed = self.fixed_prefix(request);
        let mut constraint = ToolCallGrammar::new(request.tools).map(|g| {
            if params.force_tool_call {
                CallConstraint::forced(g)
            } else {
                CallConstraint::on_open(g)
            }
        });
        let mut parser = ToolCallParser::new();
        let mut segments: Vec<Segment> = Vec::new();
        let mut stopped = false;
        let generation = self.generate_constrained(
            &prompt,
            params,
            constraint.as_mut(),
            fixed.as_deref(),
            &mut |piece| {
                for segment in parser.push(piece) {
                    if let Segment::Text(t) = &segment
                        && !stopped
                        && on_text(t).is_break()
                    {
                        stopped = true;
                    }
                    segments.push(segment);
                }
                if stopped {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )?;
        for segment in parser.finish() {
            if let Segment::Text(t) = &segment
                && !stopped
            {
                let _ = on_text(t);
            }
            segments.push(segment);
        }
        let calls = segments
            .iter()
            .any(|s| matches!(s, Segment::ToolCall { .. }));
        let stop_reason = match generation.stop_reason {
            StopReason::EndTurn if calls => StopReason::ToolUse,
            other => other,
        };
        Ok(Completion {
            content: segments_to_blocks(segments),
            raw_text: generation.text,
            usage: generation.usage,
            timings: generation.timings,
            stop_reason,
        })
    }

    /// Runs the prompt through the model, reusing the cached prefix it shares with the
    /// previous call (but always the last token, whose logits are needed). Returns how
    /// many tokens were reused and the logits after the prompt.
    fn prefill(&mut self, ids: &[u32]) -> Result<(usize, Vec<f32>), LocalError> {
        let reuse = self
            .cached
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len().saturating_sub(1));
        self.transformer.truncate_cache(reuse);
        self.cached.truncate(reuse);
        if self.transformer.cached_len() != reuse {
            self.reset_cache();
        }
        let reused = self.cached.len();
        let mut logits = Vec::new();
        for chunk in ids[reused..].chunks(PREFILL_CHUNK) {
            logits = self
                .transformer
                .forward(chunk)
                .inspect_err(|_| self.cached.clear())?;
            self.cached.extend_from_slice(chunk);
        }
        Ok((reused, logits))
    }

    /// Continues a prompt text (already templated) and streams each decoded piece to
    /// `on_text`, which can stop generation.
    pub fn generate(
        &mut self,
        prompt: &str,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, LocalError> {
        self.generate_constrained(prompt, params, None, None, on_text)
    }

    /// The tokens of a request's system message (prompt and tools), when a prompt cache is
    /// set and the rendered prompt starts with them.
    fn fixed_prefix(&self, request: &ChatRequest<'_>) -> Option<Vec<u32>> {
        self.prompt_cache.as_ref()?;
        let system_only = ChatRequest {
            messages: &[],
            ..*request
        };
        let messages = template_messages(&system_only, self.template.has_tool_role());
        if messages.is_empty() {
            return None;
        }
        let text = self.template.render(&messages, false).ok()?;
        self.prompt_tokens(&text).ok().filter(|ids| ids.len() > 1)
    }

    /// Fills the KV cache with `prefix` from the prompt cache on disk, unless the cache in
    /// memory already holds it. True when it did.
    fn load_prefix(&mut self, prefix: &[u32]) -> bool {
        let Some(store) = &self.prompt_cache else {
            return false;
        };
        if self.cached.starts_with(prefix) {
            return false;
        }
        match store.load(prefix, self.transformer.kv_shape()) {
            Ok(Some(kv)) if self.transformer.import_prefix(prefix.len(), &kv) => {
                self.cached = prefix.to_vec();
                true
            }
            Ok(_) => {
                self.reset_cache();
                false
            }
            Err(why) => {
                self.reset_cache();
                self.warn(&format!("the prompt cache entry {why} is ignored"));
                false
            }
        }
    }

    /// Writes `prefix`'s keys and values to the prompt cache on disk.
    fn save_prefix(&mut self, prefix: &[u32]) {
        let Some(store) = &self.prompt_cache else {
            return;
        };
        let Some(kv) = self.transformer.export_prefix(prefix.len()) else {
            return;
        };
        if let Err(e) = store.save(prefix, self.transformer.kv_shape(), &kv) {
            self.warn(&format!("cannot write the prompt cache: {e}"));
        }
    }

    #[allow(clippy::print_stderr)]
    fn warn(&mut self, message: &str) {
        if !std::mem::replace(&mut self.warned, true) {
            eprintln!("whittle: {message}");
        }
    }

    /// [`LocalModel::generate`], the tool calls held to their grammar when `constraint`
    /// is given (and the reply ended after a completed call).
    fn generate_constrained(
        &mut self,
        prompt: &str,
        params: &GenerationParams,
        mut constraint: Option<&mut CallConstraint>,
        fixed: Option<&[u32]>,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, LocalError> {
        let ids = self.prompt_tokens(prompt)?;
        let prompt_tokens = ids.len();
        if prompt_tokens >= self.context_window {
            return Err(LocalError::ContextOverflow {
                prompt_tokens,
                context_window: self.context_window,
            });
        }
        if ids.is_empty() {
            return Err(LocalError::Tokenizer("the prompt is empty".into()));
        }
        let started = Instant::now();
        // The fixed prefix from disk, when the cache in memory does not hold it; computed
        // here and written for the next process otherwise.
        let fixed = fixed.filter(|f| f.len() < ids.len() && ids.starts_with(f));
        let from_disk = fixed.is_some_and(|f| self.load_prefix(f));
        let (cached_prompt_tokens, mut logits) = self.prefill(&ids)?;
        if let Some(f) = fixed
            && !from_disk
            && cached_prompt_tokens < f.len()
        {
            self.save_prefix(f);
        }
        self.stats.disk_prefix_hits += usize::from(from_disk);
        let prefilled = Instant::now();
        let budget = params.max_tokens.min(self.context_window - prompt_tokens);
        let mut sampler = Sampler::new(params.seed, params.temperature, params.top_p);
        let mut stream = self.tokenizer.stream();
        let mut text = String::new();
        let mut completion_tokens = 0;
        let mut stop_reason = StopReason::MaxTokens;
        let vocab = self.tokenizer.vocab_size().min(logits.len());
        while completion_tokens < budget {
            let recent = &self.cached[self.cached.len().saturating_sub(REPEAT_WINDOW)..];
            penalize_repeats(&mut logits, recent, params.repeat_penalty);
            if let Some(c) = constraint.as_deref_mut() {
                c.mask(&mut logits[..vocab], &self.tokenizer);
            }
            let Some(id) = sampler.sample(&logits[..vocab.min(logits.len())]) else {
                return Err(LocalError::Inference(
                    "the model produced no usable logits".into(),
                ));
            };
            completion_tokens += 1;
            if self.tokenizer.is_stop(id) {
                stop_reason = StopReason::EndTurn;
                break;
            }
            if let Some(c) = constraint.as_deref_mut() {
                c.advance(id, &self.tokenizer);
            }
            let piece = stream.push(id);
            if !piece.is_empty() {
                text.push_str(&piece);
                if on_text(&piece).is_break() {
                    stop_reason = StopReason::Stopped;
                    break;
                }
            }
            if constraint
                .as_deref()
                .is_some_and(CallConstraint::call_complete)
            {
                // The protocol says a call ends the reply; a small model would go on.
                stop_reason = StopReason::EndTurn;
                break;
            }
            if completion_tokens == budget {
                break;
            }
            logits = self
                .transformer
                .forward(&[id])
                .inspect_err(|_| self.cached.clear())?;
            self.cached.push(id);
        }
        let rest = stream.finish();
        if !rest.is_empty() {
            text.push_str(&rest);
            if stop_reason != StopReason::Stopped {
                let _ = on_text(&rest);
            }
        }
        let usage = Usage {
            prompt_tokens,
            cached_prompt_tokens,
            completion_tokens,
        };
        let timings = Timings {
            prompt: prefilled - started,
            generation: prefilled.elapsed(),
        };
        let stats = &mut self.stats;
        stats.calls += 1;
        stats.prefix_hits += usize::from(cached_prompt_tokens > 0);
        stats.usage.prompt_tokens += prompt_tokens;
        stats.usage.cached_prompt_tokens += cached_prompt_tokens;
        stats.usage.completion_tokens += completion_tokens;
        stats.timings.prompt += timings.prompt;
        stats.timings.generation += timings.generation;
        Ok(Generation {
            text,
            usage,
            timings,
            stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_can_be_shared_with_a_blocking_thread() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LocalModel>();
        send_sync::<LocalError>();
    }
}
