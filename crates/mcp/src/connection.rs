//! One live connection to a server, over stdio or streamable HTTP: the
//! handshake (`server/discover` for 2026-07-28 servers, `initialize` for
//! older ones, as rmcp negotiates), the tool listing, and calls that can be
//! timed out or cancelled (`notifications/cancelled` is sent either way).
//!
//! Listing and calling go out as raw requests and their answers are read
//! here, leniently, so that one malformed tool or content item is reported
//! on its own instead of failing the whole answer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientRequest, CustomRequest,
    ErrorCode, Implementation, ProtocolVersion, RequestId,
};
use rmcp::service::ClientInitializeError;
use rmcp::service::{Peer, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use whittle_tools::CancellationToken;

use crate::catalog::{Catalog, read_tools};
use crate::config::{ServerConfig, Transport};
use crate::error::{CallError, StartError};
use crate::health::Health;
use crate::stdio::{self, MAX_MESSAGE_BYTES};
use crate::template::{Env, EnvLookup, Template};

/// Most pages of a tool listing followed: a server that hands out cursors
/// forever is cut off.
const MAX_LIST_PAGES: usize = 100;

/// What starting a server needs besides its own config.
pub struct StartOptions {
    /// The workspace: a stdio server's default folder.
    pub workspace: std::path::PathBuf,
    /// Where stdio servers' stderr logs go (`.whittle/mcp`); `None` drops them.
    pub log_dir: Option<std::path::PathBuf>,
    /// whittle's environment, for `${VAR}` and the variables passed on.
    pub env: Box<Env>,
}

impl StartOptions {
    /// Options whose environment is a copy of just the variables the
    /// servers can use: those passed on to every stdio server and those
    /// the configs' `${VAR}`s name. Nothing else of `lookup` is kept.
    pub fn snapshot(
        workspace: std::path::PathBuf,
        log_dir: Option<std::path::PathBuf>,
        configs: &[ServerConfig],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> StartOptions {
        let mut names: Vec<String> = stdio::inherited_env(lookup)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        for c in configs {
            let templates = match &c.transport {
                Transport::Stdio { env, .. } => env,
                Transport::Http { headers, .. } => headers,
            };
            names.extend(
                templates
                    .values()
                    .flat_map(|t| t.variables().map(str::to_owned)),
            );
        }
        let values: HashMap<String, String> = names
            .into_iter()
            .filter_map(|k| lookup(&k).map(|v| (k, v)))
            .collect();
        StartOptions {
            workspace,
            log_dir,
            env: Box::new(move |k| values.get(k).cloned()),
        }
    }
}

impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions")
            .field("workspace", &self.workspace)
            .field("log_dir", &self.log_dir)
            .finish_non_exhaustive()
    }
}

/// The client side of the protocol: whittle asks for tools and calls them;
/// it offers the server nothing (no sampling, roots or elicitation).
#[derive(Clone, Debug)]
struct Client {
    info: ClientConfig,
}

impl rmcp::ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

fn client() -> Client {
    let mut info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("whittle", env!("CARGO_PKG_VERSION")),
    );
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    Client { info }
}

/// The revisions offered, newest first; rmcp falls back to `initialize`
/// with 2025-11-25 for a server that does not know `server/discover`.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// A started server.
pub struct Connection {
    server: String,
    service: RunningService<RoleClient, Client>,
    health: Arc<Health>,
    /// Cancellations of dropped calls not sent yet.
    pending_cancels: Arc<AtomicUsize>,
    // Dropped after `service`: the process group dies last.
    _child: Option<stdio::Child>,
}

impl Connection {
    /// Starts or reaches the server and completes the handshake. No
    /// timeout here: the caller bounds the whole start.
    ///
    /// The handshake is rmcp's: `server/discover` first, `initialize` when
    /// the server answers that it does not know it. A server that answers
    /// the probe with something else (some answer every method with an
    /// empty result) gets a second, fresh connection that starts with
    /// `initialize` right away.
    pub async fn open(
        config: &ServerConfig,
        options: &StartOptions,
    ) -> Result<Connection, StartError> {
        match Self::attempt(config, options, lifecycle()).await {
            Err(Attempt::Confused(_)) => {
                Self::attempt(config, options, ClientLifecycleMode::Initialize)
                    .await
                    .map_err(Attempt::into_error)
            }
            other => other.map_err(Attempt::into_error),
        }
    }

    async fn attempt(
        config: &ServerConfig,
        options: &StartOptions,
        mode: ClientLifecycleMode,
    ) -> Result<Connection, Attempt> {
        let server = config.name.to_string();
        let health = Arc::new(Health::default());
        let env: EnvLookup<'_> = &*options.env;
        let handshake = match &config.transport {
            Transport::Stdio {
                command,
                args,
                env: vars,
                cwd,
            } => {
                let workdir = cwd
                    .as_ref()
                    .map(|c| options.workspace.join(c))
                    .unwrap_or_else(|| options.workspace.clone());
                let launch = stdio::Launch {
                    server: &server,
                    command,
                    args,
                    inherited: stdio::inherited_env(env),
                    env: expand_all(&server, "env", vars, env).map_err(Attempt::Failed)?,
                    cwd: &workdir,
                    log_dir: options.log_dir.as_deref(),
                };
                let (child, transport) = stdio::spawn(&launch, &health).map_err(|e| {
                    Attempt::Failed(StartError::Spawn {
                        server: server.clone(),
                        command: command.clone(),
                        message: spawn_message(&e, command, &workdir),
                    })
                })?;
                (
                    client().serve_with_lifecycle(transport, mode).await,
                    Some(child),
                )
            }
            Transport::Http { url, headers } => {
                let transport =
                    http_transport(&server, url, headers, env).map_err(Attempt::Failed)?;
                (client().serve_with_lifecycle(transport, mode).await, None)
            }
        };
        match handshake {
            (Ok(service), child) => Ok(Connection {
                server,
                service,
                health,
                pending_cancels: Arc::default(),
                _child: child,
            }),
            (Err(e), child) => {
                let confused = matches!(
                    e,
                    ClientInitializeError::ExpectedInitResult(_)
                        | ClientInitializeError::ExpectedInitResponse(_)
                        | ClientInitializeError::UncorrelatedErrorResponse { .. }
                        | ClientInitializeError::ConflictInitResponseId(..)
                );
                health.settle().await;
                drop(child);
                let said = match &e {
                    ClientInitializeError::TransportError { error, context } => {
                        format!("{} ({context})", transport_text(error))
                    }
                    other => error_line(&other.to_string()),
                };
                let error = StartError::Protocol {
                    message: format!("the handshake failed: {}", health.reason(&said)),
                    server,
                };
                Err(if confused {
                    Attempt::Confused(error)
                } else {
                    Attempt::Failed(error)
                })
            }
        }
    }

    /// The negotiated protocol revision and the server's own name and version.
    pub fn describe_peer(&self) -> String {
        match self.service.peer().peer_info() {
            Some(info) => {
                let who = info
                    .server_info
                    .as_ref()
                    .map(|i| format!("{} {}, ", i.name, i.version))
                    .unwrap_or_default();
                format!("{who}protocol {}", info.protocol_version.as_str())
            }
            None => "protocol unknown".to_owned(),
        }
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Why the connection ended, in one line.
    pub async fn failure(&self) -> String {
        self.health.settle().await;
        self.health.reason("the connection closed")
    }

    /// Every page of `tools/list`, read tool by tool.
    pub async fn list_tools(&self) -> Result<Catalog, StartError> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let page = match self.request("tools/list", params, None, None).await {
                Ok(page) => page,
                // A server without tools may not know the method at all.
                Err(Failure::Refused(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => break,
                Err(f) => {
                    return Err(StartError::Protocol {
                        message: format!("listing its tools failed: {}", self.explain(f).await),
                        server: self.server.clone(),
                    });
                }
            };
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            pages.push(page);
            if cursor.is_none() {
                break;
            }
        }
        let name =
            crate::config::ServerName::new(&self.server).map_err(|e| StartError::Protocol {
                server: self.server.clone(),
                message: e.to_string(),
            })?;
        let mut catalog = read_tools(&name, &pages);
        if cursor.is_some() {
            catalog.problems.push(format!(
                "mcp server {}: its tool list goes on past {MAX_LIST_PAGES} pages; the rest is not used",
                self.server
            ));
        }
        Ok(catalog)
    }

    /// Calls a tool; the answer is the raw result, for [`crate::result`].
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let params = json!({"name": tool, "arguments": arguments});
        match self
            .request("tools/call", Some(params), Some(timeout), Some(cancel))
            .await
        {
            Ok(v) => Ok(v),
            Err(Failure::Timeout) => Err(CallError::Timeout {
                server: self.server.clone(),
                seconds: timeout.as_secs().max(1),
            }),
            Err(Failure::Cancelled) => Err(CallError::Cancelled {
                server: self.server.clone(),
            }),
            Err(Failure::Refused(e)) => Err(CallError::Refused {
                server: self.server.clone(),
                message: error_data(&e),
            }),
            Err(Failure::Transport(t)) if !self.is_closed() => Err(CallError::Transport {
                server: self.server.clone(),
                reason: t,
            }),
            Err(f @ (Failure::Closed | Failure::Transport(_))) => Err(CallError::Died {
                server: self.server.clone(),
                reason: self.explain(f).await,
            }),
            Err(Failure::Unexpected) => Err(CallError::BadAnswer {
                server: self.server.clone(),
                message: "rmcp could not read it".into(),
            }),
        }
    }

    /// Sends one request and waits for its answer, its deadline or `cancel`.
    /// Whenever the wait ends without an answer (deadline, cancel, or this
    /// future being dropped), the server is told with `notifications/cancelled`.
    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Value, Failure> {
        let peer = self.service.peer();
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, params));
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(Failure::from)?;
        let mut guard = CancelOnDrop::new(
            peer.clone(),
            handle.id.clone(),
            Arc::clone(&self.pending_cancels),
        );
        let answer = handle.rx;
        let deadline = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = answer => {
                guard.disarm();
                match answer {
                    Ok(Ok(result)) => serde_json::to_value(&result).map_err(|_| Failure::Unexpected),
                    Ok(Err(e)) => Err(Failure::from(e)),
                    Err(_) => Err(Failure::Closed),
                }
            }
            _ = deadline => {
                guard.send("timed out (tool_timeout_s)").await;
                Err(Failure::Timeout)
            }
            _ = cancelled => {
                guard.send("cancelled by the user").await;
                Err(Failure::Cancelled)
            }
        }
    }

    /// Ends the connection as the protocol asks: the cancellations of
    /// dropped calls go out first, then a stdio server's stdin is closed and
    /// it gets a moment to exit (and to read what it was sent) before the
    /// process group is killed when the connection is dropped.
    pub async fn shutdown(&self) {
        wait_until(CANCEL_NOTICE_TIMEOUT, || {
            self.pending_cancels.load(Ordering::SeqCst) == 0
        })
        .await;
        self.service.cancellation_token().cancel();
        if self._child.is_some() {
            wait_until(STDIO_EXIT_GRACE, || self.health.exited()).await;
        }
    }

    async fn explain(&self, failure: Failure) -> String {
        match failure {
            Failure::Refused(e) => error_data(&e),
            Failure::Transport(t) => {
                self.health.settle().await;
                self.health.reason(&t)
            }
            Failure::Closed => self.failure().await,
            Failure::Timeout => "no answer in time".into(),
            Failure::Cancelled => "cancelled".into(),
            Failure::Unexpected => "an answer rmcp could not read".into(),
        }
    }
}

/// How one handshake failed.
enum Attempt {
    /// The server answered the `server/discover` probe with something that
    /// is neither a discovery nor an error: worth one try with `initialize`.
    Confused(StartError),
    /// Anything else.
    Failed(StartError),
}

impl Attempt {
    fn into_error(self) -> StartError {
        match self {
            Attempt::Confused(e) | Attempt::Failed(e) => e,
        }
    }
}

/// How one request failed, before it is told in terms of the call.
enum Failure {
    Refused(rmcp::ErrorData),
    Transport(String),
    Closed,
    Timeout,
    Cancelled,
    Unexpected,
}

impl From<ServiceError> for Failure {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::McpError(data) => Failure::Refused(data),
            ServiceError::TransportClosed => Failure::Closed,
            ServiceError::TransportSend(t) => Failure::Transport(transport_text(&t)),
            ServiceError::Timeout { .. } => Failure::Timeout,
            ServiceError::Cancelled { .. } => Failure::Cancelled,
            _ => Failure::Unexpected,
        }
    }
}

/// Polls `done` until it holds or `limit` has passed.
async fn wait_until(limit: Duration, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How long a stdio server has to exit once its stdin is closed.
const STDIO_EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long telling a server to cancel may take: a server that does not
/// read its input must not hold up the turn. One second was seen to be too
/// short on a loaded 2-core machine, where the notice then never went out.
const CANCEL_NOTICE_TIMEOUT: Duration = Duration::from_secs(3);

/// Tells the server a request is abandoned unless disarmed. A call that
/// ends by deadline or cancellation sends it before returning; a call that
/// is dropped (the agent stopped waiting for it) sends it from a task of
/// its own, counted in `pending` so that stopping the server waits for it.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
    pending: Arc<AtomicUsize>,
}

impl CancelOnDrop {
    fn new(peer: Peer<RoleClient>, id: RequestId, pending: Arc<AtomicUsize>) -> Self {
        CancelOnDrop {
            peer: Some(peer),
            id,
            pending,
        }
    }

    fn disarm(&mut self) {
        self.peer = None;
    }

    fn notice(&self, reason: &str) -> CancelledNotificationParam {
        CancelledNotificationParam::new(Some(self.id.clone()), Some(reason.to_owned()))
    }

    /// Sends the notification now.
    async fn send(mut self, reason: &str) {
        let params = self.notice(reason);
        if let Some(peer) = self.peer.take() {
            let _ =
                tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, peer.notify_cancelled(params)).await;
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let params = self.notice("abandoned by the client");
        let Some(peer) = self.peer.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let pending = Arc::clone(&self.pending);
            pending.fetch_add(1, Ordering::SeqCst);
            runtime.spawn(async move {
                let _ = tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, peer.notify_cancelled(params))
                    .await;
                pending.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }
}

/// A transport error without rmcp's Rust type names: its own text and,
/// when there is one, its innermost cause ("connection reset by peer").
fn transport_text(e: &rmcp::transport::DynamicTransportError) -> String {
    let own = e.error.to_string();
    let mut inner: Option<String> = None;
    let mut source = e.error.source();
    while let Some(s) = source {
        inner = Some(s.to_string());
        source = s.source();
    }
    match inner {
        Some(cause) if !own.contains(&cause) => error_line(&format!("{own}: {cause}")),
        _ => error_line(&own),
    }
}

fn error_data(e: &rmcp::ErrorData) -> String {
    format!("{} (JSON-RPC error {})", error_line(&e.message), e.code.0)
}

fn error_line(text: &str) -> String {
    whittle_protocol::quote_line(text.trim(), 300)
}

fn spawn_message(e: &std::io::Error, command: &str, cwd: &Path) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound if !cwd.is_dir() => {
            format!("its folder {} does not exist", cwd.display())
        }
        std::io::ErrorKind::NotFound => {
            format!("no program `{command}` on PATH (is it installed?)")
        }
        _ => e.to_string(),
    }
}

fn expand_all(
    server: &str,
    table: &str,
    values: &std::collections::BTreeMap<String, Template>,
    env: EnvLookup<'_>,
) -> Result<Vec<(String, String)>, StartError> {
    values
        .iter()
        .map(|(k, t)| {
            t.expand(env)
                .map(|v| (k.clone(), v.expose().to_owned()))
                .map_err(|unset| StartError::MissingVariable {
                    server: server.to_owned(),
                    key: format!("{table}.{k}"),
                    variable: unset.0,
                })
        })
        .collect()
}

/// The HTTP transport with the configured headers (values marked sensitive,
/// so no debug output shows them) and limits that let a large result through.
fn http_transport(
    server: &str,
    url: &str,
    headers: &std::collections::BTreeMap<String, Template>,
    env: EnvLookup<'_>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, StartError> {
    let bad = |message: String| StartError::Protocol {
        server: server.to_owned(),
        message,
    };
    let mut custom = HashMap::new();
    for (name, template) in headers {
        let value = template
            .expand(env)
            .map_err(|unset| StartError::MissingVariable {
                server: server.to_owned(),
                key: format!("headers.{name}"),
                variable: unset.0,
            })?;
        let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad(format!("headers: {name:?} is not a valid header name")))?;
        let mut value = reqwest::header::HeaderValue::from_str(value.expose()).map_err(|_| {
            bad(format!(
                "headers.{name}: the value is not a valid header value"
            ))
        })?;
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    let client = whittle_llm::http_client_builder(url)
        .build()
        .map_err(|e| bad(format!("cannot set up the HTTP client: {e}")))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_sse_event_size(MAX_MESSAGE_BYTES)
        .max_json_response_size(MAX_MESSAGE_BYTES);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_snapshot_keeps_only_what_servers_may_use() {
        let entry = crate::config::ServerEntry {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: [("Authorization".to_owned(), "Bearer ${WEB_TOKEN}".to_owned())].into(),
            ..Default::default()
        };
        let config = ServerConfig::from_entry("web", &entry).unwrap().unwrap();
        let lookup = |k: &str| match k {
            "PATH" | "WEB_TOKEN" | "ANTHROPIC_API_KEY" | "GITHUB_TOKEN" => Some(format!("<{k}>")),
            _ => None,
        };
        let options = StartOptions::snapshot("/w".into(), None, &[config], &lookup);
        assert_eq!((options.env)("PATH").as_deref(), Some("<PATH>"));
        assert_eq!((options.env)("WEB_TOKEN").as_deref(), Some("<WEB_TOKEN>"));
        assert_eq!((options.env)("ANTHROPIC_API_KEY"), None);
        assert_eq!((options.env)("GITHUB_TOKEN"), None);
        assert!(!format!("{options:?}").contains('<'));
    }

    #[test]
    fn long_errors_become_one_bounded_line() {
        let e = error_line(&format!("a\nb {}", "x".repeat(1000)));
        assert!(e.starts_with("a b x") && e.chars().count() == 301);
    }
}
