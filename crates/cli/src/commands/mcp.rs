//! MCP in the CLI: starting the session's servers with a progress line,
//! and `whittle mcp list`, `whittle mcp call` and the conformance suite's
//! client entry point (`whittle mcp conformance URL`).

use crate::args::{AgentArgs, McpArgs, McpCommand};
use crate::config::{self, Env, Settings};
use crate::ui::render::{err_line, out_line};
use crate::ui::style::Style;
use serde_json::{Map, Value, json};
use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use whittle_mcp::{
    McpServers, ServerConfig, ServerEntry, StartEvent, StartOptions, public_tool_name,
};
use whittle_protocol::collapse_whitespace;
use whittle_tools::{CancellationToken, Tool};

/// How much a start says on the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A line when starting and one per server (the REPL, `mcp list`).
    Lines,
    /// Only failures and tools left out (`-p`, whose stdout is the answer).
    Problems,
    /// Only tools left out (`mcp call`, which reports a failed start itself).
    ToolProblems,
}

/// Starts `configs` side by side, reporting on stderr.
async fn start_configs(
    settings: &Settings,
    configs: Vec<ServerConfig>,
    env: Env<'_>,
    progress: Progress,
) -> McpServers {
    let style = Style::detect(std::io::stderr().is_terminal());
    let options = StartOptions::snapshot(
        settings.workspace.clone(),
        Some(settings.state_dir().join("mcp")),
        &configs,
        env,
    );
    let servers = McpServers::start(configs, options, |event| match event {
        StartEvent::Starting(names) if progress == Progress::Lines => {
            err_line(&style.dim(&format!("mcp: starting {}…", names.join(", "))));
        }
        StartEvent::Starting(_) => {}
        StartEvent::Ready {
            server,
            tools,
            peer,
        } if progress == Progress::Lines => {
            err_line(&style.dim(&format!("mcp: {server} ready, {tools} tools ({peer})")));
        }
        StartEvent::Ready { .. } => {}
        StartEvent::Failed(_) if progress == Progress::ToolProblems => {}
        StartEvent::Failed(e) => err_line(&style.yellow(&format!(
            "{}; its tools are not available",
            collapse_whitespace(&e.to_string())
        ))),
    })
    .await;
    for problem in servers.problems() {
        err_line(&style.yellow(&collapse_whitespace(problem)));
    }
    servers
}

/// Starts the servers of the session's config.
pub async fn start_for_session(
    settings: &Settings,
    env: Env<'_>,
    progress: Progress,
) -> anyhow::Result<McpServers> {
    let configs = settings.mcp_server_configs()?;
    Ok(start_configs(settings, configs, env, progress).await)
}

/// `whittle mcp ...`.
pub async fn run(args: &McpArgs, env: Env<'_>) -> anyhow::Result<ExitCode> {
    if let McpCommand::Conformance { url } = &args.command {
        return conformance(url, env).await;
    }
    let agent_args = AgentArgs {
        cwd: args.cwd.clone(),
        trust_project: args.trust_project,
        ..AgentArgs::default()
    };
    let settings = config::load(&agent_args, env, None)?;
    if let Some(w) = &settings.withheld {
        let style = Style::detect(std::io::stderr().is_terminal());
        err_line(&style.dim(&w.ignored_notice()));
    }
    match &args.command {
        McpCommand::List => list(&settings, env).await,
        McpCommand::Call {
            server,
            tool,
            arguments,
        } => call(&settings, env, server, tool, arguments.as_deref()).await,
        McpCommand::Conformance { .. } => Ok(ExitCode::SUCCESS),
    }
}

async fn list(settings: &Settings, env: Env<'_>) -> anyhow::Result<ExitCode> {
    let configs = settings.mcp_server_configs()?;
    if configs.is_empty() {
        out_line(
            "no MCP servers are configured; add [mcp_servers.NAME] to a config file (see `whittle mcp --help`)",
        );
        return Ok(ExitCode::SUCCESS);
    }
    let servers = start_configs(settings, configs, env, Progress::Lines).await;
    let mut all_up = true;
    for server in servers.servers() {
        let config = server.config();
        let state = server.state_line().await;
        all_up &= state == "running";
        out_line(&format!(
            "{}  {}  {}",
            config.name,
            collapse_whitespace(&state),
            config.describe()
        ));
        for tool in servers
            .tools()
            .iter()
            .filter(|t| t.server_name() == config.name.as_str())
        {
            let summary = tool
                .description()
                .split_once("] ")
                .map_or("", |(_, d)| d)
                .lines()
                .next()
                .unwrap_or("");
            let mut summary: String = summary.chars().take(100).collect();
            if tool.is_read_only() {
                summary = format!("[read-only] {summary}");
            }
            out_line(&format!("  {}  {}", tool.name(), summary));
        }
    }
    let chars = servers.definition_chars();
    out_line(&format!(
        "tool definitions: {} tools, {chars} characters (about {} tokens)",
        servers.tools().len(),
        chars.div_ceil(4)
    ));
    servers.stop().await;
    Ok(if all_up {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The arguments of `mcp call`: a JSON object, `-` for stdin, none for `{}`.
fn call_arguments(given: Option<&str>) -> anyhow::Result<Value> {
    let text = match given {
        None => return Ok(Value::Object(Map::new())),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| anyhow::anyhow!("cannot read the arguments from stdin: {e}"))?;
            text
        }
        Some(t) => t.to_owned(),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the arguments are not JSON: {e}"))?;
    if !value.is_object() {
        anyhow::bail!(
            "the arguments must be a JSON object, not {}",
            whittle_protocol::json_kind(&value)
        );
    }
    Ok(value)
}

async fn call(
    settings: &Settings,
    env: Env<'_>,
    server: &str,
    tool: &str,
    arguments: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let arguments = call_arguments(arguments)?;
    let configs = settings.mcp_server_configs()?;
    let known: Vec<String> = configs.iter().map(|c| c.name.to_string()).collect();
    let Some(config) = configs.into_iter().find(|c| c.name.as_str() == server) else {
        anyhow::bail!(
            "no MCP server {server:?} is configured (the servers: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    let name = config.name.clone();
    let servers = start_configs(settings, vec![config], env, Progress::ToolProblems).await;
    // A call needs the server up: say why it is not.
    if let Some(s) = servers.servers().first() {
        let state = s.state_line().await;
        if state != "running" {
            anyhow::bail!("mcp server {name}: {}", collapse_whitespace(&state));
        }
    }
    // Accept the tool's public name too (`mcp__fs__read_file`).
    let remote = servers
        .tools()
        .iter()
        .find(|t| {
            t.name() == tool || public_tool_name(&name, t.remote_name()).as_deref() == Some(tool)
        })
        .map_or(tool.to_owned(), |t| t.remote_name().to_owned());
    let cancel = CancellationToken::new();
    let watcher = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        })
    };
    let result = servers.call(server, &remote, arguments, &cancel).await;
    watcher.abort();
    servers.stop().await;
    let output = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    out_line(&output.content);
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The conformance suite's client: connect to `url`, then do what the
/// scenario (`MCP_CONFORMANCE_SCENARIO`) tests, through the same code a
/// session uses. Scenarios a tool-using client has no part in (OAuth,
/// elicitation) fail with a line saying so.
async fn conformance(url: &str, env: Env<'_>) -> anyhow::Result<ExitCode> {
    let scenario = env("MCP_CONFORMANCE_SCENARIO").unwrap_or_else(|| "initialize".into());
    let context: Value = env("MCP_CONFORMANCE_CONTEXT")
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let plan = match scenario.as_str() {
        "initialize" | "json-schema-ref-no-deref" => Plan::ListOnly,
        "json-schema-2020-12-preservation" => Plan::EchoSchema {
            of: "json_schema_2020_12_tool",
            to: "json_schema_echo",
        },
        "tools_call"
        | "http-standard-headers"
        | "http-custom-headers"
        | "http-invalid-tool-headers" => Plan::CallTools,
        "request-metadata" => Plan::CallEachBare,
        "sse-retry" => Plan::CallNamed("test_reconnection"),
        other => anyhow::bail!(
            "conformance scenario {other:?} is not supported: whittle's MCP client calls tools; it offers no OAuth, elicitation or sampling (nor the input_required rounds that carry them)"
        ),
    };
    let entry = ServerEntry {
        url: Some(url.to_owned()),
        startup_timeout_s: Some(20.0),
        tool_timeout_s: Some(20.0),
        ..ServerEntry::default()
    };
    let Some(config) = ServerConfig::from_entry("conformance", &entry)? else {
        anyhow::bail!("the conformance server is disabled");
    };
    let workspace = std::env::current_dir()?;
    let options = StartOptions::snapshot(workspace, None, std::slice::from_ref(&config), env);
    let mut failure = None;
    let servers = McpServers::start(vec![config], options, |e| {
        if let StartEvent::Failed(e) = e {
            failure = Some(e.to_string());
        }
    })
    .await;
    if let Some(f) = failure {
        anyhow::bail!("{f}");
    }
    let cancel = CancellationToken::new();
    let calls: Vec<(String, Value)> = match plan {
        Plan::ListOnly => Vec::new(),
        Plan::CallTools => match context
            .get("toolCalls")
            .or_else(|| context.get("tool_calls"))
        {
            Some(Value::Array(calls)) => calls
                .iter()
                .filter_map(|c| {
                    let name = c.get("name")?.as_str()?.to_owned();
                    Some((name, c.get("arguments").cloned().unwrap_or(json!({}))))
                })
                .collect(),
            _ => servers
                .tools()
                .iter()
                .map(|t| {
                    (
                        t.remote_name().to_owned(),
                        example_arguments(&t.input_schema()),
                    )
                })
                .collect(),
        },
        Plan::CallEachBare => servers
            .tools()
            .iter()
            .map(|t| (t.remote_name().to_owned(), json!({})))
            .collect(),
        // The schema as the model would see it, sent back for comparison.
        Plan::EchoSchema { of, to } => servers
            .tools()
            .iter()
            .filter(|t| t.remote_name() == of)
            .map(|t| (to.to_owned(), json!({"schema": t.input_schema()})))
            .collect(),
        Plan::CallNamed(name) => servers
            .tools()
            .iter()
            .filter(|t| t.remote_name() == name)
            .map(|t| (t.remote_name().to_owned(), json!({})))
            .collect(),
    };
    let mut code = ExitCode::SUCCESS;
    for (tool, arguments) in calls {
        match servers.call("conformance", &tool, arguments, &cancel).await {
            Ok(out) => out_line(&format!("{tool}: {}", collapse_whitespace(&out.content))),
            Err(e) => {
                err_line(&format!("{tool}: {}", collapse_whitespace(&e)));
                code = ExitCode::FAILURE;
            }
        }
    }
    servers.stop().await;
    Ok(code)
}

enum Plan {
    ListOnly,
    CallTools,
    CallEachBare,
    CallNamed(&'static str),
    EchoSchema { of: &'static str, to: &'static str },
}

/// Arguments that satisfy a schema's required properties: each one's
/// default, else a plain value of its type.
fn example_arguments(schema: &Value) -> Value {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        let value = prop.get("default").cloned().unwrap_or_else(|| {
            match prop.get("type").and_then(Value::as_str) {
                Some("number") | Some("integer") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("test"),
            }
        });
        out.insert(name.to_owned(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_arguments_fill_required_properties() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string", "default": "x"}, "c": {"type": "boolean"}},
            "required": ["a", "b"]
        });
        assert_eq!(example_arguments(&schema), json!({"a": 1, "b": "x"}));
        assert_eq!(example_arguments(&json!({})), json!({}));
    }

    #[test]
    fn call_arguments_are_a_json_object() {
        assert_eq!(call_arguments(None).unwrap(), json!({}));
        assert_eq!(call_arguments(Some(r#"{"a":1}"#)).unwrap(), json!({"a": 1}));
        assert!(
            call_arguments(Some("[1]"))
                .unwrap_err()
                .to_string()
                .contains("JSON object")
        );
        assert!(
            call_arguments(Some("{"))
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
    }
}
