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
//!   - src/lib.rs (Read ×3, Edit)
//!   - src/main.rs (Read)
//! - README.md (Read)
//! ```
//!
//! A folder whose whole path is short (`/`, `src/`, `/home/me/project/src/`
//! under a line that already says `/home/me/project/`) is not worth a line
//! and two more spaces on every line under it ([`MIN_FOLDER_CHARS`]): its
//! entries say it themselves. A line is cut from the one above only after
//! a `/`, so every line names whole folders and file names as written.
//! [`expand_files`] turns the lines back into full paths; the read-back and
//! replay's survival probe both read a ledger's files with it.
//!
//! The tree's shape depends only on which paths are in it (a trie over
//! `/`-ended segments, a folder with one entry under it merged into that
//! entry), so what a file adds to the section's length is known exactly
//! when the budget is spent ([`PathTree::cost`]), in whatever order files
//! are chosen; it can be less than nothing, when the file makes a folder
//! line that shortens the lines already under it.

use super::find::rsplit_once_pair;
use std::ops::Range;

/// A folder without an entry of its own whose whole path is shorter than
/// this is not a line: a line pays for itself only when it saves more than
/// its own length and the two spaces it adds to every line under it.
const MIN_FOLDER_CHARS: usize = 8;

/// The files of a ledger section, as a trie of their paths cut after each `/`.
#[derive(Clone, Debug)]
pub(super) struct PathTree {
    /// `nodes[0]` is the root, which has no line of its own.
    nodes: Vec<Node>,
    /// Whether two entries have the same path: then the tree's shape
    /// depends on the order they came in (see [`PathTree::render_in_entry_order`]).
    duplicates: bool,
    /// The nodes' texts, each a range of it: a folder split off a node
    /// takes the front of the node's range, so no text is copied or
    /// allocated apart (a tree is built on every rendering of a ledger).
    texts: String,
}

#[derive(Clone, Debug)]
struct Node {
    /// The path's text after the node above's (whole segments), as a
    /// range of [`PathTree::texts`].
    text: Range<usize>,
    /// Bytes of the whole path up to and with `text`.
    full: usize,
    /// In the order they came.
    children: Vec<usize>,
    /// The entry whose path ends here (the caller's index) and the length
    /// of what follows the path on its line (`tail`).
    entry: Option<(usize, usize)>,
    /// Lines this node and everything under it render as.
    lines: usize,
    /// Lines that spell this node's text: 1 for a line of its own, else
    /// those of its children.
    heads: usize,
}

impl Node {
    /// Whether the node has a line of its own.
    fn is_line(&self) -> bool {
        self.entry.is_some() || self.children.is_empty() || self.full >= MIN_FOLDER_CHARS
    }
}

/// Where a path goes in a tree, found by [`PathTree::place`].
#[derive(Clone, Debug)]
pub(super) struct Place {
    /// The nodes the path runs through, from the root.
    chain: Vec<usize>,
    /// The depth of the lines directly under the chain's last node, and
    /// how many bytes of their path those lines spell for the nodes above
    /// that have no line.
    depth: usize,
    spelled: usize,
    /// Bytes of the path the chain's nodes spell.
    at: usize,
    kind: PlaceKind,
    /// The path is an entry's already.
    duplicate: bool,
}

#[derive(Clone, Copy, Debug)]
enum PlaceKind {
    /// A new line under the chain's last node.
    Leaf,
    /// The path is a folder's, which gets the entry (and a line).
    Mark(usize),
    /// The path shares `common` bytes (whole segments) of the text of
    /// `child`, the chain's last node's `slot`th: they become a folder,
    /// with the child and the path under it.
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
                text: 0..0,
                full: 0,
                children: Vec::new(),
                entry: None,
                lines: 0,
                heads: 0,
            }],
            duplicates: false,
            texts: String::new(),
        }
    }
}

/// The length of a line at `depth` whose text (after `- `) is `text` bytes.
fn line_len(depth: usize, text: usize) -> isize {
    (2 * depth + 2 + text + 1) as isize
}

/// The first segment of `path`: through its first `/`, or all of it.
fn first_segment(path: &str) -> &str {
    path.find('/').map_or(path, |i| &path[..=i])
}

/// Whether `text`'s first segment is `first` (itself a first segment):
/// `first_segment(text) == first` without searching `text` for its `/`,
/// which `place` asked of every child of every folder on a path's way.
fn same_first_segment(text: &str, first: &str) -> bool {
    if first.ends_with('/') {
        // `first` holds its only `/` last: `text`'s first `/` is there too.
        text.starts_with(first)
    } else {
        // No `/` in `first`: `text` must be all one segment, the same.
        text == first
    }
}

/// Bytes of the longest run of whole segments `a` and `b` begin with:
/// through the last `/` of the bytes they share, or all of both when they
/// are the same (found in one pass, not segment by segment).
fn common_segments(a: &str, b: &str) -> usize {
    let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    if shared == a.len() && shared == b.len() {
        return shared;
    }
    a.as_bytes()[..shared]
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |slash| slash + 1)
}

impl PathTree {
    /// Node `n`'s text.
    fn text(&self, n: usize) -> &str {
        &self.texts[self.nodes[n].text.clone()]
    }

    /// Where `path` would go.
    pub(super) fn place(&self, path: &str) -> Place {
        let mut chain = Vec::with_capacity(8);
        chain.push(0);
        let mut place = Place {
            chain,
            depth: 0,
            spelled: 0,
            at: 0,
            kind: PlaceKind::Leaf,
            duplicate: false,
        };
        loop {
            let node = place.chain[place.chain.len() - 1];
            let rest = &path[place.at..];
            let first = first_segment(rest);
            let found = self.nodes[node]
                .children
                .iter()
                .enumerate()
                .find(|(_, c)| !first.is_empty() && same_first_segment(self.text(**c), first));
            let Some((slot, &child)) = found else {
                return place;
            };
            let common = common_segments(self.text(child), rest);
            let c = &self.nodes[child];
            if common < c.text.len() {
                place.kind = PlaceKind::Split {
                    child,
                    slot,
                    common,
                };
            } else if common < rest.len() {
                place.chain.push(child);
                place.at += common;
                if c.is_line() {
                    place.depth += 1;
                    place.spelled = 0;
                } else {
                    place.spelled += common;
                }
                continue;
            } else if c.entry.is_none() {
                place.kind = PlaceKind::Mark(child);
            } else {
                // The same path twice (two that read the same once their
                // control characters are spaces): a line of its own.
                place.duplicate = true;
            }
            return place;
        }
    }

    /// The bytes the section grows by when a path of `path_len` bytes goes
    /// at `place` with `tail` bytes after it on its line (less than 0 when
    /// a new folder line shortens more than it adds).
    pub(super) fn cost(&self, place: &Place, path_len: usize, tail: usize) -> isize {
        let (d, p) = (place.depth, place.spelled);
        let rest = path_len - place.at;
        // What a node gets by becoming a line at depth d with `text` bytes
        // spelled on it: its head lines no longer spell them, and it and
        // everything under it move two spaces right.
        let becomes_line = |n: &Node, text: usize, tail: usize| {
            line_len(d, p + text + tail) - ((p + text) * n.heads) as isize + (2 * n.lines) as isize
        };
        match place.kind {
            PlaceKind::Leaf => line_len(d, p + rest + tail),
            PlaceKind::Mark(n) => {
                let n = &self.nodes[n];
                if n.is_line() {
                    tail as isize
                } else {
                    becomes_line(n, n.text.len(), tail)
                }
            }
            PlaceKind::Split { child, common, .. } => {
                let c = &self.nodes[child];
                if common == rest {
                    becomes_line(c, common, tail)
                } else if place.at + common >= MIN_FOLDER_CHARS {
                    becomes_line(c, common, 0) + line_len(d + 1, rest - common + tail)
                } else {
                    // A folder without a line: the child's lines spell
                    // it as before, the path's line spells it too.
                    line_len(d, p + rest + tail)
                }
            }
        }
    }

    /// Puts `path` at `place` (from [`PathTree::place`] on this tree as it
    /// is), as the caller's entry `entry` with `tail` bytes after it.
    pub(super) fn insert(&mut self, place: Place, path: &str, entry: usize, tail: usize) {
        self.duplicates |= place.duplicate;
        let rest = &path[place.at..];
        let parent = place.chain[place.chain.len() - 1];
        let entry = Some((entry, tail));
        // Lines added, and heads before and after of the node that changed
        // under the chain.
        let (lines, heads_before, heads_after) = match place.kind {
            PlaceKind::Leaf => {
                let leaf = self.push_leaf(rest, path.len(), entry);
                self.nodes[parent].children.push(leaf);
                (1, 0, 1)
            }
            PlaceKind::Mark(n) => {
                let was_line = self.nodes[n].is_line();
                let node = &mut self.nodes[n];
                let before = node.heads;
                node.entry = entry;
                node.heads = 1;
                let added = usize::from(!was_line);
                node.lines += added;
                (added, before, 1)
            }
            PlaceKind::Split {
                child,
                slot,
                common,
            } => {
                // The folder takes the front of the child's text.
                let whole = self.nodes[child].text.clone();
                let text = whole.start..whole.start + common;
                self.nodes[child].text = text.end..whole.end;
                let full = place.at + common;
                let (below, heads) = (self.nodes[child].lines, self.nodes[child].heads);
                let folder = if common == rest.len() {
                    self.push_node(Node {
                        text,
                        full,
                        children: vec![child],
                        entry,
                        lines: below + 1,
                        heads: 1,
                    })
                } else {
                    let leaf = self.push_leaf(&rest[common..], path.len(), entry);
                    let folder = self.push_node(Node {
                        text,
                        full,
                        children: vec![child, leaf],
                        entry: None,
                        lines: below + 1,
                        heads: 0,
                    });
                    let node = &mut self.nodes[folder];
                    if node.is_line() {
                        node.lines += 1;
                        node.heads = 1;
                    } else {
                        node.heads = heads + 1;
                    }
                    folder
                };
                self.nodes[parent].children[slot] = folder;
                let node = &self.nodes[folder];
                (node.lines - below, heads, node.heads)
            }
        };
        // Up the chain: every node holds the new lines; those without a
        // line of their own, up to the first with one, the new heads.
        let mut heads_change = true;
        for &n in place.chain.iter().rev() {
            let node = &mut self.nodes[n];
            node.lines += lines;
            if heads_change && n != 0 && !node.is_line() {
                node.heads = node.heads + heads_after - heads_before;
            } else {
                heads_change = false;
            }
        }
    }

    /// A new leaf, the end of `entry`'s path (`full` bytes long in all):
    /// its text written at the end of `texts`, one line of its own.
    fn push_leaf(&mut self, text: &str, full: usize, entry: Option<(usize, usize)>) -> usize {
        let start = self.texts.len();
        self.texts.push_str(text);
        self.push_node(Node {
            text: start..self.texts.len(),
            full,
            children: Vec::new(),
            entry,
            lines: 1,
            heads: 1,
        })
    }

    /// Adds `node`, and says where it is.
    fn push_node(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// The tree's lines, each entry's followed by what `tail(entry, out)`
    /// writes after it.
    pub(super) fn render(&self, out: &mut String, tail: impl Fn(usize, &mut String)) {
        self.render_ordered(out, tail, None);
    }

    /// The lines [`PathTree::render`] writes for a tree of the same
    /// entries inserted in ascending order of their indices, whatever
    /// order they came in: the ledger chooses its files newest first, and
    /// shows them in the order first used, without building the tree
    /// again. `false`, and nothing written, when two entries have the same
    /// path (the tree's shape then depends on the order).
    ///
    /// The shape of a tree (which nodes, their texts, which under which)
    /// depends only on its paths; inserted in ascending order, each
    /// folder's children come in the order of the least index under each
    /// (an entry added later has a greater index than all before it, and
    /// goes last or under a node that keeps its place). So the lines are
    /// these children in that order.
    pub(super) fn render_in_entry_order(
        &self,
        out: &mut String,
        tail: impl Fn(usize, &mut String),
    ) -> bool {
        if self.duplicates {
            return false;
        }
        // Each node's least index under it, children after their parents
        // in `order`, so computed from the last.
        let mut order = vec![0];
        let mut k = 0;
        while k < order.len() {
            order.extend(self.nodes[order[k]].children.iter().copied());
            k += 1;
        }
        let mut least = vec![usize::MAX; self.nodes.len()];
        for &n in order.iter().rev() {
            let node = &self.nodes[n];
            let below = node.children.iter().map(|&c| least[c]).min();
            let own = node.entry.map(|(i, _)| i);
            least[n] = own.into_iter().chain(below).min().unwrap_or(usize::MAX);
        }
        self.render_ordered(out, tail, Some(&least));
        true
    }

    /// The lines, each node's children in the order they came or, with
    /// `least`, by their least index.
    fn render_ordered(
        &self,
        out: &mut String,
        tail: impl Fn(usize, &mut String),
        least: Option<&[usize]>,
    ) {
        // What the nodes above a line spell when they have no line of
        // their own: a range of `spelled`, which only grows (one buffer,
        // not a string per node).
        let mut spelled = String::new();
        // (node, depth, its range of `spelled`), the next to write last.
        let mut stack: Vec<(usize, usize, Range<usize>)> = Vec::new();
        let push_children = |stack: &mut Vec<(usize, usize, Range<usize>)>,
                             n: usize,
                             depth,
                             above: Range<usize>| {
            let from = stack.len();
            let children = &self.nodes[n].children;
            stack.extend(children.iter().rev().map(|&c| (c, depth, above.clone())));
            if let Some(least) = least {
                stack[from..].sort_unstable_by_key(|(c, ..)| std::cmp::Reverse(least[*c]));
            }
        };
        push_children(&mut stack, 0, 0, 0..0);
        while let Some((n, depth, above)) = stack.pop() {
            let node = &self.nodes[n];
            if !node.is_line() {
                let start = spelled.len();
                spelled.extend_from_within(above);
                spelled.push_str(&self.texts[node.text.clone()]);
                push_children(&mut stack, n, depth, start..spelled.len());
                continue;
            }
            for _ in 0..depth {
                out.push_str("  ");
            }
            out.push_str("- ");
            out.push_str(&spelled[above]);
            out.push_str(&self.texts[node.text.clone()]);
            if let Some((i, _)) = node.entry {
                tail(i, out);
            }
            out.push('\n');
            push_children(&mut stack, n, depth + 1, 0..0);
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
        if let Some((path, uses)) = text
            .strip_suffix(')')
            .and_then(|t| rsplit_once_pair(t, b' ', b'('))
        {
            let path = joined(prefix, path);
            if path.ends_with('/') {
                folders.push(path.clone());
            }
            out.push((path, uses));
        } else if text.ends_with('/') {
            folders.push(joined(prefix, text));
        }
    }
    out
}

/// `folder` and `rest` as one path, in one allocation (every file of a
/// ledger read back is one).
fn joined(folder: &str, rest: &str) -> String {
    let mut path = String::with_capacity(folder.len() + rest.len());
    path.push_str(folder);
    path.push_str(rest);
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The tree of `paths`, inserted in that order, each with tail ` (T)`,
    /// rendered; and what the insertions said they would cost.
    fn rendered(paths: &[String]) -> (String, isize) {
        let mut tree = PathTree::default();
        let mut cost = 0;
        for (i, p) in paths.iter().enumerate() {
            let place = tree.place(p);
            cost += tree.cost(&place, p.len(), " (T)".len());
            tree.insert(place, p, i, " (T)".len());
        }
        let mut out = String::new();
        tree.render(&mut out, |_, out| out.push_str(" (T)"));
        (out, cost)
    }

    #[test]
    /// `/`, `src/`: too short to be worth a line of their own.
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
            "/etc/hosts",
            "src/a.rs",
            "src/b.rs",
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
             - /etc/hosts (T)\n\
             - README.md (T)\n\
             - deps.get (T)\n\
             - deps/x/a.erl (T)\n\
             - src/a.rs (T)\n\
             - src/b.rs (T)\n"
        );
        assert_eq!(cost, text.len() as isize);
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

    /// The segments two paths share, a segment at a time (the definition).
    fn common_segments_by_segment(a: &str, b: &str) -> usize {
        let mut at = 0;
        loop {
            let (x, y) = (first_segment(&a[at..]), first_segment(&b[at..]));
            if x.is_empty() || x != y {
                return at;
            }
            at += x.len();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn the_segments_two_paths_share_are_found_in_one_pass(
            a in "[ab/]{0,12}",
            b in "[ab/]{0,12}",
        ) {
            prop_assert_eq!(common_segments(&a, &b), common_segments_by_segment(&a, &b));
            prop_assert_eq!(common_segments(&a, &a), common_segments_by_segment(&a, &a));
        }

        /// A tree of paths inserted in any order shows its lines as the
        /// tree of the same paths inserted in the order of their indices.
        #[test]
        fn a_tree_in_entry_order_is_the_tree_built_in_that_order(
            set in paths(),
            order in any::<prop::sample::Index>(),
        ) {
            let sorted: Vec<String> = set.iter().cloned().collect();
            let mut shuffled: Vec<usize> = (0..sorted.len()).collect();
            if !shuffled.is_empty() {
                let k = order.index(shuffled.len());
                shuffled.rotate_left(k);
                shuffled[k..].reverse();
            }
            let tail = |i: usize, out: &mut String| out.push_str(&format!(" ({i})"));
            let mut in_order = PathTree::default();
            for (i, p) in sorted.iter().enumerate() {
                in_order.insert(in_order.place(p), p, i, 0);
            }
            let mut expected = String::new();
            in_order.render(&mut expected, tail);
            let mut any_order = PathTree::default();
            for &i in &shuffled {
                let p = &sorted[i];
                any_order.insert(any_order.place(p), p, i, 0);
            }
            let mut got = String::new();
            prop_assert!(any_order.render_in_entry_order(&mut got, tail));
            prop_assert_eq!(got, expected);
        }

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
            prop_assert_eq!(cost, text.len() as isize, "{}", text);
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
