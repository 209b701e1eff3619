//! Links from the page to files beside it: relative, so the page and the
//! `.whittle` folder can move together, and marked when the file is gone.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::Serialize;
use std::path::{Component, Path};

/// What a path segment of an href may not hold as it is.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\');

/// A link to a file the page names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Link {
    /// The href, relative to the page's folder (absolute when no relative
    /// path exists, e.g. on another drive).
    pub href: String,
    /// The file as the log names it.
    pub label: String,
    /// Whether the file exists as the page is made.
    pub exists: bool,
}

impl Link {
    /// A link to `path` (relative paths are under `root`) from a page in `page_dir`.
    pub fn to(root: &Path, path: &Path, page_dir: &Path) -> Link {
        let target = root.join(path);
        let href = pathdiff::diff_paths(&target, page_dir).unwrap_or_else(|| target.clone());
        let mut segments = Vec::new();
        let mut absolute = false;
        for c in href.components() {
            match c {
                Component::Normal(s) => {
                    segments.push(utf8_percent_encode(&s.to_string_lossy(), SEGMENT).to_string())
                }
                Component::ParentDir => segments.push("..".to_string()),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => absolute = true,
            }
        }
        let joined = segments.join("/");
        Link {
            href: if absolute {
                format!("file:///{joined}")
            } else {
                joined
            },
            label: path.display().to_string(),
            exists: target.is_file(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_page_and_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".whittle");
        std::fs::create_dir_all(root.join("tool-results")).unwrap();
        std::fs::write(root.join("tool-results/a b#1.txt"), "x").unwrap();
        let page = root.join("reports");
        let l = Link::to(&root, Path::new("tool-results/a b#1.txt"), &page);
        assert_eq!(l.href, "../tool-results/a%20b%231.txt");
        assert!(l.exists);
        let abs = root.join("transcripts/gone.jsonl");
        let l = Link::to(&root, &abs, &page);
        assert_eq!(l.href, "../transcripts/gone.jsonl");
        assert!(!l.exists);
    }
}
