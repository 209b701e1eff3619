//! The words of a command that name paths, so that paths outside the
//! workspace can be asked about.

use super::segment::Segment;

/// Words in a segment that name paths: arguments that start with `/`, `~`
/// or `$HOME`, contain a `..` component, go through a symlink in the
/// workspace, or are `--opt=` / `key=` values like those; plus redirection
/// targets other than `/dev/null` and friends. An absolute path counts only
/// if its first component exists, so `/api/v1` in a grep pattern is not a
/// path. Device files are exempt as redirection targets only: `mv x
/// /dev/null` is a path like any other.
pub(crate) fn path_words(seg: &Segment, workspace: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut consider = |w: &str| {
        let candidates = std::iter::once(w).chain(w.split_once('=').map(|(_, v)| v));
        for c in candidates {
            if looks_like_path(c) || through_symlink(c, workspace) {
                out.push(c.to_owned());
                break;
            }
        }
    };
    for a in seg.argv.iter().skip(1) {
        consider(a);
    }
    for r in &seg.redirects {
        if (r.writes_file() || r.reads_file())
            && !r.target.is_empty()
            && !is_harmless_device(&r.target)
        {
            consider(&r.target);
        }
    }
    out
}

/// True when a relative word names an existing path in the workspace that
/// goes through a symlink (which may lead outside it).
fn through_symlink(w: &str, workspace: &std::path::Path) -> bool {
    use std::path::Component;
    if w.is_empty() || w.starts_with(['-', '/']) {
        return false;
    }
    let mut p = workspace.to_path_buf();
    for component in std::path::Path::new(w).components() {
        match component {
            Component::CurDir => continue,
            Component::Normal(c) => p.push(c),
            _ => return false,
        }
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

fn looks_like_path(w: &str) -> bool {
    if w.is_empty() {
        return false;
    }
    if w == "~" || w.starts_with("~/") || w.starts_with("$HOME") || w.starts_with("${HOME}") {
        return true;
    }
    if w == ".." || w.starts_with("../") || w.contains("/../") || w.ends_with("/..") {
        return true;
    }
    if let Some(rest) = w.strip_prefix('/') {
        let first = rest.split('/').next().unwrap_or("");
        if first.is_empty() {
            return true;
        }
        if first.contains(['*', '?', '[']) {
            return true;
        }
        return std::path::Path::new("/").join(first).exists();
    }
    false
}

/// Devices a redirection may name without it counting as a write or as
/// leaving the workspace.
pub(crate) fn is_harmless_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null"
            | "/dev/stdin"
            | "/dev/stdout"
            | "/dev/stderr"
            | "/dev/tty"
            | "/dev/zero"
            | "/dev/random"
            | "/dev/urandom"
    ) || path.starts_with("/dev/fd/")
}
