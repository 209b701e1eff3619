//! `read_file`: numbered lines of a text file, in bounded memory and output.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::tool::{ToolContext, ToolOutput};
use crate::truncate::cap_line;
use crate::typed::TypedTool;
use schemars::JsonSchema;
use whittle_protocol::group_digits;

/// Lines shown when the model gives no limit.
const DEFAULT_LIMIT: u64 = 2000;
/// Characters shown of one line.
const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line kept in memory (enough for MAX_LINE_CHARS of any UTF-8).
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;
/// Characters of output before the listing stops.
const MAX_OUTPUT_CHARS: usize = 60_000;
/// Bytes sniffed for a NUL to call a file binary.
const SNIFF_BYTES: usize = 8192;
/// Bytes read past the shown lines to count the rest; beyond this the
/// total is given as a lower bound, so a huge log does not stall the tool.
const MAX_COUNT_BYTES: u64 = 64 * 1024 * 1024;

/// The `read_file` tool.
#[derive(Debug, Default)]
pub struct ReadFileTool;

/// What the model sends to `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileInput {
    /// File to read, relative to the workspace or absolute.
    #[schemars(length(min = 1))]
    pub path: String,
    /// First line to show, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// How many lines to show (default 2000).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

impl TypedTool for ReadFileTool {
    type Input = ReadFileInput;
    const NAME: &'static str = tool_names::READ_FILE;
    const DESCRIPTION: &'static str = "Read a text file. Lines are numbered like `cat -n` (the numbers are not part of the file). \
         Reads up to 2000 lines from `offset` (1-based line number); use offset/limit to page \
         through long files. Very long lines are cut. Binary files are refused. The path is \
         relative to the workspace or absolute.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, input: ReadFileInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.path.is_empty() {
                return ToolOutput::error("invalid input for read_file: `path` is empty");
            }
            if input.limit == Some(0) {
                return ToolOutput::error(
                    "invalid input for read_file: `limit` must be at least 1",
                );
            }
            let path = ctx.resolve(&input.path);
            let shown = ctx.display(&path);
            let offset = input.offset.unwrap_or(1).max(1);
            let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
            if let Some(editor) = ctx.editor_reads()
                && std::fs::metadata(&path).map_or(true, |m| m.is_file())
                && let Ok(text) = editor.read_text(&path).await
            {
                // What the editor shows, saved or not; when it cannot say,
                // the disk answers (and words its errors).
                return match read_lines(text.as_bytes(), offset, limit) {
                    Ok(Listing::Binary) => ToolOutput::error(format!(
                        "{shown} is a binary file ({} bytes); read_file shows text only",
                        group_digits(text.len() as u64)
                    )),
                    Ok(Listing::Text(l)) => render(&shown, offset, &l),
                    Err(e) => ToolOutput::error(format!("cannot read {shown}: {e}")),
                };
            }
            let job =
                tokio::task::spawn_blocking(move || read_numbered(&path, &shown, offset, limit));
            match job.await {
                Ok(out) => out,
                Err(e) => ToolOutput::error(format!("read_file failed: {e}")),
            }
        })
    }
}

/// Does the blocking work of `read_file`.
fn read_numbered(path: &PathBuf, shown: &str, offset: u64, limit: u64) -> ToolOutput {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return ToolOutput::error(format!("file not found: {shown}"));
        }
        Err(e) => return ToolOutput::error(format!("cannot read {shown}: {e}")),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!(
            "{shown} is a directory, not a file; use glob to list its files"
        ));
    }
    if !meta.is_file() {
        // A FIFO or device could block forever or never end.
        return ToolOutput::error(format!(
            "{shown} is not a regular file (a device, socket or pipe); read_file reads files only"
        ));
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) => return ToolOutput::error(format!("cannot read {shown}: {e}")),
    };
    match read_lines(file, offset, limit) {
        Ok(Listing::Binary) => ToolOutput::error(format!(
            "{shown} is a binary file ({} bytes); read_file shows text only",
            group_digits(meta.len())
        )),
        Ok(Listing::Text(l)) => render(shown, offset, &l),
        Err(e) => ToolOutput::error(format!("cannot read {shown}: {e}")),
    }
}

enum Listing {
    Binary,
    Text(Lines),
}

struct Lines {
    numbered: String,
    first_shown: u64,
    last_shown: u64,
    total: u64,
    /// False when counting stopped early and `total` is a lower bound.
    total_exact: bool,
    lossy: bool,
    stopped_for_size: bool,
}

fn read_lines(mut file: impl Read, offset: u64, limit: u64) -> io::Result<Listing> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    if head.contains(&0) {
        return Ok(Listing::Binary);
    }
    let mut reader = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(file));
    let mut l = Lines {
        numbered: String::new(),
        first_shown: 0,
        last_shown: 0,
        total: 0,
        total_exact: true,
        lossy: false,
        stopped_for_size: false,
    };
    let end = offset.saturating_add(limit);
    let mut line = Vec::new();
    let mut counted_past_end = 0u64;
    while let Some(len) = read_line_capped(&mut reader, &mut line)? {
        l.total += 1;
        let n = l.total;
        if n >= end || l.stopped_for_size {
            counted_past_end += len as u64;
            if counted_past_end > MAX_COUNT_BYTES {
                l.total_exact = false;
                break;
            }
            continue;
        }
        if n < offset {
            continue;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let text = match std::str::from_utf8(&line) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                l.lossy = true;
                String::from_utf8_lossy(&line).into_owned()
            }
        };
        let cut = len > MAX_LINE_BYTES || text.chars().nth(MAX_LINE_CHARS).is_some();
        let mut text = cap_line(&text, MAX_LINE_CHARS);
        if cut {
            // Say how to see the rest: the line is on disk, read_file pages by lines.
            text.push_str(&format!(
                " [line {n} is {} bytes long; see the rest with bash, e.g. `sed -n '{n}p' FILE | cut -c{}-`]",
                group_digits(len as u64),
                MAX_LINE_CHARS + 1
            ));
        }
        if l.numbered.len() + text.len() > MAX_OUTPUT_CHARS && l.first_shown != 0 {
            l.stopped_for_size = true;
            continue;
        }
        if l.first_shown == 0 {
            l.first_shown = n;
        }
        l.last_shown = n;
        l.numbered.push_str(&format!("{n:>6}\t{text}\n"));
    }
    Ok(Listing::Text(l))
}

/// Reads one line into `out`, keeping at most MAX_LINE_BYTES of it; returns
/// the line's full length, or `None` at end of file.
fn read_line_capped(reader: &mut impl BufRead, out: &mut Vec<u8>) -> io::Result<Option<usize>> {
    out.clear();
    let mut total = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(Some(total));
        }
    }
}

fn render(shown: &str, offset: u64, l: &Lines) -> ToolOutput {
    if l.total == 0 {
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    if l.first_shown == 0 {
        return ToolOutput::error(format!(
            "offset {offset} is past the end of {shown}, which has {} lines",
            group_digits(l.total)
        ));
    }
    let mut out = l.numbered.clone();
    if l.lossy {
        out.push_str("[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]\n");
    }
    if l.first_shown > 1 || l.last_shown < l.total {
        let why = if l.stopped_for_size {
            format!(
                " (output capped at {} chars)",
                group_digits(MAX_OUTPUT_CHARS as u64)
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "[showing lines {}-{} of {}{}{why}",
            l.first_shown,
            l.last_shown,
            if l.total_exact { "" } else { "at least " },
            group_digits(l.total)
        ));
        if l.last_shown < l.total {
            out.push_str(&format!("; pass offset={} to read on", l.last_shown + 1));
        }
        out.push_str("]\n");
    }
    ToolOutput::ok(out)
}
