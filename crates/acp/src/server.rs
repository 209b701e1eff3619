//! The ACP agent: the connection's handlers, one per method, and the
//! sessions they serve. Long work (opening a session, a turn) runs outside
//! the SDK's dispatch loop, so `session/cancel` and the answers to
//! permission questions are read while a turn runs.

use crate::client_files::ClientFiles;
use crate::commands::{available_commands, parse_command};
use crate::error::AcpError;
use crate::host::{ClientMcpServer, Host, HostSession, ModelMenu, OpenRequest};
use crate::models::{MODEL_OPTION, model_option};
use crate::modes::{mode_id, mode_of, mode_state};
use crate::permission::AcpApprover;
use crate::replay::replay_updates;
use crate::session_shared::SessionShared;
use crate::updates::{UpdateSink, text_chunk};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommandsUpdate, CancelNotification, ContentBlock,
    CurrentModeUpdate, EmbeddedResourceResource, FileSystemCapabilities, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, SessionCapabilities,
    SessionId, SessionInfo, SessionListCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, Client, ConnectTo, on_receive_notification, on_receive_request,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use whittle_agent::TurnOutcome;

/// One open session.
struct Slot {
    shared: Arc<SessionShared>,
    session: tokio::sync::Mutex<Option<Box<dyn HostSession>>>,
    window: u64,
}

/// The connection's sessions, by id.
struct State {
    host: Arc<dyn Host>,
    /// What the client said of its files in `initialize`.
    client_fs: Mutex<FileSystemCapabilities>,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
}

impl State {
    fn slot(&self, id: &SessionId) -> Option<Arc<Slot>> {
        self.sessions.lock().ok()?.get(&*id.0).cloned()
    }

    fn all(&self) -> Vec<Arc<Slot>> {
        self.sessions
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

fn unknown_session(id: &SessionId) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(serde_json::json!(format!(
        "no session {} (call session/new first)",
        id.0
    )))
}

fn internal(message: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(serde_json::json!(message.to_string()))
}

/// The client's servers, as the host starts them.
fn client_servers(servers: Vec<McpServer>) -> Vec<ClientMcpServer> {
    servers
        .into_iter()
        .filter_map(|s| match s {
            McpServer::Stdio(s) => Some(ClientMcpServer::Stdio {
                name: s.name,
                command: s.command,
                args: s.args,
                env: s.env.into_iter().map(|e| (e.name, e.value)).collect(),
            }),
            McpServer::Http(s) => Some(ClientMcpServer::Http {
                name: s.name,
                url: s.url,
                headers: s.headers.into_iter().map(|h| (h.name, h.value)).collect(),
            }),
            _ => None,
        })
        .collect()
}

/// The prompt as the text the agent reads: text as is, resources the
/// editor attached inline with their URI, links by URI.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => parts.push(format!("@{}", l.uri)),
            ContentBlock::Image(i) if i.data.is_empty() => {
                if let Some(uri) = &i.uri {
                    parts.push(format!("@{uri}"));
                }
            }
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    parts.push(format!(
                        "<resource uri=\"{}\">\n{}\n</resource>",
                        t.uri, t.text
                    ));
                }
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    parts.push(format!("@{}", b.uri));
                }
                _ => {}
            },
            _ => {}
        }
    }
    parts.join("\n")
}

/// What opening a session tells the client.
struct Opened {
    id: SessionId,
    mode: whittle_tools::PermissionMode,
    models: ModelMenu,
}

/// The pictures in the prompt (a pasted screenshot), as the model takes
/// them: inline data with its media type; a picture given only by URI is
/// named in the text instead (see [`prompt_text`]).
fn prompt_images(blocks: &[ContentBlock]) -> Vec<whittle_protocol::Image> {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image(i) if !i.data.is_empty() => Some(whittle_protocol::Image {
                source: serde_json::json!({
                    "type": "base64",
                    "media_type": i.mime_type,
                    "data": i.data,
                }),
                extra: Default::default(),
            }),
            _ => None,
        })
        .collect()
}

/// Opens a session (new or loaded), registers it and answers.
async fn open_session(
    state: Arc<State>,
    cx: ConnectionTo<Client>,
    cwd: PathBuf,
    servers: Vec<McpServer>,
    resume: Option<SessionId>,
) -> Result<Opened, agent_client_protocol::Error> {
    if !cwd.is_absolute() {
        return Err(agent_client_protocol::Error::invalid_params()
            .data(serde_json::json!("cwd must be an absolute path")));
    }
    let shared = Arc::new(SessionShared::new(cx.clone(), cwd.clone()));
    let request = OpenRequest {
        cwd,
        mcp_servers: client_servers(servers),
        resume: resume.map(|id| id.0.to_string()),
    };
    let approver = Box::new(AcpApprover::new(shared.clone()));
    let mut session = state.host.open(request, approver).await.map_err(internal)?;
    let mode = session.mode();
    let models = session.models();
    let agent = session.agent();
    let client_fs = state
        .client_fs
        .lock()
        .map(|fs| fs.clone())
        .unwrap_or_default();
    if let Some(files) = ClientFiles::offered(shared.clone(), &client_fs) {
        agent.set_editor_files(Arc::new(files));
    }
    let id = SessionId::new(agent.session_id().unwrap_or_default());
    shared.set_id(id.clone());
    let window = agent.config().context_window;
    let replay = if agent.history().is_empty() {
        Vec::new()
    } else {
        replay_updates(&shared.workspace, agent.history().messages())
    };
    for update in replay {
        shared.notify(update);
    }
    let slot = Arc::new(Slot {
        shared,
        session: tokio::sync::Mutex::new(Some(session)),
        window,
    });
    if let Ok(mut map) = state.sessions.lock() {
        map.insert(id.0.to_string(), slot);
    }
    Ok(Opened { id, mode, models })
}

/// After the answer to `session/new` or `session/load`: the commands.
fn announce_commands(cx: &ConnectionTo<Client>, id: &SessionId) {
    let update =
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available_commands()));
    let _ = cx.send_notification(agent_client_protocol::v1::schema::SessionNotification::new(
        id.clone(),
        update,
    ));
}

/// Runs one prompt (a turn or a slash command) to its stop reason.
async fn run_prompt(
    slot: Arc<Slot>,
    text: String,
    images: Vec<whittle_protocol::Image>,
) -> Result<StopReason, agent_client_protocol::Error> {
    let cancel = slot.shared.renew_cancel();
    let mut guard = slot.session.lock().await;
    let Some(session) = guard.as_mut() else {
        return Err(internal("the session was closed"));
    };
    let mut sink = UpdateSink::new(slot.shared.clone(), slot.window);
    if let Some((name, arg)) = parse_command(&text) {
        let shown = session
            .command(name, arg.as_deref(), &mut sink, &cancel)
            .await;
        let shown = shown.unwrap_or_else(|e| format!("/{name}: {e}"));
        slot.shared
            .notify(SessionUpdate::AgentMessageChunk(text_chunk(shown)));
        return Ok(if cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        });
    }
    let outcome = session
        .agent()
        .run_turn_with_images(&text, images, &mut sink, &cancel)
        .await;
    match outcome {
        Ok(TurnOutcome::Done { .. }) => Ok(StopReason::EndTurn),
        Ok(TurnOutcome::Cancelled) => Ok(StopReason::Cancelled),
        Ok(TurnOutcome::MaxTurns) => Ok(StopReason::MaxTurnRequests),
        Ok(TurnOutcome::Blocked { reason }) => {
            slot.shared
                .notify(SessionUpdate::AgentMessageChunk(text_chunk(format!(
                    "a UserPromptSubmit hook refused the prompt: {reason}"
                ))));
            Ok(StopReason::Refusal)
        }
        Err(_) if cancel.is_cancelled() => Ok(StopReason::Cancelled),
        Err(e) => Err(internal(e)),
    }
}

/// Serves one client over `transport` until it disconnects; then every
/// running turn is cancelled and every session closed (its MCP servers
/// stopped, its processes killed).
pub async fn serve(
    host: Arc<dyn Host>,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), AcpError> {
    let state = Arc::new(State {
        host,
        client_fs: Mutex::new(FileSystemCapabilities::default()),
        sessions: Mutex::new(HashMap::new()),
    });
    let served = connection(state.clone()).connect_to(transport).await;
    for slot in state.all() {
        slot.shared.cancel();
    }
    let slots: Vec<Arc<Slot>> = state
        .sessions
        .lock()
        .map(|mut m| m.drain().map(|(_, s)| s).collect())
        .unwrap_or_default();
    for slot in slots {
        let session = slot.session.lock().await.take();
        if let Some(session) = session {
            session.close().await;
        }
    }
    served.map_err(|e| AcpError::Connection(e.to_string()))
}

/// Serves the client on stdin/stdout.
pub async fn serve_stdio(host: Arc<dyn Host>) -> Result<(), AcpError> {
    serve(host, agent_client_protocol::Stdio::new()).await
}

fn connection(
    state: Arc<State>,
) -> agent_client_protocol::v1::Builder<Agent, impl agent_client_protocol::HandleDispatchFrom<Client>>
{
    let (s_init, s_new, s_load, s_prompt, s_mode, s_config, s_list, s_cancel) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state,
    );
    Agent
        .v1()
        .name("whittle")
        .on_receive_request(
            async move |init: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                let version = init.protocol_version.min(ProtocolVersion::V1);
                if let Ok(mut fs) = s_init.client_fs.lock() {
                    *fs = init.client_capabilities.fs.clone();
                }
                let capabilities = AgentCapabilities::new()
                    .load_session(true)
                    .session_capabilities(
                        SessionCapabilities::new().list(SessionListCapabilities::new()),
                    )
                    .prompt_capabilities(
                        PromptCapabilities::new().embedded_context(true).image(true),
                    )
                    .mcp_capabilities(McpCapabilities::new().http(true));
                responder.respond(
                    InitializeResponse::new(version)
                        .agent_capabilities(capabilities)
                        .agent_info(
                            Implementation::new("whittle", env!("CARGO_PKG_VERSION"))
                                .title("whittle"),
                        ),
                )
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s_new.clone();
                let task_cx = cx.clone();
                cx.spawn(async move {
                    match open_session(state, task_cx.clone(), req.cwd, req.mcp_servers, None).await
                    {
                        Ok(opened) => {
                            responder.respond(
                                NewSessionResponse::new(opened.id.clone())
                                    .modes(mode_state(opened.mode))
                                    .config_options(vec![model_option(&opened.models)]),
                            )?;
                            announce_commands(&task_cx, &opened.id);
                            Ok(())
                        }
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s_load.clone();
                let task_cx = cx.clone();
                cx.spawn(async move {
                    let wanted = req.session_id.clone();
                    match open_session(
                        state,
                        task_cx.clone(),
                        req.cwd,
                        req.mcp_servers,
                        Some(wanted),
                    )
                    .await
                    {
                        Ok(opened) => {
                            responder.respond(
                                LoadSessionResponse::new()
                                    .modes(mode_state(opened.mode))
                                    .config_options(vec![model_option(&opened.models)]),
                            )?;
                            announce_commands(&task_cx, &opened.id);
                            Ok(())
                        }
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let Some(slot) = s_prompt.slot(&req.session_id) else {
                    return responder.respond_with_error(unknown_session(&req.session_id));
                };
                let text = prompt_text(&req.prompt);
                let images = prompt_images(&req.prompt);
                cx.spawn(async move {
                    // The turn runs on the runtime's workers: a summary may
                    // block its thread, and the connection must go on.
                    let turn = tokio::spawn(run_prompt(slot, text, images));
                    match turn.await {
                        Ok(Ok(stop)) => responder.respond(PromptResponse::new(stop)),
                        Ok(Err(e)) => responder.respond_with_error(e),
                        Err(e) => responder.respond_with_error(internal(e)),
                    }
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        cx: ConnectionTo<Client>| {
                let Some(slot) = s_mode.slot(&req.session_id) else {
                    return responder.respond_with_error(unknown_session(&req.session_id));
                };
                let Some(mode) = mode_of(&req.mode_id) else {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(serde_json::json!(format!("unknown mode {}", req.mode_id.0))),
                    );
                };
                cx.spawn(async move {
                    let mut guard = slot.session.lock().await;
                    let Some(session) = guard.as_mut() else {
                        return responder.respond_with_error(internal("the session was closed"));
                    };
                    match session.set_mode(mode) {
                        Ok(()) => {
                            // Told before the answer, so a client sees the
                            // new mode by the time set_mode returns.
                            slot.shared.notify(SessionUpdate::CurrentModeUpdate(
                                CurrentModeUpdate::new(mode_id(mode)),
                            ));
                            responder.respond(SetSessionModeResponse::new())
                        }
                        Err(e) => responder.respond_with_error(internal(e)),
                    }
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        cx: ConnectionTo<Client>| {
                let Some(slot) = s_config.slot(&req.session_id) else {
                    return responder.respond_with_error(unknown_session(&req.session_id));
                };
                let wanted = match (&*req.config_id.0, req.value.as_value_id()) {
                    (MODEL_OPTION, Some(value)) => value.0.to_string(),
                    _ => {
                        return responder.respond_with_error(
                            agent_client_protocol::Error::invalid_params().data(serde_json::json!(
                                format!(
                                    "unknown option {} (whittle offers `{MODEL_OPTION}`)",
                                    req.config_id.0
                                )
                            )),
                        );
                    }
                };
                cx.spawn(async move {
                    // Waits for a running turn: the model changes between calls.
                    let mut guard = slot.session.lock().await;
                    let Some(session) = guard.as_mut() else {
                        return responder.respond_with_error(internal("the session was closed"));
                    };
                    if !session.models().choices.iter().any(|c| c.id == wanted) {
                        return responder.respond_with_error(
                            agent_client_protocol::Error::invalid_params()
                                .data(serde_json::json!(format!("no model {wanted} here"))),
                        );
                    }
                    match session.set_model(&wanted) {
                        Ok(()) => responder.respond(SetSessionConfigOptionResponse::new(vec![
                            model_option(&session.models()),
                        ])),
                        Err(e) => responder.respond_with_error(internal(e)),
                    }
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest,
                        responder: Responder<ListSessionsResponse>,
                        _cx: ConnectionTo<Client>| {
                let cwd = match req.cwd.or_else(|| std::env::current_dir().ok()) {
                    Some(cwd) if cwd.is_absolute() => cwd,
                    _ => {
                        return responder.respond_with_error(
                            agent_client_protocol::Error::invalid_params()
                                .data(serde_json::json!("cwd must be an absolute path")),
                        );
                    }
                };
                let sessions = s_list
                    .host
                    .list_sessions(&cwd)
                    .into_iter()
                    .map(|s| SessionInfo::new(s.id, s.cwd).updated_at(s.updated_at))
                    .collect();
                responder.respond(ListSessionsResponse::new(sessions))
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx: ConnectionTo<Client>| {
                if let Some(slot) = s_cancel.slot(&note.session_id) {
                    slot.shared.cancel();
                }
                Ok(())
            },
            on_receive_notification!(),
        )
}
