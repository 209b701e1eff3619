//! A scripted MCP server that misbehaves on purpose. It speaks JSON-RPC,
//! one message per line, on TCP connections to 127.0.0.1; the process a
//! client starts is [`McpFaultServer::stdio_command`], a `bash` relay whose
//! stdin and stdout are the connection. So the client sees a real child
//! process that dies when the script hangs up, and the script, in Rust,
//! decides every answer.
//!
//! The same script also answers streamable HTTP ([`McpFaultServer::http_url`]).
//!
//! Each tool added with [`McpFaultServer::add_tool`] behaves by its [`Behavior`]; the
//! server records every message it received ([`McpFaultServer::received`]),
//! so a test can check that a cancelled call was cancelled on the wire.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

/// What a tool does when called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Answers with its arguments as text.
    Echo,
    /// Writes half an answer, then hangs up: the process dies mid-call.
    Die,
    /// Never answers (and keeps the connection open).
    Hang,
    /// Writes a line that is not JSON.
    Garbage,
    /// Answers with one text of this many bytes (`0123456789` repeated).
    Huge(usize),
    /// Answers with a result whose `content` is not a list.
    BadResult,
}

/// How the server answers the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Startup {
    /// Answers `initialize` (and refuses `server/discover` as an older
    /// server does).
    Normal,
    /// Hangs up at the first message.
    Die,
    /// Never answers the handshake.
    Hang,
    /// Answers the handshake with a line that is not JSON.
    Garbage,
}

#[derive(Default)]
struct State {
    tools: Vec<Value>,
    behaviors: BTreeMap<String, Behavior>,
    received: Vec<Value>,
    http_headers: Vec<BTreeMap<String, String>>,
    connections: usize,
    startup: Option<Startup>,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    match shared.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The scripted server; it stops when dropped.
pub struct McpFaultServer {
    addr: SocketAddr,
    http_addr: SocketAddr,
    shared: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl McpFaultServer {
    /// A server offering one tool per behavior: `echo`, `die`, `hang`,
    /// `garbage`, `huge` (50 MB) and `bad_result`.
    pub fn start() -> McpFaultServer {
        let server = Self::empty();
        for (name, behavior) in [
            ("echo", Behavior::Echo),
            ("die", Behavior::Die),
            ("hang", Behavior::Hang),
            ("garbage", Behavior::Garbage),
            ("huge", Behavior::Huge(50 * 1024 * 1024)),
            ("bad_result", Behavior::BadResult),
        ] {
            server.add_tool(
                json!({"name": name, "description": format!("Behaves: {name}."), "inputSchema": {"type": "object"}}),
                behavior,
            );
        }
        server
    }

    /// A server with no tools yet.
    pub fn empty() -> McpFaultServer {
        match Self::try_start() {
            Ok(s) => s,
            Err(e) => panic!("testkit: cannot start the MCP fault server on 127.0.0.1: {e}"),
        }
    }

    fn try_start() -> std::io::Result<McpFaultServer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let http = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        http.set_nonblocking(true)?;
        let http_addr = http.local_addr()?;
        let shared: Shared = Arc::default();
        let (tx, rx) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let state = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("testkit-mcp-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let Ok(http) = tokio::net::TcpListener::from_std(http) else {
                        return;
                    };
                    let accept = async {
                        while let Ok((socket, _)) = listener.accept().await {
                            lock(&state).connections += 1;
                            tokio::spawn(serve(socket, Arc::clone(&state)));
                        }
                    };
                    let app = axum::Router::new()
                        .route("/mcp", axum::routing::any(serve_http))
                        .with_state(Arc::clone(&state));
                    tokio::select! {
                        _ = accept => {}
                        _ = axum::serve(http, app) => {}
                        _ = rx => {}
                    }
                });
                // Dropping the runtime closes every connection.
            })?;
        Ok(McpFaultServer {
            addr,
            http_addr,
            shared,
            shutdown: Some(tx),
        })
    }

    /// Adds a tool: its `tools/list` entry as given (any JSON, broken on
    /// purpose if wanted) and what calling it by its `name` does.
    pub fn add_tool(&self, listing: Value, behavior: Behavior) {
        let mut s = lock(&self.shared);
        if let Some(name) = listing.get("name").and_then(Value::as_str) {
            s.behaviors.insert(name.to_owned(), behavior);
        }
        s.tools.push(listing);
    }

    /// Changes how the handshake is answered from now on.
    pub fn set_startup(&self, startup: Startup) {
        lock(&self.shared).startup = Some(startup);
    }

    /// The program and arguments of a stdio server that is this script:
    /// `bash` relaying its stdin and stdout to a new connection. Both relay
    /// processes are named [`McpFaultServer::process_marker`].
    pub fn stdio_command(&self) -> (String, Vec<String>) {
        let port = self.addr.port();
        let name = self.process_marker();
        (
            "bash".to_owned(),
            vec![
                "-c".to_owned(),
                // Two copies, one each way; the relay ends when either does:
                // the script hung up, or the client closed stdin (after all
                // it wrote went on, so a last notification is not lost to
                // the kill that follows a server's slow exit).
                format!(
                    "exec 3<>/dev/tcp/127.0.0.1/{port} 4<&0; (exec -a {name} cat <&4 >&3) & (exec -a {name} cat <&3 4<&-) & exec 4<&-; wait -n"
                ),
            ],
        )
    }

    /// The same script as a streamable HTTP endpoint (JSON answers, no
    /// sessions, no SSE).
    pub fn http_url(&self) -> String {
        format!("http://{}/mcp", self.http_addr)
    }

    /// What the command line of every process of this server's relay
    /// holds, to check that none outlived its client.
    pub fn process_marker(&self) -> String {
        format!("testkit-mcp-relay-{}", self.addr.port())
    }

    /// Every message received so far, in order, over all connections.
    pub fn received(&self) -> Vec<Value> {
        lock(&self.shared).received.clone()
    }

    /// The received messages with this `method`.
    pub fn received_method(&self, method: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|m| m.get("method").and_then(Value::as_str) == Some(method))
            .collect()
    }

    /// The headers of every HTTP request, names in lowercase.
    pub fn http_headers(&self) -> Vec<BTreeMap<String, String>> {
        lock(&self.shared).http_headers.clone()
    }

    /// How many connections (process starts) there were.
    pub fn connections(&self) -> usize {
        lock(&self.shared).connections
    }
}

impl Drop for McpFaultServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// One connection: read a line, answer it, until either side hangs up.
async fn serve(socket: tokio::net::TcpStream, shared: Shared) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let bytes = match answer(&message, &shared) {
            Reply::Ack | Reply::Never => continue,
            Reply::Bytes(bytes) => bytes,
            Reply::HangUp(bytes) => {
                let _ = write.write_all(&bytes).await;
                let _ = write.flush().await;
                return;
            }
        };
        if write.write_all(&bytes).await.is_err() || write.flush().await.is_err() {
            return;
        }
    }
}

/// The same script over streamable HTTP: each POST is one message, each
/// answer a JSON body; a hang-up aborts the response mid-body.
async fn serve_http(
    axum::extract::State(shared): axum::extract::State<Shared>,
    method: axum::http::Method,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    lock(&shared).http_headers.push(
        headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
    );
    if method != axum::http::Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let json =
        |bytes: Vec<u8>| ([(header::CONTENT_TYPE, "application/json")], bytes).into_response();
    match answer(&message, &shared) {
        Reply::Ack => StatusCode::ACCEPTED.into_response(),
        Reply::Never => std::future::pending().await,
        Reply::Bytes(bytes) => json(bytes),
        Reply::HangUp(bytes) => {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                vec![Ok(bytes), Err(std::io::Error::other("hung up"))];
            (
                [(header::CONTENT_TYPE, "application/json")],
                axum::body::Body::from_stream(futures::stream::iter(chunks)),
            )
                .into_response()
        }
    }
}

/// What the script answers to one message (and records it).
fn answer(message: &Value, shared: &Shared) -> Reply {
    lock(shared).received.push(message.clone());
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let Some(id) = message.get("id").cloned() else {
        return Reply::Ack; // a notification (cancelled, initialized): recorded only
    };
    let startup = lock(shared).startup.unwrap_or(Startup::Normal);
    let outcome = match (method, startup) {
        ("initialize" | "server/discover", Startup::Die) => return Reply::HangUp(Vec::new()),
        ("initialize" | "server/discover", Startup::Hang) => return Reply::Never,
        ("initialize" | "server/discover", Startup::Garbage) => {
            return Reply::Bytes(b"Server ready! Listening on stdio...\n".to_vec());
        }
        ("initialize", Startup::Normal) => Ok(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "testkit-faults", "version": "1.0.0"}
        })),
        ("ping", _) => Ok(json!({})),
        ("tools/list", _) => Ok(json!({"tools": lock(shared).tools.clone()})),
        ("tools/call", _) => match call(message, shared) {
            Call::Result(r) => Ok(r),
            Call::Error(code, m) => Err((code, m)),
            Call::Reply(reply) => return reply,
        },
        _ => Err((-32601, format!("method not found: {method}"))),
    };
    Reply::Bytes(line_of(&match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    }))
}

/// What goes back on the wire.
enum Reply {
    /// Nothing: the message was a notification.
    Ack,
    /// These bytes.
    Bytes(Vec<u8>),
    /// These bytes, then the connection closes.
    HangUp(Vec<u8>),
    /// Nothing, ever.
    Never,
}

/// What a tool call does.
enum Call {
    Result(Value),
    Error(i64, String),
    Reply(Reply),
}

fn line_of(value: &Value) -> Vec<u8> {
    let mut bytes = value.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

fn call(message: &Value, shared: &Shared) -> Call {
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let behavior = lock(shared).behaviors.get(name).cloned();
    match behavior {
        None => Call::Error(-32602, format!("unknown tool: {name}")),
        Some(Behavior::Echo) => {
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            Call::Result(json!({"content": [{"type": "text", "text": args.to_string()}]}))
        }
        Some(Behavior::Die) => Call::Reply(Reply::HangUp(br#"{"jsonrpc":"2.0","id":"#.to_vec())),
        Some(Behavior::Hang) => Call::Reply(Reply::Never),
        Some(Behavior::Garbage) => {
            Call::Reply(Reply::Bytes(b"<html>502 Bad Gateway</html>\n".to_vec()))
        }
        Some(Behavior::Huge(bytes)) => {
            // Whole copies then a cut, not a char at a time: 50 MB collected
            // char by char was 60% of a test's CPU in a debug build.
            let mut text = "0123456789".repeat(bytes.div_ceil(10));
            text.truncate(bytes);
            Call::Result(json!({"content": [{"type": "text", "text": text}]}))
        }
        Some(Behavior::BadResult) => Call::Result(json!({"content": "not a list"})),
    }
}
