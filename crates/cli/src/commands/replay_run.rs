//! A replay from the command line's options: the policies, prices and
//! summarizer they name, run over the files they name. `whittle replay`
//! prints it, `whittle report` draws it.

use crate::args::ReplayOptions;
use crate::config::providers::build_provider;
use crate::config::{Env, resolve};
use anyhow::{Context, bail};
use std::path::Path;
use tokio::runtime::Handle;
use whittle_agent::ProviderSummarizer;
use whittle_context::{SummarizeError, Summarizer, SummaryInput};
use whittle_llm::{ModelSpec, Prices};
use whittle_replay::{Policy, ReplayConfig, ReplaySummary, StandInSummarizer, replay_paths};

/// Output tokens a replay summary may use.
const SUMMARY_MAX_TOKENS: u32 = 4_096;

/// The policies named on the command line, or all four.
pub fn policies(names: &[String]) -> anyhow::Result<Vec<Policy>> {
    if names.is_empty() {
        return Ok(Policy::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in names.iter().flat_map(|n| n.split(',')) {
        let policy = Policy::parse(name.trim()).with_context(|| {
            format!("unknown policy {name:?}; the policies are none, teaching, default and mask")
        })?;
        if !out.contains(&policy) {
            out.push(policy);
        }
    }
    Ok(out)
}

/// A price table from a TOML or JSON file; absent fields keep the defaults.
pub fn read_prices(path: &Path) -> anyhow::Result<Prices> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("prices file {}", path.display()))?;
    let prices: Prices = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("prices file {}: {e}", path.display()))?
    } else {
        toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "prices file {}: {}",
                path.display(),
                whittle_protocol::collapse_whitespace(e.message())
            )
        })?
    };
    for (name, v) in [
        ("input", prices.input),
        ("output", prices.output),
        ("cache_write_multiplier", prices.cache_write_multiplier),
        ("cache_read_multiplier", prices.cache_read_multiplier),
    ] {
        if !v.is_finite() || v < 0.0 {
            bail!(
                "prices file {}: {name} must be a number >= 0",
                path.display()
            );
        }
    }
    Ok(prices)
}

/// A provider's summaries for the replay, which is synchronous: each call is
/// awaited on `runtime` while the replay's thread, not one of its workers, waits.
struct BlockingSummarizer {
    summarizer: ProviderSummarizer,
    runtime: Handle,
}

impl Summarizer for BlockingSummarizer {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        ledger: &str,
        max_chars: usize,
    ) -> Result<String, SummarizeError> {
        self.runtime
            .block_on(self.summarizer.summarize(input, focus, ledger, max_chars))
    }
}

/// Imports and replays what `args` names, under its policies, window and
/// prices. Call it from outside `runtime`, which makes the summaries when
/// a model writes them.
pub fn replay(
    args: &ReplayOptions,
    env: Env<'_>,
    runtime: &Handle,
) -> anyhow::Result<ReplaySummary> {
    let policies = policies(&args.policies)?;
    if args.window_tokens < 1_000 {
        bail!("--window-tokens must be at least 1000");
    }
    let mut config = ReplayConfig::for_window(args.window_tokens);
    if let Some(path) = &args.prices {
        config.prices = read_prices(path)?;
    }
    for p in &args.paths {
        if !p.exists() {
            bail!("{}: no such file or folder", p.display());
        }
    }
    let (mut factory, name): (Box<dyn FnMut() -> Box<dyn Summarizer>>, String) =
        match &args.summarizer {
            None => {
                let stand_in = StandInSummarizer::default();
                let name = format!("stand-in, up to {} chars", stand_in.summary_chars);
                (
                    Box::new(move || Box::new(stand_in.clone()) as Box<dyn Summarizer>),
                    name,
                )
            }
            Some(model) => {
                let spec: ModelSpec = model
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--summarizer: {e}"))?;
                let cwd = std::env::current_dir().context("cannot read the current folder")?;
                let settings = resolve(cwd, Vec::new(), &Default::default(), env)?;
                let provider = {
                    // Providers may start tasks on the runtime as they are built.
                    let _runtime = runtime.enter();
                    build_provider(&spec, &settings)?
                };
                let model_id = spec.model.clone();
                let runtime = runtime.clone();
                (
                    Box::new(move || {
                        Box::new(BlockingSummarizer {
                            summarizer: ProviderSummarizer::new(
                                provider.clone(),
                                model_id.clone(),
                                "",
                                Vec::new(),
                                SUMMARY_MAX_TOKENS,
                            ),
                            runtime: runtime.clone(),
                        }) as Box<dyn Summarizer>
                    }),
                    format!("model {spec}"),
                )
            }
        };
    Ok(replay_paths(
        &args.paths,
        &policies,
        &config,
        &mut factory,
        &name,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_default_to_all_and_reject_unknown_names() {
        assert_eq!(policies(&[]).unwrap(), Policy::ALL.to_vec());
        assert_eq!(
            policies(&["default,none".into(), "default".into()]).unwrap(),
            vec![Policy::Default, Policy::None]
        );
        let e = policies(&["fast".into()]).unwrap_err().to_string();
        assert!(e.contains("\"fast\"") && e.contains("mask"), "{e}");
    }

    #[test]
    fn prices_come_from_toml_or_json() {
        let dir = tempfile::tempdir().unwrap();
        let toml_file = dir.path().join("p.toml");
        std::fs::write(&toml_file, "input = 1.0\noutput = 5.0\n").unwrap();
        let p = read_prices(&toml_file).unwrap();
        assert_eq!((p.input, p.output), (1.0, 5.0));
        assert_eq!(
            p.cache_read_multiplier,
            Prices::default().cache_read_multiplier
        );
        let json_file = dir.path().join("p.json");
        std::fs::write(&json_file, r#"{"cache_read_multiplier": 0.2}"#).unwrap();
        assert_eq!(read_prices(&json_file).unwrap().cache_read_multiplier, 0.2);
        std::fs::write(&json_file, r#"{"input": -1}"#).unwrap();
        assert!(read_prices(&json_file).is_err());
        std::fs::write(&toml_file, "input = \"cheap\"").unwrap();
        let e = read_prices(&toml_file).unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains("p.toml"), "{e}");
    }
}
