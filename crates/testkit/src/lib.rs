//! Scripted fake model servers for whittle's tests.
//!
//! [`TestServer`] answers both the Anthropic Messages streaming API and the
//! OpenAI chat-completions streaming API on `127.0.0.1`. A test queues
//! [`Reply`]s (text, tool calls, thinking, usage) and [`Fault`]s (HTTP
//! errors with real bodies, cut or stalled streams, broken JSON), can make
//! oversized requests fail with "prompt is too long" ([`ContextLimit`]),
//! and reads back every request it received. Responses are streamed in
//! pieces split at arbitrary byte positions.
//!
//! ```no_run
//! # async fn demo() {
//! use testkit::{Reply, TestServer};
//! let server = TestServer::start().await;
//! server.push(Reply::text("hello"));
//! // point ANTHROPIC_BASE_URL at server.url(), or OPENAI_BASE_URL at server.openai_base_url()
//! let requests = server.requests();
//! # }
//! ```
//!
//! When the queue is empty the server answers HTTP 400 saying so, so a
//! test that sends one request too many fails at once instead of hanging.
//!
//! For MCP: [`McpFaultServer`] is a scripted MCP server that dies mid-call,
//! never answers, sends garbage or 50 MB; [`NpmTools`] finds the real MCP
//! servers and the conformance suite installed from npm.

mod mcp;
mod npm;
mod prompt_cache;
mod render;
mod request;
mod script;
mod server;
mod shared_traces;

pub use mcp::{Behavior as McpBehavior, McpFaultServer, Startup as McpStartup};
pub use npm::{NpmTools, PACKAGES as NPM_PACKAGES};
pub use prompt_cache::PromptCache;
pub use request::{Api, RecordedRequest, content_text};
pub use script::{
    Chunking, ContextLimit, Fault, Reply, ReplyBlock, ReplyUsage, Responder, Step, UsageStyle,
};
pub use server::TestServer;
pub use shared_traces::shared_traces_dir;
