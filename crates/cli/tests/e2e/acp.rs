//! `whittle acp` driven by the official Rust SDK's client side: the real
//! binary over stdio, the scripted model server behind it.

use crate::Harness;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities, ImageContent,
    InitializeRequest, ListSessionsRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    ReadTextFileRequest, ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionConfigKind,
    SessionConfigSelectOptions, SessionId, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason, TextContent, ToolCallContent,
    ToolCallStatus, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{
    Agent, ByteStreams, Client, on_receive_notification, on_receive_request,
};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::Reply;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// What the client saw, and how it answers permission questions.
#[derive(Clone, Default)]
struct Seen {
    updates: Arc<Mutex<Vec<SessionUpdate>>>,
    asked: Arc<Mutex<Vec<RequestPermissionRequest>>>,
    answers: Arc<Mutex<VecDeque<&'static str>>>,
    /// The editor's buffers (path to text), served to fs/read_text_file.
    buffers: Arc<Mutex<HashMap<PathBuf, String>>>,
    /// What fs/write_text_file was asked to write, in order.
    writes: Arc<Mutex<Vec<(PathBuf, String)>>>,
}

impl Seen {
    fn answer(&self, ids: &[&'static str]) {
        self.answers.lock().unwrap().extend(ids.iter().copied());
    }

    fn updates(&self) -> Vec<SessionUpdate> {
        self.updates.lock().unwrap().clone()
    }

    fn take(&self) -> Vec<SessionUpdate> {
        std::mem::take(&mut *self.updates.lock().unwrap())
    }
}

fn text(s: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(s))]
}

fn prompt(id: &SessionId, s: &str) -> PromptRequest {
    PromptRequest::new(id.clone(), text(s))
}

/// `whittle acp` in the workspace, with the harness's clean environment
/// (no `--cwd`: the client names the workspace).
fn acp_command(h: &Harness) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    cmd.arg("acp").current_dir(h.ws());
    cmd
}

/// The agent's text, its chunks joined.
fn streamed(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Processes whose command line holds `marker` (this test's own sleeps).
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.contains(marker) && !line.contains("/proc") {
            found.push(line);
        }
    }
    found
}

/// Runs `whittle acp` in the harness and drives it with `script`.
async fn drive<F>(h: &Harness, seen: Seen, script: F)
where
    F: AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), agent_client_protocol::Error>
        + Send
        + 'static,
{
    drive_with_env(h, &[], seen, script).await;
}

/// [`drive`], with variables set for whittle besides the harness's.
async fn drive_with_env<F>(h: &Harness, env: &[(&str, String)], seen: Seen, script: F)
where
    F: AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), agent_client_protocol::Error>
        + Send
        + 'static,
{
    let mut cmd = acp_command(h);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let (updates, asked, answers) = (seen.updates, seen.asked, seen.answers);
    let (buffers, writes) = (seen.buffers, seen.writes);
    Client
        .v1()
        .name("acp-e2e")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                updates.lock().unwrap().push(n.update);
                Ok(())
            },
            on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: RequestPermissionRequest, responder, _cx| {
                asked.lock().unwrap().push(r);
                let id = answers.lock().unwrap().pop_front().unwrap_or("reject-once");
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
                ))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ReadTextFileRequest, responder, _cx| {
                let text = buffers.lock().unwrap().get(&r.path).cloned();
                match text {
                    Some(text) => responder.respond(ReadTextFileResponse::new(text)),
                    None => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(json!("no such buffer")),
                    ),
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: WriteTextFileRequest, responder, _cx| {
                writes.lock().unwrap().push((r.path, r.content));
                responder.respond(WriteTextFileResponse::new())
            },
            on_receive_request!(),
        )
        .connect_with(transport, script)
        .await
        .unwrap();
    // The client is gone: stdin closes and the agent exits by itself.
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("whittle acp exits when its client goes")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waited for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_reads_edits_runs_plans_cancels_loads_and_switches_mode() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "hello world\n").unwrap();
    std::fs::write(ws.join("gone-once.txt"), "").unwrap();
    std::fs::write(ws.join("gone-twice.txt"), "").unwrap();
    let marker = format!("31.{}", std::process::id());
    script_first_turn(&h);
    // Turn 2: a long command, cancelled while it runs.
    h.server.push(Reply::tool_use(
        "s1",
        "bash",
        json!({"command": format!("touch started.txt; sleep {marker}")}),
    ));
    let seen = Seen::default();
    seen.answer(&["allow-once", "allow-once", "reject-once"]);
    let s = seen.clone();
    let ws2 = ws.clone();
    let session: Arc<Mutex<Option<SessionId>>> = Arc::default();
    let session_out = session.clone();
    let marker2 = marker.clone();
    drive(&h, seen.clone(), async move |cx: ConnectionTo<Agent>| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        assert!(init.agent_capabilities.load_session);
        assert!(init.agent_capabilities.mcp_capabilities.http);
        let new = cx
            .send_request(NewSessionRequest::new(ws2.clone()))
            .block_task()
            .await?;
        let id = new.session_id.clone();
        *session_out.lock().unwrap() = Some(id.clone());
        let modes = new.modes.expect("modes");
        assert_eq!(&*modes.current_mode_id.0, "default");
        let done = cx
            .send_request(prompt(&id, "tidy the notes"))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let updates = s.take();
        // The commands came, the text streamed.
        assert!(updates.iter().any(|u| matches!(u,
            SessionUpdate::AvailableCommandsUpdate(c) if c.available_commands.iter().any(|c| c.name == "compact"))));
        assert!(streamed(&updates).contains("All done"), "{updates:?}");
        // The read has its kind and location.
        assert!(updates.iter().any(|u| matches!(u,
            SessionUpdate::ToolCall(t) if &*t.tool_call_id.0 == "r1"
                && format!("{:?}", t.kind) == "Read"
                && t.locations.first().is_some_and(|l| l.path == ws2.join("notes.txt")))));
        // The edit's diff: old and new text.
        let diff = updates.iter().find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t) if &*t.tool_call_id.0 == "e1" => {
                t.fields.content.as_ref()?.iter().find_map(|c| match c {
                    ToolCallContent::Diff(d) => Some(d.clone()),
                    _ => None,
                })
            }
            _ => None,
        });
        let diff = diff.expect("the edit's diff");
        assert_eq!(diff.old_text.as_deref(), Some("hello world\n"));
        assert_eq!(diff.new_text, "goodbye world\n");
        // The first command ran and its output arrived; the second was refused.
        let b1 = updates.iter().find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t) if &*t.tool_call_id.0 == "b1" => Some(t.clone()),
            _ => None,
        }).expect("b1 finished");
        assert_eq!(b1.fields.status, Some(ToolCallStatus::Completed));
        assert!(format!("{:?}", b1.fields.content).contains("made it"));
        let b2 = updates.iter().find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t) if &*t.tool_call_id.0 == "b2" => Some(t.clone()),
            _ => None,
        }).expect("b2 finished");
        assert_eq!(b2.fields.status, Some(ToolCallStatus::Failed));
        // The plan.
        let plan = updates.iter().find_map(|u| match u {
            SessionUpdate::Plan(p) => Some(p.clone()),
            _ => None,
        }).expect("a plan");
        assert_eq!(plan.entries.len(), 2);
        assert_eq!(plan.entries[0].content, "Edit the notes");

        // Cancel mid-command: the command's process is gone, the turn says so.
        let sent = cx.send_request(prompt(&id, "wait a bit"));
        let started = ws2.join("started.txt");
        wait_for("the command to start", || started.exists()).await;
        wait_for("the sleep to run", || !processes_with(&marker2).is_empty()).await;
        cx.send_notification(CancelNotification::new(id.clone()))?;
        let cancelled = sent.block_task().await?;
        assert_eq!(cancelled.stop_reason, StopReason::Cancelled);
        wait_for("the sleep to be killed", || processes_with(&marker2).is_empty()).await;
        Ok(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "goodbye world\n"
    );
    assert!(!ws.join("gone-once.txt").exists());
    assert!(ws.join("gone-twice.txt").exists());
    let asked = seen.asked.lock().unwrap().clone();
    let asked_ids: Vec<String> = asked
        .iter()
        .map(|a| a.tool_call.tool_call_id.0.to_string())
        .collect();
    assert_eq!(asked_ids, ["e1", "b1", "b2"], "{asked:?}");
    assert!(processes_with(&marker).is_empty());

    // A new process loads the session: the history comes back.
    let id = session.lock().unwrap().clone().unwrap();
    h.server.push(Reply::tool_use(
        "w1",
        "write_file",
        json!({"path": "blocked.txt", "content": "x"}),
    ));
    h.server.push(Reply::text("It was refused."));
    let seen = Seen::default();
    let s = seen.clone();
    let ws2 = ws.clone();
    drive(&h, seen.clone(), async move |cx: ConnectionTo<Agent>| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(id.clone(), ws2.clone()))
            .block_task()
            .await?;
        let replay = s.take();
        assert!(replay.iter().any(|u| matches!(u,
            SessionUpdate::UserMessageChunk(c) if matches!(&c.content, ContentBlock::Text(t) if t.text == "tidy the notes"))), "{replay:?}");
        assert!(replay.iter().any(|u| matches!(u,
            SessionUpdate::ToolCall(t) if &*t.tool_call_id.0 == "e1")));
        assert!(streamed(&replay).contains("All done"), "{replay:?}");
        // Read-only: a write is refused without asking.
        cx.send_request(SetSessionModeRequest::new(id.clone(), "read-only"))
            .block_task()
            .await?;
        let done = cx
            .send_request(prompt(&id, "write something"))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let updates = s.updates();
        assert!(updates.iter().any(|u| matches!(u,
            SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "read-only")));
        assert!(updates.iter().any(|u| matches!(u,
            SessionUpdate::ToolCallUpdate(t) if &*t.tool_call_id.0 == "w1"
                && t.fields.status == Some(ToolCallStatus::Failed))));
        Ok(())
    })
    .await;
    assert!(!ws.join("blocked.txt").exists());
    assert!(seen.asked.lock().unwrap().is_empty());
    h.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_picks_the_model_and_the_conversation_goes_on() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    h.server.push(Reply::text("First answer."));
    h.server.push(Reply::text("Second answer."));
    let env = [
        ("OPENAI_API_KEY", "sk-test-openai-0000".to_string()),
        ("OPENAI_BASE_URL", h.server.openai_base_url()),
    ];
    let seen = Seen::default();
    drive_with_env(&h, &env, seen, async move |cx: ConnectionTo<Agent>| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let new = cx
            .send_request(NewSessionRequest::new(ws.clone()))
            .block_task()
            .await?;
        let id = new.session_id.clone();
        // The picker: every model the keys reach, and the embedded one.
        let options = new.config_options.expect("config options");
        let picker = options
            .iter()
            .find(|o| &*o.id.0 == "model")
            .expect("a model picker");
        let SessionConfigKind::Select(select) = &picker.kind else {
            panic!("a select: {picker:?}");
        };
        assert!(
            select.current_value.0.starts_with("anthropic:"),
            "{select:?}"
        );
        let SessionConfigSelectOptions::Ungrouped(choices) = &select.options else {
            panic!("ungrouped: {select:?}");
        };
        let ids: Vec<&str> = choices.iter().map(|c| &*c.value.0).collect();
        assert!(ids.contains(&"openai:gpt-5"), "{ids:?}");
        assert!(ids.iter().any(|i| i.starts_with("local")), "{ids:?}");
        cx.send_request(prompt(&id, "hello")).block_task().await?;
        // Switch, and the next call goes to the other provider, with the history.
        let switched = cx
            .send_request(SetSessionConfigOptionRequest::new(
                id.clone(),
                "model",
                "openai:gpt-5",
            ))
            .block_task()
            .await?;
        let SessionConfigKind::Select(now) = &switched.config_options[0].kind else {
            panic!("a select");
        };
        assert_eq!(&*now.current_value.0, "openai:gpt-5");
        cx.send_request(prompt(&id, "and again"))
            .block_task()
            .await?;
        // A model this machine cannot reach is refused, the session unchanged.
        let refused = cx
            .send_request(SetSessionConfigOptionRequest::new(
                id.clone(),
                "model",
                "anthropic:nope",
            ))
            .block_task()
            .await;
        assert!(refused.is_err(), "{refused:?}");
        Ok(())
    })
    .await;
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[0].path.ends_with("/messages"),
        "{}",
        requests[0].path
    );
    assert!(
        requests[1].path.ends_with("/chat/completions") || requests[1].path.ends_with("/responses"),
        "{}",
        requests[1].path
    );
    assert_eq!(requests[1].body["model"], "gpt-5");
    let body = requests[1].body.to_string();
    assert!(
        body.contains("hello") && body.contains("First answer"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_lists_sessions_diffs_and_rewinds() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "v1\n").unwrap();
    h.server.push(Reply::tool_use(
        "w1",
        "write_file",
        json!({"path": "notes.txt", "content": "v2\n"}),
    ));
    h.server.push(Reply::text("Changed."));
    let seen = Seen::default();
    seen.answer(&["allow-once"]);
    let s = seen.clone();
    let ws2 = ws.clone();
    drive(&h, seen, async move |cx: ConnectionTo<Agent>| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        assert!(init.agent_capabilities.session_capabilities.list.is_some());
        let new = cx
            .send_request(NewSessionRequest::new(ws2.clone()))
            .block_task()
            .await?;
        let id = new.session_id.clone();
        cx.send_request(prompt(&id, "change it"))
            .block_task()
            .await?;
        assert_eq!(
            std::fs::read_to_string(ws2.join("notes.txt")).unwrap(),
            "v2\n"
        );
        // The session is listed for its workspace.
        let listed = cx
            .send_request(ListSessionsRequest::new().cwd(ws2.clone()))
            .block_task()
            .await?;
        assert!(
            listed.sessions.iter().any(|x| x.session_id == id),
            "{listed:?}"
        );
        assert!(
            listed
                .sessions
                .iter()
                .all(|x| x.updated_at.as_deref().is_some_and(|t| t.ends_with('Z')))
        );
        s.take();
        cx.send_request(prompt(&id, "/diff")).block_task().await?;
        let diff = streamed(&s.take());
        assert!(diff.contains("-v1") && diff.contains("+v2"), "{diff}");
        cx.send_request(prompt(&id, "/rewind")).block_task().await?;
        let points = streamed(&s.take());
        assert!(points.contains("1. after write_file (w1)"), "{points}");
        assert!(points.contains("2. your message \"change it\""), "{points}");
        cx.send_request(prompt(&id, "/rewind 2 code"))
            .block_task()
            .await?;
        let done = streamed(&s.take());
        assert!(done.contains("files restored: 1 written"), "{done}");
        assert_eq!(
            std::fs::read_to_string(ws2.join("notes.txt")).unwrap(),
            "v1\n"
        );
        cx.send_request(prompt(&id, "/rewind 9"))
            .block_task()
            .await?;
        assert!(streamed(&s.take()).contains("no point 9"));
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_picture_reaches_the_model_with_the_text() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    h.server.push(Reply::text("A red square."));
    drive(&h, Seen::default(), async move |cx: ConnectionTo<Agent>| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        assert!(init.agent_capabilities.prompt_capabilities.image);
        let new = cx
            .send_request(NewSessionRequest::new(ws.clone()))
            .block_task()
            .await?;
        let blocks = vec![
            ContentBlock::Text(TextContent::new("what is this?")),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ];
        let done = cx
            .send_request(PromptRequest::new(new.session_id.clone(), blocks))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let request = h.server.requests().pop().expect("one model call");
    let last = request.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let content = last["content"].as_array().expect("blocks");
    assert_eq!(content[0]["text"], "what is this?");
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["source"]["media_type"], "image/png");
    assert_eq!(content[1]["source"]["data"], "iVBORw0KGgo=");
}

/// The tool call update that finished `id`.
fn finished(
    updates: &[SessionUpdate],
    id: &str,
) -> agent_client_protocol::v1::schema::ToolCallUpdate {
    updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t)
                if &*t.tool_call_id.0 == id && t.fields.status.is_some() =>
            {
                Some(t.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{id} finished: {updates:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_that_offers_its_files_is_read_and_written_through() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "on disk\n").unwrap();
    h.server.push(Reply::tool_use(
        "r1",
        "read_file",
        json!({"path": "notes.txt"}),
    ));
    h.server.push(Reply::tool_use(
        "e1",
        "edit_file",
        json!({"path": "notes.txt", "old_string": "unsaved", "new_string": "edited"}),
    ));
    h.server.push(Reply::tool_use(
        "w1",
        "write_file",
        json!({"path": "sub/new.txt", "content": "fresh\n"}),
    ));
    // A file the editor has no buffer for is read from the disk.
    std::fs::write(ws.join("plain.txt"), "only on disk\n").unwrap();
    h.server.push(Reply::tool_use(
        "r2",
        "read_file",
        json!({"path": "plain.txt"}),
    ));
    h.server.push(Reply::text("Done."));
    let seen = Seen::default();
    seen.answer(&["allow-once", "allow-once", "allow-once"]);
    seen.buffers
        .lock()
        .unwrap()
        .insert(ws.join("notes.txt"), "unsaved buffer\n".to_string());
    let s = seen.clone();
    let ws2 = ws.clone();
    drive(&h, seen.clone(), async move |cx: ConnectionTo<Agent>| {
        let capabilities = ClientCapabilities::new().fs(FileSystemCapabilities::new()
            .read_text_file(true)
            .write_text_file(true));
        cx.send_request(
            InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
        )
        .block_task()
        .await?;
        let new = cx
            .send_request(NewSessionRequest::new(ws2.clone()))
            .block_task()
            .await?;
        let done = cx
            .send_request(prompt(&new.session_id, "edit the notes"))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let updates = s.updates();
        // The model read the buffer, not the disk.
        let r1 = finished(&updates, "r1");
        assert!(
            format!("{:?}", r1.fields.content).contains("unsaved buffer"),
            "{r1:?}"
        );
        let r2 = finished(&updates, "r2");
        assert!(
            format!("{:?}", r2.fields.content).contains("only on disk"),
            "{r2:?}"
        );
        // The edit's diff is the buffer's, before and after.
        let e1 = finished(&updates, "e1");
        let diff = e1
            .fields
            .content
            .as_ref()
            .and_then(|c| {
                c.iter().find_map(|c| match c {
                    ToolCallContent::Diff(d) => Some(d.clone()),
                    _ => None,
                })
            })
            .expect("the edit's diff");
        assert_eq!(diff.old_text.as_deref(), Some("unsaved buffer\n"));
        assert_eq!(diff.new_text, "edited buffer\n");
        assert_eq!(
            finished(&updates, "w1").fields.status,
            Some(ToolCallStatus::Completed)
        );
        Ok(())
    })
    .await;
    // Both writes went to the editor, in order, and none to the disk.
    let writes = seen.writes.lock().unwrap().clone();
    assert_eq!(
        writes,
        [
            (ws.join("notes.txt"), "edited buffer\n".to_string()),
            (ws.join("sub/new.txt"), "fresh\n".to_string()),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "on disk\n"
    );
    assert!(!ws.join("sub/new.txt").exists());
}

/// Turn 1 of the main path: read, edit, run twice (allowed, then
/// refused), a plan.
fn script_first_turn(h: &Harness) {
    h.server.push(Reply::tool_use(
        "r1",
        "read_file",
        json!({"path": "notes.txt"}),
    ));
    h.server.push(Reply::tool_use(
        "e1",
        "edit_file",
        json!({"path": "notes.txt", "old_string": "hello", "new_string": "goodbye"}),
    ));
    h.server.push(Reply::tool_use(
        "b1",
        "bash",
        json!({"command": "rm -f gone-once.txt && echo made it"}),
    ));
    h.server.push(Reply::tool_use(
        "b2",
        "bash",
        json!({"command": "rm -f gone-twice.txt"}),
    ));
    h.server.push(Reply::tool_use(
        "t1",
        "todo_write",
        json!({"todos": [
            {"content": "Edit the notes", "status": "completed", "activeForm": "Editing"},
            {"content": "Tell the user", "status": "in_progress", "activeForm": "Telling"}
        ]}),
    ));
    h.server.push(Reply::text("All done."));
}

/// The model's side of the main path both clients drive.
fn script_main_path(h: &Harness, marker: &str) {
    script_first_turn(h);
    // /compact: the summary.
    h.server.push(Reply::text(
        "## Summary\nThe notes were edited: hello became goodbye.",
    ));
    // A long command, cancelled while it runs.
    h.server.push(Reply::tool_use(
        "s1",
        "bash",
        json!({"command": format!("touch started.txt; sleep {marker}")}),
    ));
    // After session/load, in read-only: a write.
    h.server.push(Reply::tool_use(
        "w1",
        "write_file",
        json!({"path": "blocked.txt", "content": "x"}),
    ));
    h.server.push(Reply::text("It was refused."));
}

#[test]
fn the_typescript_sdk_drives_the_main_path() {
    let Some(npm) = testkit::NpmTools::find_or_skip("the_typescript_sdk_drives_the_main_path")
    else {
        return;
    };
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "hello world\n").unwrap();
    std::fs::write(ws.join("gone-once.txt"), "").unwrap();
    std::fs::write(ws.join("gone-twice.txt"), "").unwrap();
    let marker = format!("32.{}", std::process::id());
    script_main_path(&h, &marker);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/acp_client.mjs");
    let mut cmd = std::process::Command::new(npm.node());
    h.set_env(&mut cmd);
    let out = cmd
        .arg(script)
        .current_dir(&ws)
        .env("ACP_SDK", npm.acp_sdk())
        .env("WHITTLE_BIN", env!("CARGO_BIN_EXE_whittle"))
        .env("WORKSPACE", &ws)
        .env("EVERYTHING", npm.everything())
        .env("NODE_BIN", npm.node())
        .env("MARKER", &marker)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("acp node e2e: ok"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The client's MCP server was started: its tools were offered to the model.
    let first = &h.requests()[0].body;
    assert!(
        first["tools"].to_string().contains("mcp__everything__"),
        "{}",
        first["tools"]
    );
    assert!(processes_with(&marker).is_empty());
    h.assert_clean();
}

/// Raw lines to `whittle acp`; its answers, one JSON value a line.
fn raw_session(
    h: &Harness,
    lines: &[String],
) -> (Vec<serde_json::Value>, std::process::ExitStatus, String) {
    use std::io::{BufRead, BufReader, Write};
    let mut child = acp_command(h)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(&l).expect("stdout holds only JSON-RPC")
            })
            .collect::<Vec<_>>()
    });
    for line in lines {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    // Time for the last request (a session/new) to be answered before the
    // client goes; a client that goes first gets no answer, by design.
    std::thread::sleep(Duration::from_secs(3));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let answers = reader.join().unwrap();
    (
        answers,
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn answer(answers: &[serde_json::Value], id: u64) -> &serde_json::Value {
    answers
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
}

#[test]
fn bad_input_gets_json_rpc_errors_never_a_panic() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    let lines = vec![
        "{not json".to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "no/such_method", "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "relative/path", "mcpServers": []}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": 7}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 6, "method": "session/set_mode", "params": {"sessionId": "nope", "modeId": "yolo"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}}).to_string(),
    ];
    let (answers, status, stderr) = raw_session(&h, &lines);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{status:?} {stderr}");
    assert_eq!(answer(&answers, 1)["result"]["protocolVersion"], 1);
    assert_eq!(answer(&answers, 2)["error"]["code"], -32601, "{answers:?}");
    for id in [3, 4, 5, 6] {
        assert!(
            answer(&answers, id)["error"]["code"].is_i64(),
            "{id}: {answers:?}"
        );
    }
    assert!(
        answer(&answers, 7)["result"]["sessionId"].is_string(),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|a| a["error"]["code"] == -32700),
        "a parse error is answered: {answers:?}"
    );
}

#[test]
fn a_client_that_dies_mid_turn_leaves_no_process() {
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    let marker = format!("33.{}", std::process::id());
    h.server.push(Reply::tool_use(
        "s1",
        "bash",
        json!({"command": format!("touch started.txt; sleep {marker}")}),
    ));
    h.write_user_config("permission_mode = \"yolo\"\n");
    let mut child = acp_command(&h)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Every line the agent writes, as it comes.
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let answer_to = |id: u64| -> Value {
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no answer to request {id}"));
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == id {
                return v;
            }
        }
    };
    use std::io::Write;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}});
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}});
    // One at a time: the SDK refuses requests before initialize is answered,
    // and a prompt before session/new is answered names no session yet.
    writeln!(stdin, "{init}").unwrap();
    answer_to(1);
    writeln!(stdin, "{new}").unwrap();
    let id = answer_to(2)["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": id, "prompt": [{"type": "text", "text": "wait"}]}});
    writeln!(stdin, "{prompt}").unwrap();
    let start = Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client dies: its end of the pipe closes.
    drop(stdin);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "whittle acp outlived its client"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    reader.join().unwrap();
    let start = Instant::now();
    while !processes_with(&marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command outlived the agent"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
