//! `mcp_tool_search`: when the servers' tool definitions would take too
//! much of the window, they are not sent; the model searches them instead,
//! and what it finds is loaded: listed from then on, after the other tools,
//! in the order found, so the cached prefix grows only at its end.

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use whittle_tools::{LoadedTools, Tool, ToolContext, ToolOutput, ToolSpec, parse_input};

/// The search tool's name.
pub const TOOL_SEARCH_NAME: &str = "mcp_tool_search";
/// Matches returned when the model does not say.
const DEFAULT_RESULTS: usize = 5;
/// Most matches one search returns.
const MAX_RESULTS: usize = 10;
/// Characters of tool names listed in the search tool's description.
const NAMES_BUDGET: usize = 3_000;

/// One searchable tool.
#[derive(Clone, Debug)]
struct Entry {
    spec: ToolSpec,
    server: String,
    /// Lowercase words of the name, for matching.
    name_words: Vec<String>,
    /// Lowercase description, for matching.
    text: String,
}

/// The search tool over a set of deferred MCP tools.
pub struct McpToolSearch {
    entries: Vec<Entry>,
    loaded: LoadedTools,
    description: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    query: String,
    #[serde(default)]
    max_results: Option<usize>,
}

impl McpToolSearch {
    /// A search over `tools` (spec and server name of each), loading into `loaded`.
    pub fn new(tools: Vec<(ToolSpec, String)>, loaded: LoadedTools) -> McpToolSearch {
        let entries: Vec<Entry> = tools
            .into_iter()
            .map(|(spec, server)| Entry {
                name_words: words(&spec.name),
                text: spec.description.to_lowercase(),
                spec,
                server,
            })
            .collect();
        let description = describe(&entries);
        McpToolSearch {
            entries,
            loaded,
            description,
        }
    }

    /// The best matches for `query`, best first.
    fn find(&self, query: &str, limit: usize) -> Vec<&Entry> {
        let query = query.trim();
        let named: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| {
                query
                    .split([',', ' '])
                    .any(|q| !q.is_empty() && e.spec.name.eq_ignore_ascii_case(q))
            })
            .take(limit)
            .collect();
        if !named.is_empty() {
            return named;
        }
        let terms = words(query);
        let mut scored: Vec<(u32, &Entry)> = self
            .entries
            .iter()
            .filter_map(|e| {
                let mut score = 0;
                for t in &terms {
                    if e.name_words.iter().any(|w| w == t) {
                        score += 4;
                    } else if e.name_words.iter().any(|w| w.starts_with(t.as_str())) {
                        score += 2;
                    }
                    if e.text.contains(t.as_str()) {
                        score += 1;
                    }
                    if e.server.eq_ignore_ascii_case(t) {
                        score += 1;
                    }
                }
                (score > 0).then_some((score, e))
            })
            .collect();
        scored.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| a.1.spec.name.cmp(&b.1.spec.name))
        });
        scored.into_iter().take(limit).map(|(_, e)| e).collect()
    }
}

/// Lowercase words of a name or query: split on anything but letters and
/// digits, and between a lowercase letter and a capital (`readFile`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.retain(|w| w != "mcp");
    out
}

fn describe(entries: &[Entry]) -> String {
    let mut servers: Vec<(&str, Vec<&str>)> = Vec::new();
    for e in entries {
        let remote = e
            .spec
            .name
            .strip_prefix(&format!("mcp__{}__", e.server))
            .unwrap_or(&e.spec.name);
        match servers.iter_mut().find(|(s, _)| *s == e.server) {
            Some((_, names)) => names.push(remote),
            None => servers.push((&e.server, vec![remote])),
        }
    }
    let mut listing = String::new();
    for (server, names) in &servers {
        let all = names.join(", ");
        if listing.len() + all.len() < NAMES_BUDGET {
            listing.push_str(&format!("\n- {server} ({} tools): {all}", names.len()));
        } else {
            listing.push_str(&format!("\n- {server} ({} tools)", names.len()));
        }
    }
    format!(
        "Search the tools of the connected MCP servers and load the matches. Their definitions \
         are left out of your tool list to save context: search by what you want to do (\"read \
         file\", \"create issue\") or by exact tool names separated by commas; the matches come \
         back with their input schemas and can be called by name from then on. Servers:{listing}"
    )
}

impl Tool for McpToolSearch {
    fn name(&self) -> &str {
        TOOL_SEARCH_NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Words describing the task, or exact tool names separated by commas."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many tools to load (default 5)."}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match parse_input(TOOL_SEARCH_NAME, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let limit = input
                .max_results
                .unwrap_or(DEFAULT_RESULTS)
                .clamp(1, MAX_RESULTS);
            let found = self.find(&input.query, limit);
            if found.is_empty() {
                return ToolOutput::ok(format!(
                    "No MCP tool matches {:?}. Try other words; the servers and their tools are \
                     listed in this tool's description.",
                    input.query
                ));
            }
            let mut text = format!(
                "{} tool(s) loaded; call them by name from now on.\n",
                found.len()
            );
            for e in found {
                self.loaded.load(&e.spec.name);
                text.push_str(&format!(
                    "\n## {}\n{}\nInput schema: {}\n",
                    e.spec.name, e.spec.description, e.spec.input_schema
                ));
            }
            ToolOutput::ok(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str) -> (ToolSpec, String) {
        let server = name.split("__").nth(1).unwrap_or("s").to_owned();
        (
            ToolSpec {
                name: name.into(),
                description: description.into(),
                input_schema: json!({"type": "object"}),
            },
            server,
        )
    }

    fn search() -> (McpToolSearch, LoadedTools) {
        let loaded = LoadedTools::default();
        let s = McpToolSearch::new(
            vec![
                spec("mcp__fs__read_file", "Read a file from disk."),
                spec("mcp__fs__write_file", "Write a file."),
                spec("mcp__gh__createIssue", "Open a new GitHub issue."),
                spec("mcp__gh__list_issues", "List issues of a repository."),
            ],
            loaded.clone(),
        );
        (s, loaded)
    }

    #[test]
    fn words_split_names_and_camel_case() {
        assert_eq!(words("mcp__gh__createIssue"), ["gh", "create", "issue"]);
        assert_eq!(words("Read FILE!"), ["read", "file"]);
    }

    #[test]
    fn matches_rank_names_over_descriptions() {
        let (s, _) = search();
        let names = |q: &str| -> Vec<String> {
            s.find(q, 10).iter().map(|e| e.spec.name.clone()).collect()
        };
        assert_eq!(names("read file")[0], "mcp__fs__read_file");
        assert_eq!(
            names("issue")[..2],
            ["mcp__gh__createIssue", "mcp__gh__list_issues"]
        );
        assert_eq!(names("mcp__fs__write_file"), ["mcp__fs__write_file"]);
        assert_eq!(names("mcp__fs__write_file, mcp__gh__list_issues").len(), 2);
        assert!(names("weather").is_empty());
    }

    #[tokio::test]
    async fn a_search_loads_what_it_found() {
        let (s, loaded) = search();
        let ctx = ToolContext::new(".");
        let out = s
            .run(json!({"query": "issue", "max_results": 1}), &ctx)
            .await;
        assert!(!out.is_error);
        assert!(out.content.contains("## mcp__gh__createIssue"));
        assert!(out.content.contains("Input schema: {\"type\":\"object\"}"));
        assert_eq!(loaded.names(), ["mcp__gh__createIssue"]);
        let out = s.run(json!({"query": "weather"}), &ctx).await;
        assert!(out.content.starts_with("No MCP tool matches"));
        let out = s.run(json!({"q": 1}), &ctx).await;
        assert!(out.is_error);
        assert!(
            s.description()
                .contains("- fs (2 tools): read_file, write_file")
        );
    }
}
