//! The ledger's files as a tree of shared folders.
//!
//! The paths of a session share long prefixes (a project's absolute root,
//! a dependency's folder), and written out whole, one a line, each repeats
//! them: on a recorded session at a 200k window, half of a ledger at its
//! budget was its files, most of that one 50-character root written thirty
//! times, while older commands and files were left out for room. So the
//! files are shown the way `tree` shows them: a folder that two or more
//! entries share is a line of its own, ending in `/`, and the entries under
//! it are indented two spaces more and written after it:
//!
//! ```text
//! - /home/me/project/
//!   - Cargo.toml (Read)
//!   - src/
//!     - lib.rs (Read ×3, Edit)
//!     - main.rs (Read)
//! - README.md (Read)
//! ```
//!
//! A line is cut from the one above only after a `/`, so every line names
//! whole folders and file names as written. [`expand_files`] turns the
//! lines back into full paths; the read-back and replay's survival probe
//! both read a ledger's files with it. The tree's shape depends only on
//! which paths are in it (a trie over `/`-ended segments, a folder with one
//! entry under it merged into that entry), so what a file adds to the
//! section's length is known exactly when the budget is spent
//! ([`PathTree::cost`]), in whatever order files are chosen.

use std::fmt::Write as _;

/// The files of a ledger section, as a trie of their paths cut after each `/`.
#[derive(Clone, Debug)]
pub(super) struct PathTree {
    /// `nodes[0]` is the root, which has no line of its own.
    nodes: Vec<Node>,
}

#[derive(Clone, Debug)]
struct Node {
    /// The path's text after the node above's: whole segments.
    text: String,
    /// In the order they came.
    children: Vec<usize>,
    /// The entry whose path ends here (the caller's index) and the length
    /// of what follows the path on its line (`tail`).
    entry: Option<(usize, usize)>,
    /// Lines this node and everything under it render as.
    lines: usize,
}

/// Where a path goes in a tree, found by [`PathTree::place`].
#[derive(Clone, Debug)]
pub(super) struct Place {
    /// The nodes the path runs through, from the root; the new line goes
    /// under the last, at depth `chain.len() - 1`.
    chain: Vec<usize>,
    /// Bytes of the path the chain's nodes spell.
    at: usize,
    kind: PlaceKind,
}

#[derive(Clone, Copy, Debug)]
enum PlaceKind {
    /// A new line under the chain's last node.
    Leaf,
    /// The path is a folder line's: the entry goes on that line.
    Mark(usize),
    /// The path shares `common` bytes (whole segments) of the text of
    /// `child`, the chain's last node's `slot`th: a folder line is made of
    /// them, with the child and the path under it.
    Split {
        child: usize,
        slot: usize,
        common: usize,
    },
}

impl Default for PathTree {
    fn default() -> Self {
        PathTree {
            nodes: vec![Node {
                text: String::new(),
                children: Vec::new(),
                entry: None,
                lines: 0,
            }],
        }
    }
}

/// The length of a line at `depth` whose text (after `- `) is `text` bytes.
fn line_len(depth: usize, text: usize) -> usize {
    2 * depth + 2 + text + 1
}

/// The first segment of `path`: through its first `/`, or all of it.
fn first_segment(path: &str) -> &str {
    path.find('/').map_or(path, |i| &path[..=i])
}

/// Bytes of the longest run of whole segments `a` and `b` begin with.
fn common_segments(a: &str, b: &str) -> usize {
    let mut at = 0;
    loop {
        let (x, y) = (first_segment(&a[at..]), first_segment(&b[at..]));
        if x.is_empty() || x != y {
            return at;
        }
        at += x.len();
    }
}

impl PathTree {
    /// Where `path` would go.
    pub(super) fn place(&self, path: &str) -> Place {
        let mut chain = vec![0];
        let mut at = 0;
        loop {
            let node = chain[chain.len() - 1];
            let rest = &path[at..];
            let first = first_segment(rest);
            let found =
                self.nodes[node].children.iter().enumerate().find(|(_, c)| {
                    !first.is_empty() && first_segment(&self.nodes[**c].text) == first
                });
            let Some((slot, &child)) = found else {
                return Place {
                    chain,
                    at,
                    kind: PlaceKind::Leaf,
                };
            };
            let text = &self.nodes[child].text;
            let common = common_segments(text, rest);
            let kind = if common < text.len() {
                PlaceKind::Split {
                    child,
                    slot,
                    common,
                }
            } else if common < rest.len() {
                chain.push(child);
                at += common;
                continue;
            } else if self.nodes[child].entry.is_none() {
                PlaceKind::Mark(child)
            } else {
                // The same path twice (two that read the same once their
                // control characters are spaces): a line of its own.
                PlaceKind::Leaf
            };
            return Place { chain, at, kind };
        }
    }

    /// The bytes the section grows by when a path of `path_len` bytes goes
    /// at `place` with `tail` bytes after it on its line.
    pub(super) fn cost(&self, place: &Place, path_len: usize, tail: usize) -> usize {
        let depth = place.chain.len() - 1;
        let rest = path_len - place.at;
        match place.kind {
            PlaceKind::Leaf => line_len(depth, rest + tail),
            PlaceKind::Mark(_) => tail,
            PlaceKind::Split { child, common, .. } => {
                // The child and everything under it move two spaces right,
                // and its line no longer spells the common part.
                let moved = 2 * self.nodes[child].lines;
                if common == rest {
                    line_len(depth, common + tail) - common + moved
                } else {
                    line_len(depth, common) - common
                        + moved
                        + line_len(depth + 1, rest - common + tail)
                }
            }
        }
    }

    /// Puts `path` at `place` (from [`PathTree::place`] on this tree as it
    /// is), as the caller's entry `entry` with `tail` bytes after it.
    pub(super) fn insert(&mut self, place: Place, path: &str, entry: usize, tail: usize) {
        let rest = &path[place.at..];
        let parent = place.chain[place.chain.len() - 1];
        let added = match place.kind {
            PlaceKind::Leaf => {
                let leaf = self.push(rest, Vec::new(), Some((entry, tail)), 1);
                self.nodes[parent].children.push(leaf);
                1
            }
            PlaceKind::Mark(node) => {
                self.nodes[node].entry = Some((entry, tail));
                0
            }
            PlaceKind::Split {
                child,
                slot,
                common,
            } => {
                let text: String = self.nodes[child].text.drain(..common).collect();
                let below = self.nodes[child].lines;
                let (folder, added) = if common == rest.len() {
                    let folder = self.push(&text, vec![child], Some((entry, tail)), below + 1);
                    (folder, 1)
                } else {
                    let leaf = self.push(&rest[common..], Vec::new(), Some((entry, tail)), 1);
                    let folder = self.push(&text, vec![child, leaf], None, below + 2);
                    (folder, 2)
                };
                self.nodes[parent].children[slot] = folder;
                added
            }
        };
        for &n in &place.chain {
            self.nodes[n].lines += added;
        }
    }

    fn push(
        &mut self,
        text: &str,
        children: Vec<usize>,
        entry: Option<(usize, usize)>,
        lines: usize,
    ) -> usize {
        self.nodes.push(Node {
            text: text.to_owned(),
            children,
            entry,
            lines,
        });
        self.nodes.len() - 1
    }

    /// The tree's lines, each entry's followed by `tail(entry)`.
    pub(super) fn render(&self, out: &mut String, tail: impl Fn(usize) -> String) {
        let mut stack: Vec<(usize, usize)> = self.nodes[0]
            .children
            .iter()
            .rev()
            .map(|&c| (c, 0))
            .collect();
        while let Some((n, depth)) = stack.pop() {
            let node = &self.nodes[n];
            let after = node.entry.map(|(i, _)| tail(i)).unwrap_or_default();
            let _ = writeln!(
                out,
                "{:indent$}- {}{after}",
                "",
                node.text,
                indent = 2 * depth
            );
            stack.extend(node.children.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
}

/// The entries of a ledger's files section, from its lines (the tree
/// [`PathTree::render`] writes, or one path a line as older ledgers did):
/// each file's whole path and what its line says after it (`Read ×3,
/// Edit`), in order. A line that is neither is passed over.
pub(crate) fn expand_files<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<(String, &'a str)> {
    let mut out = Vec::new();
    // The whole path of the folder each depth's lines are under.
    let mut folders: Vec<String> = Vec::new();
    for line in lines {
        let text = line.trim_start_matches(' ');
        let depth = (line.len() - text.len()) / 2;
        let Some(text) = text.strip_prefix("- ") else {
            continue;
        };
        folders.truncate(depth);
        let prefix = folders.last().map_or("", String::as_str);
        if let Some((path, uses)) = text.strip_suffix(')').and_then(|t| t.rsplit_once(" (")) {
            let path = format!("{prefix}{path}");
            if path.ends_with('/') {
                folders.push(path.clone());
            }
            out.push((path, uses));
        } else if text.ends_with('/') {
            folders.push(format!("{prefix}{text}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The tree of `paths`, inserted in that order, each with tail ` (T)`,
    /// rendered; and what the insertions said they would cost.
    fn rendered(paths: &[String]) -> (String, usize) {
        let mut tree = PathTree::default();
        let mut cost = 0;
        for (i, p) in paths.iter().enumerate() {
            let place = tree.place(p);
            cost += tree.cost(&place, p.len(), " (T)".len());
            tree.insert(place, p, i, " (T)".len());
        }
        let mut out = String::new();
        tree.render(&mut out, |_| " (T)".to_owned());
        (out, cost)
    }

    #[test]
    fn shared_folders_are_lines_of_their_own_and_expand_back() {
        let paths: Vec<String> = [
            "/home/me/p/Cargo.toml",
            "README.md",
            "/home/me/p/src/lib.rs",
            "/home/me/p/src/main.rs",
            "/home/me/p/src/",
            "/home/me/q.txt",
            "deps.get",
            "deps/x/a.erl",
        ]
        .map(str::to_owned)
        .to_vec();
        let (text, cost) = rendered(&paths);
        assert_eq!(
            text,
            "- /home/me/\n  \
               - p/\n    \
                 - Cargo.toml (T)\n    \
                 - src/ (T)\n      \
                   - lib.rs (T)\n      \
                   - main.rs (T)\n  \
               - q.txt (T)\n\
             - README.md (T)\n\
             - deps.get (T)\n\
             - deps/x/a.erl (T)\n"
        );
        assert_eq!(cost, text.len());
        let back: Vec<(String, &str)> = expand_files(text.lines());
        let back: BTreeSet<&str> = back
            .iter()
            .map(|(p, u)| {
                assert_eq!(*u, "T");
                p.as_str()
            })
            .collect();
        assert_eq!(back, paths.iter().map(String::as_str).collect());
    }

    #[test]
    fn one_path_a_line_as_older_ledgers_wrote_reads_the_same() {
        let lines = [
            "- /a/b.rs (Read ×2, Edit)",
            "- c (d).txt (Bash)",
            "not an entry",
        ];
        assert_eq!(
            expand_files(lines),
            [
                ("/a/b.rs".to_owned(), "Read ×2, Edit"),
                ("c (d).txt".to_owned(), "Bash")
            ]
        );
    }

    /// Paths made of few segments, so that they share folders often, with
    /// the characters a line's form uses (` (`, `)`, `- `, spaces).
    fn paths() -> impl Strategy<Value = BTreeSet<String>> {
        let segment = prop::sample::select(vec![
            "/", "home/", "me/", "src/", "a.rs", "b (c).rs", "x)/", "- y/", " z", "deps/", "..",
            "d/", "e",
        ]);
        prop::collection::btree_set(
            prop::collection::vec(segment, 0..7).prop_map(|s| s.concat()),
            0..40,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Rendered in any order, a set of paths reads back as the same set,
        /// each with its tail, and is as long as its insertions said.
        #[test]
        fn a_tree_reads_back_as_its_paths_and_costs_what_it_said(
            set in paths(),
            order in any::<prop::sample::Index>(),
        ) {
            let mut paths: Vec<String> = set.iter().cloned().collect();
            if !paths.is_empty() {
                let k = order.index(paths.len());
                paths.rotate_left(k);
                paths[k..].reverse();
            }
            let (text, cost) = rendered(&paths);
            prop_assert_eq!(cost, text.len(), "{}", text);
            let back = expand_files(text.lines());
            prop_assert!(back.iter().all(|(_, u)| *u == "T"), "{}", text);
            let back: BTreeSet<String> = back.into_iter().map(|(p, _)| p).collect();
            prop_assert_eq!(&back, &set, "{}", text);
            // The shape is the set's: sorted, the same length.
            let sorted: Vec<String> = set.iter().cloned().collect();
            prop_assert_eq!(rendered(&sorted).0.len(), text.len());
        }
    }
}
