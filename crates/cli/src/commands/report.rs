//! `whittle report` (and `whittle replay --html`): a replay as one HTML
//! page, with whittle's own sessions among its inputs also shown from their
//! real usage.

use crate::args::{ReplayOptions, ReportArgs};
use crate::commands::replay_run::replay;
use crate::config::setup::agent_config;
use crate::config::{Env, Settings, resolve};
use crate::ui::render::{err_line, out_line};
use crate::ui::style::Style;
use anyhow::{Context, bail};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::runtime::Handle;
use whittle_agent::{Agent, MeterChoice};
use whittle_context::session::SessionRecord;
use whittle_llm::{ModelSpec, Prices};
use whittle_protocol::group_digits;
use whittle_replay::{Format, ReplaySummary};
use whittle_report::{Page, SessionOptions};

/// Replays what `args` names and writes the page; prints its path.
pub fn run(args: &ReportArgs, env: Env<'_>, runtime: &Handle) -> anyhow::Result<ExitCode> {
    let summary = replay(&args.options, env, runtime)?;
    if summary.conversations.is_empty() {
        for e in &summary.errors {
            err_line(e);
        }
        bail!("no conversation could be imported from the given paths");
    }
    write_page(&summary, &args.options, &args.output, env)?;
    out_line(&args.output.display().to_string());
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `summary` to `output`, with a session section for
/// every whittle session log among its conversations, and says so in one
/// line on stderr. A session whose log cannot be drawn is named in one line
/// and left out; the rest of the page is still written.
pub fn write_page(
    summary: &ReplaySummary,
    options: &ReplayOptions,
    output: &Path,
    env: Env<'_>,
) -> anyhow::Result<()> {
    let output = std::path::absolute(output)
        .with_context(|| format!("{}: cannot resolve the path", output.display()))?;
    let page_dir = output
        .parent()
        .map_or_else(|| Path::new("/").to_path_buf(), Path::to_path_buf);
    std::fs::create_dir_all(&page_dir)
        .with_context(|| format!("cannot create {}", page_dir.display()))?;
    let mut page = Page::new(format!(
        "whittle report: {} conversations at a {}-token window",
        summary.conversations.len(),
        group_digits(summary.window_tokens)
    ));
    page.add_replay(summary)?;
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let settings = resolve(cwd, Vec::new(), &Default::default(), env)?;
    // Given prices apply to the sessions too; else each its provider's.
    let prices = options.prices.is_some().then_some(summary.prices);
    let style = Style::detect(std::io::stderr().is_terminal());
    let mut seen = HashSet::new();
    for row in &summary.conversations {
        if row.format != Format::WhittleSession.name() || !seen.insert(&row.source) {
            continue;
        }
        let session = session_options(&row.source, &settings, prices);
        if let Err(e) = page.add_session(&row.source, &page_dir, &session) {
            err_line(&style.yellow(&format!(
                "left out of the page: {}",
                whittle_protocol::collapse_whitespace(&e.to_string())
            )));
        }
    }
    let html = page.render()?;
    std::fs::write(&output, &html).with_context(|| format!("cannot write {}", output.display()))?;
    err_line(&style.dim(&format!(
        "wrote {} ({} KB: {} conversations, {} whittle sessions)",
        output.display(),
        group_digits(html.len().div_ceil(1024) as u64),
        summary.conversations.len(),
        page.sessions.len()
    )));
    Ok(())
}

/// The window, compaction limit and prices whittle would use today for the
/// model a session log names in its first line.
fn session_options(log: &Path, settings: &Settings, prices: Option<Prices>) -> SessionOptions {
    let model = first_record(log).and_then(|r| match r {
        SessionRecord::Session { model, .. } => model.parse::<ModelSpec>().ok(),
        _ => None,
    });
    let Some(spec) = model else {
        return SessionOptions {
            prices,
            ..SessionOptions::default()
        };
    };
    let config = agent_config(settings, &spec, None, "");
    SessionOptions {
        window_tokens: Some(config.context_window),
        limit_tokens: (config.meter == MeterChoice::Tokens).then_some(config.limits.context_limit),
        prices: Some(prices.unwrap_or_else(|| Prices::for_provider(spec.provider))),
    }
}

/// The first record of a log, read alone.
fn first_record(log: &Path) -> Option<SessionRecord> {
    let file = std::fs::File::open(log).ok()?;
    let line = BufReader::new(file).lines().next()?.ok()?;
    serde_json::from_str(&line).ok()
}

/// `/report`: the current session's page, written to
/// `.whittle/reports/ID.html`; returns its path.
pub fn write_session_page(
    agent: &Agent,
    prices: Prices,
    settings: &Settings,
) -> anyhow::Result<PathBuf> {
    let (Some(id), Some(log)) = (agent.session_id(), agent.session_path()) else {
        bail!("nothing to report yet: this session has not logged anything");
    };
    let page_dir = settings.state_dir().join("reports");
    std::fs::create_dir_all(&page_dir)
        .with_context(|| format!("cannot create {}", page_dir.display()))?;
    let config = agent.config();
    let options = SessionOptions {
        window_tokens: Some(config.context_window),
        // The limit is in characters under the teaching preset; the chart
        // is in tokens the provider reported.
        limit_tokens: (config.meter == MeterChoice::Tokens).then_some(config.limits.context_limit),
        prices: Some(prices),
    };
    let mut page = Page::new(format!("whittle session {id}"));
    page.add_session(log, &page_dir, &options)?;
    let path = page_dir.join(format!("{id}.html"));
    write_state_page(&path, page.render()?.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Writes a page into whittle's state folder without following a link at
/// its name: whittle writes as itself, outside the sandbox, and a link there
/// would send the page (and the truncation before it) anywhere.
fn write_state_page(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    whittle_store::no_follow(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
    )
    .open(path)?
    .write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_not_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let link = dir.path().join("s.html");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = write_state_page(&link, b"<html>").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        std::fs::write(&victim, "a longer old page").unwrap();
        write_state_page(&victim, b"<html>").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"<html>");
    }
}
