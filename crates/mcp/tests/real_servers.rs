//! Against MCP servers no one here wrote, from npm: server-everything over
//! stdio and over streamable HTTP, and server-filesystem. Skipped, with one
//! line, when scripts/test has not installed them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::NpmTools;
use whittle_mcp::{
    Installation, McpServers, ServerConfig, ServerEntry, StartEvent, StartOptions, TOOL_SEARCH_NAME,
};
use whittle_tools::{CancellationToken, Tool, ToolContext, ToolRegistry};

const SECRET: &str = "sk-ant-must-never-reach-a-server-0123";

fn options(workspace: &Path, npm: &NpmTools) -> StartOptions {
    let path = format!(
        "{}:{}",
        npm.node_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = workspace.to_string_lossy().into_owned();
    StartOptions {
        workspace: workspace.to_path_buf(),
        log_dir: Some(workspace.join(".whittle/mcp")),
        env: Box::new(move |k| match k {
            "PATH" => Some(path.clone()),
            "HOME" => Some(home.clone()),
            "ANTHROPIC_API_KEY" | "GREETING_SOURCE" => Some(SECRET.to_owned()),
            _ => None,
        }),
    }
}

fn stdio(
    name: &str,
    npm: &NpmTools,
    args: &[&str],
    extra: impl FnOnce(&mut ServerEntry),
) -> ServerConfig {
    let mut entry = ServerEntry {
        command: Some(npm.node().display().to_string()),
        args: args.iter().map(|a| a.to_string()).collect(),
        startup_timeout_s: Some(60.0),
        ..ServerEntry::default()
    };
    extra(&mut entry);
    ServerConfig::from_entry(name, &entry).unwrap().unwrap()
}

async fn start(configs: Vec<ServerConfig>, ws: &Path, npm: &NpmTools) -> (McpServers, Vec<String>) {
    let mut events = Vec::new();
    let servers = McpServers::start(configs, options(ws, npm), |e| {
        events.push(match e {
            StartEvent::Starting(names) => format!("starting {}", names.join(",")),
            StartEvent::Ready {
                server,
                tools,
                peer,
            } => format!("ready {server} {tools} {peer}"),
            StartEvent::Failed(e) => format!("failed {e}"),
        })
    })
    .await;
    (servers, events)
}

fn tool<'a>(servers: &'a McpServers, name: &str) -> &'a Arc<whittle_mcp::McpTool> {
    servers
        .tools()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_lists_echoes_shows_an_image_and_cancels() {
    let Some(npm) = NpmTools::find_or_skip("everything_over_stdio") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let everything = npm.everything().display().to_string();
    let config = stdio("everything", &npm, &[&everything, "stdio"], |e| {
        e.env
            .insert("GREETING".into(), "from ${GREETING_SOURCE}".into());
        e.tool_timeout_s = Some(30.0);
    });
    let (servers, events) = start(vec![config], ws.path(), &npm).await;
    println!("{events:?}");
    assert_eq!(events[0], "starting everything");
    assert!(events[1].starts_with("ready everything "), "{events:?}");
    assert!(events[1].contains("protocol 20"), "{events:?}");
    assert!(servers.problems().is_empty(), "{:?}", servers.problems());

    let names: Vec<&str> = servers.tools().iter().map(|t| t.name()).collect();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-tiny-image",
        "mcp__everything__trigger-long-running-operation",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    for t in servers.tools() {
        assert!(whittle_mcp::is_valid_tool_name(t.name()), "{}", t.name());
        assert_eq!(t.input_schema()["type"], "object");
    }
    assert!(tool(&servers, "mcp__everything__get-env").is_read_only());
    let whole = servers.definition_chars();
    let mut searched = ToolRegistry::builtin();
    servers.install(&mut searched, 0);
    let search = whittle_protocol::json_chars(&searched.specs())
        - whittle_protocol::json_chars(&ToolRegistry::builtin().specs());
    assert!(search < whole / 2, "{search} vs {whole}");
    println!(
        "server-everything: {} tools, definitions {whole} characters (~{} tokens); with tool search {search} characters (~{} tokens)",
        servers.tools().len(),
        whole.div_ceil(4),
        search.div_ceil(4)
    );

    let ctx = ToolContext::new(ws.path());
    let echo = tool(&servers, "mcp__everything__echo");
    let out = echo
        .run(json!({"message": "hello from whittle"}), &ctx)
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.content.contains("hello from whittle"), "{out:?}");

    let image = tool(&servers, "mcp__everything__get-tiny-image");
    let out = image.run(json!({}), &ctx).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.images.len(), 1, "{out:?}");
    assert_eq!(out.images[0].source["media_type"], "image/png");
    assert!(
        out.content.contains("[image 1: image/png"),
        "{}",
        out.content
    );

    // The server sees only the variables passed on and its own, expanded.
    let env = tool(&servers, "mcp__everything__get-env");
    let out = env.run(json!({}), &ctx).await;
    let seen: BTreeMap<String, Value> = serde_json::from_str(&out.content).unwrap();
    assert!(!seen.contains_key("ANTHROPIC_API_KEY"), "{seen:?}");
    assert_eq!(seen["GREETING"], format!("from {SECRET}"));
    assert!(
        !std::fs::read_to_string(ws.path().join(".whittle/mcp/everything.log"))
            .unwrap_or_default()
            .contains(SECRET),
        "the log holds no expanded value"
    );

    // A long call is cancelled: it returns at once, and the server goes on
    // answering.
    let long = tool(&servers, "mcp__everything__trigger-long-running-operation");
    let cancel = CancellationToken::new();
    let ctx_cancel = ctx.clone().with_cancel(cancel.clone());
    let started = Instant::now();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let out = long
        .run(json!({"duration": 20, "steps": 4}), &ctx_cancel)
        .await;
    canceller.await.unwrap();
    assert!(out.is_error);
    assert!(out.content.starts_with("cancelled by the user"), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let out = echo.run(json!({"message": "still here"}), &ctx).await;
    assert!(out.content.contains("still here"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let Some(npm) = NpmTools::find_or_skip("everything_over_streamable_http") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ws = tempfile::tempdir().unwrap();
    let mut server = tokio::process::Command::new(npm.node())
        .arg(npm.everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the HTTP server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entry = ServerEntry {
        url: Some(url),
        headers: [("X-Whittle-Test".to_owned(), "${GREETING_SOURCE}".to_owned())].into(),
        ..ServerEntry::default()
    };
    let config = ServerConfig::from_entry("web", &entry).unwrap().unwrap();
    let (servers, events) = start(vec![config], ws.path(), &npm).await;
    assert!(events[1].starts_with("ready web "), "{events:?}");
    let ctx = ToolContext::new(ws.path());
    let out = tool(&servers, "mcp__web__echo")
        .run(json!({"message": "over http"}), &ctx)
        .await;
    assert!(out.content.contains("over http"), "{out:?}");
    let out = tool(&servers, "mcp__web__get-tiny-image")
        .run(json!({}), &ctx)
        .await;
    assert_eq!(out.images.len(), 1, "{out:?}");
    drop(servers);
    server.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_and_tool_search() {
    let Some(npm) = NpmTools::find_or_skip("filesystem_and_tool_search") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the notes\n").unwrap();
    let fs = stdio(
        "fs",
        &npm,
        &[
            &npm.filesystem().display().to_string(),
            &root.display().to_string(),
        ],
        |_| {},
    );
    let everything = npm.everything().display().to_string();
    let ev = stdio("everything", &npm, &[&everything, "stdio"], |_| {});
    let (servers, events) = start(vec![fs, ev], ws.path(), &npm).await;
    assert_eq!(events.len(), 3, "{events:?}");
    let out = tool(&servers, "mcp__fs__read_text_file")
        .run(
            json!({"path": root.join("notes.txt")}),
            &ToolContext::new(&root),
        )
        .await;
    assert!(out.content.contains("the notes"), "{out:?}");

    // Whole when the definitions fit the budget; searched when they do not.
    let chars = servers.definition_chars();
    let mut whole = ToolRegistry::builtin();
    assert_eq!(
        servers.install(&mut whole, chars),
        Installation::Whole { chars }
    );
    assert!(whole.get(TOOL_SEARCH_NAME).is_none());
    let mut searched = ToolRegistry::builtin();
    let before = searched.specs().len();
    assert_eq!(
        servers.install(&mut searched, chars - 1),
        Installation::Searched {
            chars,
            tools: servers.tools().len()
        }
    );
    assert_eq!(
        searched.specs().len(),
        before + 1,
        "only the search tool is added"
    );
    let search = searched.get(TOOL_SEARCH_NAME).unwrap().clone();
    let out = search
        .run(json!({"query": "read text file"}), &ToolContext::new(&root))
        .await;
    assert!(
        out.content.contains("## mcp__fs__read_text_file"),
        "{}",
        out.content
    );
    let names: Vec<String> = searched.specs().into_iter().map(|s| s.name).collect();
    assert!(
        names[before + 1..].contains(&"mcp__fs__read_text_file".to_owned()),
        "{names:?}"
    );
    println!(
        "tool definitions: {chars} characters for {} tools; with tool search: {} characters",
        servers.tools().len(),
        whittle_protocol::json_chars(&searched.specs())
            - whittle_protocol::json_chars(&ToolRegistry::builtin().specs())
    );
}
