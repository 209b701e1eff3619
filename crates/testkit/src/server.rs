//! The server: one axum app on 127.0.0.1 answering both APIs from one script.

use crate::render::{self, Ctx};
use crate::request::{Api, RecordedRequest};
use crate::script::{Chunking, ContextLimit, Fault, Reply, Responder, Step, UsageStyle};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

#[derive(Default)]
struct Script {
    queue: VecDeque<Step>,
    requests: Vec<RecordedRequest>,
    context_limit: Option<ContextLimit>,
    chunking: Chunking,
    usage_style: UsageStyle,
    fallback: Option<Responder>,
}

type Shared = Arc<Mutex<Script>>;

fn lock(shared: &Shared) -> MutexGuard<'_, Script> {
    // A test that panicked while holding the lock must not hide later results.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scripted fake of the Anthropic Messages API and the OpenAI
/// chat-completions API on `127.0.0.1`, on a random port.
///
/// It runs on a thread of its own, so it keeps answering whatever the test
/// does meanwhile (block on a child process, use a current-thread runtime).
/// Dropping it stops it.
pub struct TestServer {
    addr: SocketAddr,
    shared: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl TestServer {
    /// Starts a server. Test support: panics with a clear message if the
    /// loopback port cannot be bound.
    pub async fn start() -> TestServer {
        Self::start_blocking()
    }

    /// [`TestServer::start`] for tests without an async runtime.
    pub fn start_blocking() -> TestServer {
        match Self::try_start() {
            Ok(server) => server,
            Err(e) => panic!("testkit: cannot start a server on 127.0.0.1: {e}"),
        }
    }

    /// Starts a server, or says why it could not.
    pub fn try_start() -> std::io::Result<TestServer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared: Shared = Arc::default();
        let (tx, rx) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let app = Router::new().fallback(handle).with_state(shared.clone());
        std::thread::Builder::new()
            .name(format!("testkit-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = rx => {}
                    }
                });
                // Dropping the runtime here cancels open (e.g. stalled) connections.
            })?;
        Ok(TestServer {
            addr,
            shared,
            shutdown: Some(tx),
        })
    }

    /// `http://127.0.0.1:PORT`: the Anthropic base URL (`/v1/messages` is appended).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Same as [`TestServer::url`], named for `ANTHROPIC_BASE_URL`.
    pub fn anthropic_base_url(&self) -> String {
        self.url()
    }

    /// `http://127.0.0.1:PORT/v1`, for `OPENAI_BASE_URL`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues the answer to a future request.
    pub fn push(&self, step: impl Into<Step>) {
        lock(&self.shared).queue.push_back(step.into());
    }

    /// Queues an answer computed from the request it answers.
    pub fn push_fn(&self, responder: impl Fn(&RecordedRequest) -> Step + Send + Sync + 'static) {
        self.push(Step::Dynamic(Arc::new(responder)));
    }

    /// Answers every request the queue has no step for with `responder`,
    /// instead of the HTTP 400 that says the script ran out: for driving a
    /// real client (another agent) whose number of requests a test cannot
    /// know, such as title or topic requests besides its model calls.
    pub fn set_fallback(
        &self,
        responder: impl Fn(&RecordedRequest) -> Step + Send + Sync + 'static,
    ) {
        lock(&self.shared).fallback = Some(Arc::new(responder));
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// How many queued answers are left.
    pub fn remaining(&self) -> usize {
        lock(&self.shared).queue.len()
    }

    /// Emulates a context window: requests whose body exceeds the limit get
    /// the API's real "prompt is too long" error and consume no queued answer.
    pub fn set_context_limit(&self, limit: Option<ContextLimit>) {
        lock(&self.shared).context_limit = limit;
    }

    /// Sets how responses are split into chunks.
    pub fn set_chunking(&self, chunking: Chunking) {
        lock(&self.shared).chunking = chunking;
    }

    /// Sets where the OpenAI endpoint reports usage.
    pub fn set_usage_style(&self, style: UsageStyle) {
        lock(&self.shared).usage_style = style;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// What the handler decided under the lock, rendered after it.
enum Plan {
    Step(Step),
    Overflow { limit: usize },
    Exhausted,
    UnknownPath,
}

async fn handle(State(shared): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let (recorded, plan, chunking, usage_style) = {
        let mut script = lock(&shared);
        let recorded = RecordedRequest {
            number: script.requests.len() + 1,
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            body_bytes: bytes.len(),
        };
        script.requests.push(recorded.clone());
        let plan = if recorded.api() == Api::Other {
            Plan::UnknownPath
        } else if let Some(limit) = script
            .context_limit
            .filter(|l| recorded.body_bytes > l.max_body_bytes)
        {
            if limit.once {
                script.context_limit = None;
            }
            Plan::Overflow {
                limit: limit.max_body_bytes,
            }
        } else {
            match script.queue.pop_front() {
                Some(step) => Plan::Step(step),
                None => match &script.fallback {
                    Some(responder) => Plan::Step(Step::Dynamic(responder.clone())),
                    None => Plan::Exhausted,
                },
            }
        };
        (recorded, plan, script.chunking, script.usage_style)
    };
    let openai = recorded.api() == Api::OpenAi;
    match plan {
        Plan::UnknownPath => json_response(
            404,
            &render::openai_error_with(
                &format!(
                    "testkit: no API at {} {}; use /v1/messages or /v1/chat/completions",
                    recorded.method, recorded.path
                ),
                "invalid_request_error",
                Value::Null,
            ),
            None,
        ),
        Plan::Exhausted => {
            let message = format!(
                "testkit: no scripted response left for request #{} ({} {}); push more with TestServer::push",
                recorded.number, recorded.method, recorded.path
            );
            let body = if openai {
                render::openai_error_with(&message, "invalid_request_error", Value::Null)
            } else {
                render::anthropic_error_with("invalid_request_error", &message, recorded.number)
            };
            json_response(400, &body, None)
        }
        Plan::Overflow { limit } => {
            let body = if openai {
                render::openai_overflow(recorded.body_bytes, limit)
            } else {
                render::anthropic_overflow(recorded.body_bytes, limit, recorded.number)
            };
            json_response(400, &body, None)
        }
        Plan::Step(step) => {
            let ctx = Ctx {
                number: recorded.number,
                model: recorded
                    .body
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or("testkit-model")
                    .to_owned(),
                body_bytes: recorded.body_bytes,
                include_usage: recorded
                    .body
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                usage_style,
            };
            respond(step, &recorded, &ctx, openai, chunking)
        }
    }
}

fn respond(
    step: Step,
    recorded: &RecordedRequest,
    ctx: &Ctx,
    openai: bool,
    chunking: Chunking,
) -> Response {
    let events = |reply: &Reply| {
        if openai {
            render::openai_events(reply, ctx)
        } else {
            render::anthropic_events(reply, ctx)
        }
    };
    match step {
        Step::Dynamic(responder) => {
            let step = responder(recorded);
            respond(step, recorded, ctx, openai, chunking)
        }
        Step::Reply(reply) => {
            stream_response(events(&reply).concat(), chunking, ctx.number, End::Clean)
        }
        Step::Fault(Fault::Status {
            status,
            retry_after,
            body,
        }) => {
            let body = body.unwrap_or_else(|| {
                if openai {
                    render::openai_error(status)
                } else {
                    render::anthropic_error(status, ctx.number)
                }
            });
            json_response(status, &body, retry_after)
        }
        Step::Fault(Fault::PlainJson { body }) => json_response(200, &body.to_string(), None),
        Step::Fault(Fault::CutAfter { reply, bytes }) => stream_response(
            events(&reply).concat(),
            chunking,
            ctx.number,
            End::CutAt(bytes),
        ),
        Step::Fault(Fault::Stall { reply, bytes }) => stream_response(
            events(&reply).concat(),
            chunking,
            ctx.number,
            End::StallAt(bytes),
        ),
        Step::Fault(Fault::MalformedEvent {
            reply,
            after_events,
        }) => {
            let mut list = events(&reply);
            let at = after_events.min(list.len());
            list.insert(at, render::malformed_event(openai));
            stream_response(list.concat(), chunking, ctx.number, End::Clean)
        }
        Step::Fault(Fault::ErrorEvent {
            reply,
            after_events,
            error_type,
        }) => {
            let mut list = events(&reply);
            list.truncate(after_events);
            list.push(render::anthropic_error_event(&error_type));
            stream_response(list.concat(), chunking, ctx.number, End::Clean)
        }
    }
}

fn json_response(status: u16, body: &str, retry_after: Option<u64>) -> Response {
    let mut response = Response::new(Body::from(body.to_owned()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// How a streamed body ends.
#[derive(Clone, Copy, Debug)]
enum End {
    Clean,
    /// The connection breaks after this many bytes.
    CutAt(usize),
    /// Nothing more is sent after this many bytes, and the connection stays open.
    StallAt(usize),
}

/// Most chunks one response is sent in, on average.
///
/// Why: a test's reply of a hundred tool calls is about 400 KB of events; in
/// pieces of 7 bytes on average that is 57,000 writes here and as many reads
/// and wake-ups in a debug build of the client, a second of CPU a test spent on
/// nothing fewer pieces do not also cover. Above this count the pieces grow (up
/// to twice the length over this count), still from one byte up at
/// pseudo-random positions; a response of up to 4 KB keeps the pieces asked for.
const MAX_CHUNKS: usize = 8192;

/// Split positions for `len` bytes: pseudo-random pieces of 1..=max bytes,
/// `max` raised for long responses (see [`MAX_CHUNKS`]).
fn split(len: usize, chunking: Chunking, salt: usize) -> Vec<usize> {
    if chunking.max_chunk == 0 {
        return vec![len];
    }
    let max = chunking.max_chunk.max((2 * len).div_ceil(MAX_CHUNKS));
    let mut state = (chunking.seed ^ (salt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let mut sizes = Vec::new();
    let mut left = len;
    while left > 0 {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = (state % max as u64) as usize + 1;
        let size = size.min(left);
        sizes.push(size);
        left -= size;
    }
    sizes
}

fn stream_response(text: String, chunking: Chunking, salt: usize, end: End) -> Response {
    let bytes = Bytes::from(text.into_bytes());
    let limit = match end {
        End::Clean => bytes.len(),
        End::CutAt(n) | End::StallAt(n) => n.min(bytes.len()),
    };
    let mut chunks = Vec::new();
    let mut offset = 0;
    for size in split(limit, chunking, salt) {
        chunks.push(bytes.slice(offset..offset + size));
        offset += size;
    }
    let body = futures::stream::iter(chunks).then(|chunk| async move {
        // Give each piece its own write, so the client sees the splits.
        tokio::task::yield_now().await;
        Ok::<Bytes, std::io::Error>(chunk)
    });
    let body = match end {
        End::Clean => Body::from_stream(body),
        End::CutAt(_) => Body::from_stream(body.chain(futures::stream::once(async {
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "testkit: connection cut",
            ))
        }))),
        End::StallAt(_) => Body::from_stream(body.chain(futures::stream::pending())),
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_every_byte_and_are_reproducible() {
        for len in [0, 1, 7, 1000] {
            let sizes = split(len, Chunking::default(), 3);
            assert_eq!(sizes.iter().sum::<usize>(), len);
            assert!(sizes.iter().all(|s| (1..=13).contains(s)));
            assert_eq!(sizes, split(len, Chunking::default(), 3));
        }
        // A long response: pieces grow, their count stays bounded, and some are
        // still a byte or two.
        let len = 400_000;
        let sizes = split(len, Chunking::default(), 3);
        assert_eq!(sizes.iter().sum::<usize>(), len);
        assert!(sizes.len() <= 2 * MAX_CHUNKS, "{}", sizes.len());
        assert!(sizes.iter().all(|s| (1..=98).contains(s)));
        assert!(sizes.iter().any(|&s| s <= 2));
        assert_eq!(
            split(
                50,
                Chunking {
                    max_chunk: 0,
                    seed: 1
                },
                0
            ),
            vec![50]
        );
    }
}
