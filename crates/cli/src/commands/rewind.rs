//! Checkpoints for the person: `/rewind` and `/diff` in the REPL, and
//! `whittle rewind`, `whittle diff` and `whittle checkpoint gc` outside it.
//!
//! The agent saves the workspace's files around every tool that may write
//! and logs each checkpoint in the session log; here those records become
//! a picker, a restore and a diff.

use crate::args::{DiffArgs, GcArgs, RewindArgs};
use crate::config::Settings;
use crate::ui::render::{err_line, out_line};
use crate::ui::style::Style;
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use whittle_agent::{
    Agent, EventSink, RewindScope, StoreOwner, check_sealed, checkpoint_store_dir, find_session,
    open_checkpoint_store, rewind_session_log, session_rewind_points,
};
use whittle_checkpoint::{CheckpointId, GcLimits, RestoreReport, Store, UntrackedReason};
use whittle_context::session::{
    CheckpointMark, RewindPoint, RewindTarget, SessionRecord, checkpoint_marks, parse_records,
    read_session,
};
use whittle_protocol::Redactor;

/// The settings a session here would have.
fn settings_here(workspace: &Path, trust_project: bool) -> anyhow::Result<Settings> {
    let args = crate::args::AgentArgs {
        cwd: Some(workspace.to_path_buf()),
        trust_project,
        ..Default::default()
    };
    let env = |k: &str| std::env::var(k).ok();
    crate::config::load(&args, &env, None)
}

/// The workspace's checkpoint store, opened as a session with `settings`
/// would open it (its size cap, the person's key); a store whittle did not
/// make for the person is moved aside first, and that is said. Settings
/// that cannot be had (a link refused in `.whittle/`) stop it: a store is
/// never used unchecked.
fn open_store(workspace: &Path, settings: &Settings) -> anyhow::Result<Store> {
    let owner = StoreOwner {
        key: settings.session_key.as_ref(),
        trusted: settings.folder_trusted,
    };
    let opened = open_checkpoint_store(workspace, settings.checkpoint_max_file_size, owner)?;
    if let Some(to) = &opened.set_aside {
        err_line(&format!(
            "the checkpoint store in .whittle/ was not made by whittle under your account (did it come with the folder?): moved to {}",
            to.display()
        ));
    }
    Ok(opened.store)
}

/// Refuses a log the person's key did not seal (one that came with the
/// folder), unless the folder is trusted: its checkpoints would be offered
/// as states the person had.
fn check_own_session(settings: &Settings, workspace: &Path, log: &Path) -> anyhow::Result<()> {
    if let Some(key) = &settings.session_key
        && !settings.folder_trusted
    {
        let state = read_session(log)?;
        check_sealed(log, &state, key, workspace)?;
    }
    Ok(())
}

/// The newest session of the workspace, or the one `id` names.
fn session_log(workspace: &Path, id: Option<&str>) -> anyhow::Result<PathBuf> {
    let dir = workspace.join(".whittle").join("sessions");
    find_session(&dir, id).map_err(|e| match id {
        Some(_) => anyhow::anyhow!(e),
        None => anyhow::anyhow!("no session in {} to rewind", workspace.display()),
    })
}

fn session_id(log: &Path) -> String {
    log.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn marks(log: &Path) -> anyhow::Result<Vec<CheckpointMark>> {
    let text = std::fs::read_to_string(log).with_context(|| format!("{}", log.display()))?;
    Ok(checkpoint_marks(&parse_records(log, &text)?))
}

/// `2026-05-01 12:03:04` (UTC) from milliseconds since the epoch.
fn utc_time(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let date = crate::ui::slash::utc_date(std::time::UNIX_EPOCH + Duration::from_secs(secs));
    let day = secs % 86_400;
    format!(
        "{date} {:02}:{:02}:{:02}",
        day / 3600,
        day % 3600 / 60,
        day % 60
    )
}

/// `2026-05-01T12:03:04Z`: a moment as RFC 3339 says it, in UTC.
pub fn rfc3339(at: std::time::SystemTime) -> String {
    let unix_ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    format!("{}Z", utc_time(unix_ms).replace(' ', "T"))
}

fn stat_text(files: u64, ins: u64, del: u64) -> String {
    format!(
        "{files} file{} +{ins} -{del}",
        if files == 1 { "" } else { "s" }
    )
}

/// `whittle rewind`.
pub fn rewind(args: &RewindArgs) -> anyhow::Result<ExitCode> {
    let workspace = crate::config::workspace(args.cwd.as_deref())?;
    let log = session_log(&workspace, args.session.as_deref())?;
    let settings = settings_here(&workspace, args.trust_project)?;
    check_own_session(&settings, &workspace, &log)?;
    let session = session_id(&log);
    if args.list {
        let marks = marks(&log)?;
        if args.json {
            let list: Vec<Value> = marks
                .iter()
                .map(|m| {
                    json!({
                        "id": m.id,
                        "session": session,
                        "time": utc_time(m.unix_ms),
                        "unix_ms": m.unix_ms,
                        "tool_call_id": m.tool_call_id,
                        "tool": m.tool_name,
                        "files_changed": m.files_changed,
                        "insertions": m.insertions,
                        "deletions": m.deletions,
                        "note": m.note,
                    })
                })
                .collect();
            out_line(&serde_json::to_string_pretty(&Value::Array(list))?);
        } else if marks.is_empty() {
            out_line(&format!("session {session} made no checkpoints"));
        } else {
            for m in marks.iter().rev() {
                let what = match (&m.note, &m.tool_call_id) {
                    (Some(note), _) => note.clone(),
                    (None, Some(call)) => {
                        format!("after {} {call}", m.tool_name.as_deref().unwrap_or("tool"))
                    }
                    (None, None) => "turn start".to_string(),
                };
                out_line(&format!(
                    "{}  {}  {:<24} {}",
                    m.id,
                    utc_time(m.unix_ms),
                    stat_text(m.files_changed, m.insertions, m.deletions),
                    what
                ));
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(to) = &args.to else {
        bail!("say --list or --to ID");
    };
    to.parse::<CheckpointId>()?;
    let marks = marks(&log)?;
    let Some(mark) = marks.iter().find(|m| &m.id == to) else {
        bail!("session {session} has no checkpoint {to} (see whittle rewind --list)");
    };
    let point = point_for(&log, mark)?;
    let scope = match (args.code, args.conversation) {
        (true, _) => RewindScope::Code,
        (_, true) => RewindScope::Conversation,
        _ => RewindScope::Both,
    };
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("rewinding changes the files; pass --yes to do it without asking");
        }
        eprint!("{}? [y/N] ", describe_scope(scope, to));
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            out_line("nothing changed");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let style = Style::detect(std::io::stdout().is_terminal());
    if scope.code() {
        let mut store = open_store(&workspace, &settings)?;
        let id: CheckpointId = to.parse()?;
        let report = store.restore(&id)?;
        // Logged, so the picker offers to undo it.
        let (writer, _) = whittle_agent::SessionWriter::resume(&log)?;
        let mut writer = writer.redacting(Redactor::default());
        writer.append(&SessionRecord::Checkpoint {
            id: report.before.id.to_string(),
            tool_call_id: None,
            unix_ms: report.before.unix_ms,
            files_changed: report.before.stat.files_changed,
            insertions: report.before.stat.insertions,
            deletions: report.before.stat.deletions,
            note: Some(format!("before rewinding to {id}")),
        })?;
        out_line(&restore_text(&report, style));
    }
    if scope.conversation() {
        let count = rewind_session_log(
            &log,
            &workspace.join(".whittle"),
            Redactor::default(),
            &point,
        )?;
        out_line(&format!(
            "conversation of session {session} rewound to {count} messages (whittle --continue goes on from there)"
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The rewind point a checkpoint stands for: a turn's start is its
/// person's message; after a call, the conversation just after it.
fn point_for(log: &Path, mark: &CheckpointMark) -> anyhow::Result<RewindPoint> {
    let points = session_rewind_points(log)?;
    let wanted_kind = |p: &RewindPoint| match &p.target {
        RewindTarget::PersonMessage { .. } => mark.tool_call_id.is_none() && mark.note.is_none(),
        RewindTarget::ToolCall { .. } => mark.tool_call_id.is_some(),
        RewindTarget::BeforeRewind { .. } => mark.note.is_some(),
    };
    if let Some(p) = points
        .iter()
        .find(|p| p.checkpoint.as_deref() == Some(mark.id.as_str()) && wanted_kind(p))
    {
        return Ok(p.clone());
    }
    Ok(RewindPoint {
        target: RewindTarget::BeforeRewind {
            note: format!("checkpoint {}", mark.id),
        },
        cut_line: mark.line + 1,
        checkpoint: Some(mark.id.clone()),
        unix_ms: Some(mark.unix_ms),
        files_changed: mark.files_changed,
        insertions: mark.insertions,
        deletions: mark.deletions,
    })
}

fn describe_scope(scope: RewindScope, to: &str) -> String {
    match scope {
        RewindScope::Both => format!("restore the files and the conversation to {to}"),
        RewindScope::Code => format!("restore the files to {to}"),
        RewindScope::Conversation => format!("rewind the conversation to {to}"),
    }
}

fn reason_text(r: UntrackedReason) -> &'static str {
    match r {
        UntrackedReason::Ignored => "ignored",
        UntrackedReason::TooLarge => "over the size cap",
        UntrackedReason::Special => "not a file",
        UntrackedReason::Unreadable => "unreadable",
    }
}

/// What a restore did, and what it left alone, in a few lines.
pub fn restore_text(report: &RestoreReport, style: Style) -> String {
    let mut out = format!(
        "files restored: {} written, {} removed (undo: whittle rewind --to {} --code)",
        report.written.len(),
        report.removed.len(),
        report.before.id
    );
    if !report.left_alone.is_empty() {
        out.push_str("\nleft alone (not in checkpoints):");
        for u in &report.left_alone {
            out.push_str(&format!(
                "\n  {} ({})",
                u.path.display(),
                reason_text(u.reason)
            ));
        }
    }
    for (path, why) in &report.failed {
        out.push_str(&format!(
            "\n{}",
            style.yellow(&format!("not restored: {}: {why}", path.display()))
        ));
    }
    out
}

/// `whittle diff`.
pub fn diff(args: &DiffArgs) -> anyhow::Result<ExitCode> {
    let workspace = crate::config::workspace(args.cwd.as_deref())?;
    let since = match &args.since {
        Some(id) => id.clone(),
        None => {
            let log = session_log(&workspace, args.session.as_deref())?;
            match marks(&log)?.into_iter().next() {
                Some(m) => m.id,
                None => {
                    out_line("this session made no checkpoints: nothing changed through it");
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
    };
    show_diff(&workspace, &since)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the diff from checkpoint `since` to the files now: coloured and
/// through a pager on a terminal, plain otherwise.
pub fn show_diff(workspace: &Path, since: &str) -> anyhow::Result<()> {
    let id: CheckpointId = since.parse()?;
    let mut store = open_store(workspace, &settings_here(workspace, false)?)?;
    let text = store.unified_diff(&id, None)?;
    if text.is_empty() {
        out_line(&format!("no change since checkpoint {id}"));
        return Ok(());
    }
    if !std::io::stdout().is_terminal() {
        print!("{text}");
        let _ = std::io::stdout().flush();
        return Ok(());
    }
    let coloured = colour_diff(&text, Style::detect(true));
    page(&coloured);
    Ok(())
}

fn colour_diff(text: &str, style: Style) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let painted = if body.starts_with("+++") || body.starts_with("---") {
            style.bold(body)
        } else if body.starts_with('+') {
            style.green(body)
        } else if body.starts_with('-') {
            style.red(body)
        } else if body.starts_with("@@") {
            style.cyan(body)
        } else {
            body.to_string()
        };
        out.push_str(&painted);
        out.push_str(nl);
    }
    out
}

/// Through `$PAGER` (or `less -R`); printed directly when none starts.
fn page(text: &str) {
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -R".to_string());
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(&pager)
        .stdin(std::process::Stdio::piped())
        .spawn();
    match child {
        Ok(mut child) => {
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(text.as_bytes());
            }
            let _ = child.wait();
        }
        Err(_) => {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
    }
}

/// `whittle checkpoint gc`.
pub fn gc(args: &GcArgs) -> anyhow::Result<ExitCode> {
    let workspace = crate::config::workspace(args.cwd.as_deref())?;
    if !checkpoint_store_dir(&workspace).exists() {
        out_line("no checkpoint store here: nothing to collect");
        return Ok(ExitCode::SUCCESS);
    }
    let mut store = open_store(&workspace, &settings_here(&workspace, false)?)?;
    let report = store.gc(GcLimits {
        max_bytes: Some(args.max_bytes),
        max_age: Some(Duration::from_secs(args.max_age.saturating_mul(86_400))),
    })?;
    out_line(&format!(
        "removed {} checkpoints and {} stored files ({} bytes); kept {} checkpoints ({} bytes)",
        report.checkpoints_removed,
        report.objects_removed,
        report.bytes_removed,
        report.checkpoints_kept,
        report.bytes_kept
    ));
    Ok(ExitCode::SUCCESS)
}

/// One line of the `/rewind` picker.
fn point_line(n: usize, p: &RewindPoint) -> String {
    let what = match &p.target {
        RewindTarget::PersonMessage { text } => {
            format!(
                "your message \"{}\"",
                crate::ui::render::clip(&whittle_protocol::collapse_whitespace(text), 60)
            )
        }
        RewindTarget::ToolCall { id, name } => format!("after {name} ({id})"),
        RewindTarget::BeforeRewind { note } => note.clone(),
    };
    let stat = if p.checkpoint.is_some() {
        stat_text(p.files_changed, p.insertions, p.deletions)
    } else {
        "(no files saved)".to_string()
    };
    format!("{n:>3}. {what}  [{stat}]")
}

/// `/rewind`: numbered points, newest first; the person types a number,
/// then what to restore.
pub fn repl_rewind(
    rt: &tokio::runtime::Runtime,
    agent: &mut Agent,
    ask: &mut dyn FnMut(&str) -> Option<String>,
    sink: &mut dyn EventSink,
) -> anyhow::Result<()> {
    let points = agent.rewind_points()?;
    if points.is_empty() {
        out_line("nothing to rewind to yet");
        return Ok(());
    }
    let newest_first: Vec<&RewindPoint> = points.iter().rev().collect();
    for (i, p) in newest_first.iter().enumerate() {
        out_line(&point_line(i + 1, p));
    }
    let Some(answer) = ask("rewind to which (number, empty to cancel)? ") else {
        return Ok(());
    };
    let Ok(n) = answer.trim().parse::<usize>() else {
        out_line("nothing changed");
        return Ok(());
    };
    let Some(point) = n.checked_sub(1).and_then(|i| newest_first.get(i)) else {
        out_line(&format!("no point {n}; nothing changed"));
        return Ok(());
    };
    let point = (*point).clone();
    let choice = ask("restore 1) code and conversation  2) code only  3) conversation only? ")
        .unwrap_or_default();
    let scope = match choice.trim() {
        "1" => RewindScope::Both,
        "2" => RewindScope::Code,
        "3" => RewindScope::Conversation,
        _ => {
            out_line("nothing changed");
            return Ok(());
        }
    };
    if scope.code() && point.checkpoint.is_none() {
        out_line("no files were saved by then: only the conversation can go back there");
        return Ok(());
    }
    let done = rt.block_on(agent.rewind(&point, scope, sink))?;
    let style = Style::detect(std::io::stdout().is_terminal());
    if let Some(report) = &done.restore {
        out_line(&restore_text(report, style));
    }
    if let Some(messages) = done.messages {
        out_line(&format!("conversation rewound: {messages} messages"));
        if done.over_limit {
            out_line(
                "it is over the compaction limit: it will be compacted again before the next request",
            );
        }
        if let Some(request) = &done.request {
            out_line(&format!("your message was: {request}"));
        }
    }
    Ok(())
}

/// `/rewind [N [code|conversation]]` where nobody can be asked (an
/// editor): without a number, the numbered points (newest first); with
/// one, the rewind, of both unless a scope is named.
pub async fn rewind_by_command(
    agent: &mut Agent,
    arg: Option<&str>,
    sink: &mut dyn EventSink,
) -> anyhow::Result<String> {
    let points = agent.rewind_points()?;
    if points.is_empty() {
        return Ok("nothing to rewind to yet".to_string());
    }
    let newest_first: Vec<&RewindPoint> = points.iter().rev().collect();
    let mut words = arg.unwrap_or_default().split_whitespace();
    let Some(n) = words.next() else {
        let mut lines: Vec<String> = newest_first
            .iter()
            .enumerate()
            .map(|(i, p)| point_line(i + 1, p))
            .collect();
        lines.push("/rewind N goes back to point N (code and conversation); add `code` or `conversation` for one of them".to_string());
        return Ok(lines.join("\n"));
    };
    let point = n
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| newest_first.get(i))
        .ok_or_else(|| anyhow::anyhow!("no point {n}: /rewind lists them"))?;
    let scope = match words.next() {
        None | Some("both") => RewindScope::Both,
        Some("code") => RewindScope::Code,
        Some("conversation") => RewindScope::Conversation,
        Some(other) => anyhow::bail!("`{other}`: say code, conversation or nothing (both)"),
    };
    if scope.code() && point.checkpoint.is_none() {
        anyhow::bail!("no files were saved by then: only the conversation can go back there");
    }
    let point = (*point).clone();
    let done = agent.rewind(&point, scope, sink).await?;
    let mut lines = Vec::new();
    if let Some(report) = &done.restore {
        lines.push(restore_text(report, Style::detect(false)));
    }
    if let Some(messages) = done.messages {
        lines.push(format!("conversation rewound: {messages} messages"));
        if let Some(request) = &done.request {
            lines.push(format!("your message was: {request}"));
        }
    }
    Ok(lines.join("\n"))
}

/// `/diff` where the output is not a terminal: the diff as text.
pub fn session_diff_text(agent: &Agent, workspace: &Path) -> anyhow::Result<String> {
    let since = match session_start(agent)? {
        Ok(id) => id,
        Err(why) => return Ok(why.to_string()),
    };
    let mut store = open_store(workspace, &settings_here(workspace, false)?)?;
    let text = store.unified_diff(&since.parse::<CheckpointId>()?, None)?;
    Ok(if text.is_empty() {
        "no changes".to_string()
    } else {
        format!("```diff\n{text}```")
    })
}

/// The session's first checkpoint, where its `/diff` starts; or why there
/// is none.
fn session_start(agent: &Agent) -> anyhow::Result<Result<String, &'static str>> {
    let Some(log) = agent.session_path() else {
        return Ok(Err("no session yet: nothing changed through it"));
    };
    Ok(marks(log)?
        .into_iter()
        .next()
        .map(|m| m.id)
        .ok_or("this session made no checkpoints yet: nothing changed through it"))
}

/// `/diff`: this session's changes since its first checkpoint.
pub fn repl_diff(agent: &Agent, workspace: &Path) -> anyhow::Result<()> {
    match session_start(agent)? {
        Ok(id) => show_diff(workspace, &id),
        Err(why) => {
            out_line(why);
            Ok(())
        }
    }
}
