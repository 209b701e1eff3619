//! The workspace's rules, checked instead of written in prose: which crate
//! may depend on which (from `cargo metadata`, with the reason when one
//! breaks), and a tidy pass over the sources as rust-analyzer's `xtask
//! tidy` does: no async in the synchronous core, no `Result<_, String>` in
//! a library's public functions, `unsafe` lifted in one listed module only,
//! every crate root opening with an overview and an example that compiles
//! (and runs, unless it needs a server or a model file).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// For each crate, the workspace crates it may depend on (normal
/// dependencies; any crate may use `testkit` in its tests) and why.
const ALLOWED: &[(&str, &[&str], &str)] = &[
    (
        "whittle-shell",
        &[],
        "a shell parser: both the permission check and the ledger read commands with it",
    ),
    (
        "whittle-protocol",
        &[],
        "the wire types every layer speaks: no I/O, no async, nothing of whittle below it",
    ),
    (
        "whittle-sandbox",
        &[],
        "confines processes; it knows nothing of models, tools or the agent",
    ),
    (
        "whittle-checkpoint",
        &[],
        "snapshots and restores a workspace's files; it knows nothing of tools, sessions or the agent",
    ),
    (
        "whittle-store",
        &["whittle-protocol"],
        "tool outputs kept whole and transcripts on disk: what tools and the compaction core both write, below both",
    ),
    (
        "whittle-context",
        &["whittle-protocol", "whittle-shell", "whittle-store"],
        "the compaction core: no network, no async, no provider",
    ),
    (
        "whittle-local",
        &["whittle-protocol"],
        "the embedded model speaks whittle's messages and nothing above them",
    ),
    (
        "whittle-llm",
        &["whittle-protocol", "whittle-local"],
        "providers speak messages; they never see tools, the sandbox or the agent",
    ),
    (
        "whittle-tools",
        &[
            "whittle-protocol",
            "whittle-sandbox",
            "whittle-shell",
            "whittle-store",
        ],
        "tools run in the sandbox and save outputs in the store; they never call a model nor compact",
    ),
    (
        "whittle-mcp",
        &[
            "whittle-protocol",
            "whittle-llm",
            "whittle-store",
            "whittle-tools",
        ],
        "MCP servers become tools; the agent does not know they are remote (their logs are whittle's state, opened as the store opens it)",
    ),
    (
        "whittle-replay",
        &[
            "whittle-context",
            "whittle-llm",
            "whittle-protocol",
            "whittle-store",
        ],
        "offline evaluation of the core, with the providers' prices; no agent",
    ),
    (
        "whittle-report",
        &[
            "whittle-context",
            "whittle-llm",
            "whittle-protocol",
            "whittle-replay",
        ],
        "a page of what replay and the session log show",
    ),
    (
        "whittle-agent",
        &[
            "whittle-checkpoint",
            "whittle-context",
            "whittle-llm",
            "whittle-protocol",
            "whittle-sandbox",
            "whittle-store",
            "whittle-tools",
        ],
        "the loop: models, tools and the core, and checkpoints of the files around every tool that may write (so /rewind can undo them); it knows no CLI, MCP or editor",
    ),
    (
        "whittle-acp",
        &[
            "whittle-agent",
            "whittle-context",
            "whittle-llm",
            "whittle-protocol",
            "whittle-tools",
        ],
        "the Agent Client Protocol front: agent events and asks become ACP messages; the CLI builds its sessions",
    ),
    (
        "whittle",
        &[
            "whittle-acp",
            "whittle-agent",
            "whittle-checkpoint",
            "whittle-context",
            "whittle-llm",
            "whittle-local",
            "whittle-mcp",
            "whittle-protocol",
            "whittle-replay",
            "whittle-report",
            "whittle-sandbox",
            "whittle-store",
            "whittle-tools",
        ],
        "the binary puts everything together (whittle rewind/diff/checkpoint gc use the checkpoint store directly); nothing depends on it",
    ),
    (
        "testkit",
        &[],
        "fake servers for tests, usable by every crate's tests",
    ),
];

/// Crates whose library must stay synchronous: a harness embeds them
/// without a runtime.
const SYNC_CRATES: &[&str] = &["protocol", "shell", "store", "context", "sandbox"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn metadata() -> Value {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn crates_depend_only_downward() {
    let meta = metadata();
    let allowed: BTreeMap<&str, (&[&str], &str)> = ALLOWED
        .iter()
        .map(|(c, deps, why)| (*c, (*deps, *why)))
        .collect();
    let mut broken = Vec::new();
    let mut seen = BTreeSet::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        seen.insert(name.to_string());
        let Some((deps, why)) = allowed.get(name) else {
            broken.push(format!(
                "{name} is a new crate: add it to ALLOWED with what it may depend on and why"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let internal = allowed.contains_key(dep_name);
            let normal = dep["kind"].is_null() || dep["kind"] == "build";
            if internal && normal && !deps.contains(&dep_name) {
                broken.push(format!(
                    "{name} depends on {dep_name}, which it may not: {name} is {why}"
                ));
            }
        }
    }
    for (name, _, _) in ALLOWED {
        assert!(
            seen.contains(*name),
            "{name} is listed but not in the workspace"
        );
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The `.rs` files under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The crate folders under `crates/`, by folder name.
fn crate_dirs() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(_, p)| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn the_synchronous_core_has_no_async() {
    let mut broken = Vec::new();
    for (name, dir) in crate_dirs() {
        if !SYNC_CRATES.contains(&name.as_str()) {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("");
        for runtime in ["tokio", "futures", "async-trait"] {
            if deps.lines().any(|l| l.trim_start().starts_with(runtime)) {
                broken.push(format!("crates/{name} depends on {runtime}"));
            }
        }
        for file in rust_files(&dir.join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains("async fn") || text.contains(".await") {
                broken.push(format!("{} uses async", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The only files whose code may lift the workspace's `unsafe_code = "deny"`, and why.
const UNSAFE_ALLOWED: &[(&str, &str)] = &[(
    "crates/local/src/file_map.rs",
    "maps the model file read-only (memmap2's map is unsafe: another process could truncate the file)",
)];

/// `unsafe` is denied for the workspace and lifted in exactly the files of
/// [`UNSAFE_ALLOWED`], once each: an attribute naming the lint anywhere else (allow,
/// expect or warn), or a crate that does not take the workspace's lints, fails.
#[test]
fn unsafe_code_is_allowed_in_one_module_only() {
    let root = workspace_root();
    let mut broken = Vec::new();
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for (name, dir) in crate_dirs() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let lints = manifest.split("[lints]").nth(1).unwrap_or("");
        let takes_workspace = lints
            .lines()
            .take_while(|l| !l.starts_with('['))
            .any(|l| l.split_whitespace().collect::<String>() == "workspace=true");
        if !takes_workspace || manifest.contains("unsafe_code") {
            broken.push(format!(
                "crates/{name}/Cargo.toml must take the workspace's lints unchanged"
            ));
        }
        for file in rust_files(&dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            let relative = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            for (i, line) in text.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with('#') && line.contains("unsafe_code") {
                    *found.entry(relative.clone()).or_default() += 1;
                    if !UNSAFE_ALLOWED.iter().any(|(f, _)| *f == relative) {
                        broken.push(format!("{relative}:{}: {line}", i + 1));
                    }
                }
            }
        }
    }
    for (file, why) in UNSAFE_ALLOWED {
        if found.get(*file) != Some(&1) {
            broken.push(format!(
                "{file} should lift unsafe_code exactly once (it {why})"
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn no_public_function_of_a_library_returns_a_string_error() {
    let mut broken = Vec::new();
    for (name, dir) in crate_dirs() {
        if name == "cli" {
            continue;
        }
        for file in rust_files(&dir.join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            // Signatures may wrap: look from `pub fn` to the body's brace.
            for (at, _) in text.match_indices("pub fn ") {
                let signature = &text[at..];
                let end = signature.find('{').unwrap_or(signature.len());
                let signature: String = signature[..end].split_whitespace().collect();
                if signature.contains(",String>") && signature.contains("Result<") {
                    let line = text[..at].lines().count() + 1;
                    broken.push(format!("{}:{line}: {signature}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn every_crate_root_opens_with_an_overview_and_an_example() {
    let mut broken = Vec::new();
    for (name, dir) in crate_dirs() {
        let lib = dir.join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else {
            continue;
        };
        let docs: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
        if docs.len() < 3 {
            broken.push(format!(
                "crates/{name}: lib.rs does not open with an overview"
            ));
        }
        // `no_run` where the example needs a server or a model file: it
        // still compiles against the real API. Never `ignore`.
        if !docs
            .iter()
            .any(|l| matches!(l.trim_end(), "//! ```" | "//! ```no_run"))
        {
            broken.push(format!("crates/{name}: the overview has no example"));
        }
        if docs.iter().any(|l| l.contains("```ignore")) {
            broken.push(format!("crates/{name}: an ignored example proves nothing"));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The module a source file is, as a path from the crate root (`a::b` for
/// `src/a/b.rs` and `src/a/b/mod.rs`); `None` for the root itself.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    let path = parts.join("::");
    (!matches!(path.as_str(), "lib" | "main" | "")).then_some(path)
}

/// The `crate::` paths a text names, as lists of segments: `crate::a::b::C`
/// and each item of `crate::{a::X, b::{c, d}}` (first segments suffice).
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    fn segments(rest: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = rest;
        loop {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if word.is_empty() {
                break;
            }
            rest = &rest[word.len()..];
            out.push(word);
            match rest.strip_prefix("::") {
                Some(r) if !r.starts_with('{') => rest = r,
                _ => break,
            }
        }
        out
    }
    let mut out = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(segments(group[start..i].trim_start()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(segments(group[start..i].trim_start()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(segments(rest));
        }
    }
    out
}

#[test]
fn no_source_files_import_each_other_in_a_cycle() {
    let mut broken = Vec::new();
    for (name, dir) in crate_dirs() {
        let src = dir.join("src");
        let files: Vec<(String, PathBuf)> = rust_files(&src)
            .into_iter()
            .filter_map(|f| module_of(&src, &f).map(|m| (m, f)))
            .collect();
        let modules: BTreeSet<&str> = files.iter().map(|(m, _)| m.as_str()).collect();
        let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (module, file) in &files {
            let text = std::fs::read_to_string(file).unwrap();
            // Unit tests may reach anywhere; only the code itself counts.
            // Doc links are not imports.
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for path in crate_paths(&code) {
                // The longest prefix of the path that is a module file.
                let target = (1..=path.len())
                    .rev()
                    .map(|n| path[..n].join("::"))
                    .find(|m| modules.contains(m.as_str()));
                if let Some(target) = target {
                    let target = *modules.get(target.as_str()).unwrap();
                    if target != module.as_str() {
                        edges.entry(module.as_str()).or_default().insert(target);
                    }
                }
            }
        }
        // A module that reaches itself again through its imports.
        for start in &modules {
            let mut stack: Vec<Vec<&str>> = vec![vec![start]];
            let mut seen = BTreeSet::new();
            while let Some(path) = stack.pop() {
                let last = *path.last().unwrap();
                for next in edges.get(last).into_iter().flatten() {
                    if next == start {
                        let mut cycle = path.clone();
                        cycle.push(next);
                        // Each cycle once: from its smallest module.
                        if path.iter().all(|m| m >= start) {
                            broken.push(format!("crates/{name}: {}", cycle.join(" -> ")));
                        }
                    } else if seen.insert(*next) {
                        let mut longer = path.clone();
                        longer.push(next);
                        stack.push(longer);
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "source files that import each other (move what both need into a file of its own):\n{}",
        broken.join("\n")
    );
}
