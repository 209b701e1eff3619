//! The `Provider` trait every model backend implements.

use crate::collect::{ModelResponse, collect};
use crate::error::LlmError;
use crate::event::{EventStream, StreamEvent};
use crate::request::ModelRequest;
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;

/// A boxed `Send` future, so that [`Provider`] stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model backend: Anthropic, an OpenAI-compatible server, or an in-process engine.
///
/// Used as `Arc<dyn Provider>`. [`Provider::stream`] resolves once the
/// request is ready to go; connecting, retrying (reported as
/// [`StreamEvent::Retry`]) and every error after that arrive through the
/// returned stream. Dropping the stream cancels the request.
///
/// An engine that runs blocking code implements `stream` with
/// [`event_channel`]: it moves its work into `tokio::task::spawn_blocking`,
/// sends events through the [`EventSender`], and stops when a send reports
/// that the receiver was dropped.
pub trait Provider: Send + Sync {
    /// Short name of the backend (`anthropic`, `openai`, `local`), for messages.
    fn name(&self) -> &str;

    /// The model this provider was configured with; requests normally carry it.
    fn model(&self) -> &str;

    /// Starts one model call.
    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<EventStream, LlmError>>;
}

/// Runs one call to completion and assembles the answer: for callers that
/// do not show progress (summaries, tests).
pub async fn complete(
    provider: &dyn Provider,
    request: ModelRequest,
) -> Result<ModelResponse, LlmError> {
    let stream = provider.stream(request).await?;
    collect(stream, |_| {}).await
}

/// The sending half of [`event_channel`].
#[derive(Clone, Debug)]
pub struct EventSender(mpsc::Sender<Result<StreamEvent, LlmError>>);

impl EventSender {
    /// Sends from blocking code (never call it on an async worker thread).
    /// Returns `false` once the stream was dropped: the caller should stop.
    pub fn blocking_send(&self, item: Result<StreamEvent, LlmError>) -> bool {
        self.0.blocking_send(item).is_ok()
    }

    /// Sends from async code. Returns `false` once the stream was dropped.
    pub async fn send(&self, item: Result<StreamEvent, LlmError>) -> bool {
        self.0.send(item).await.is_ok()
    }

    /// Whether the stream was dropped (the request is cancelled).
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// A bounded channel whose receiving half is an [`EventStream`]: the bridge
/// for engines that produce events on another thread. The stream ends when
/// every sender is dropped.
pub fn event_channel(buffer: usize) -> (EventSender, EventStream) {
    let (tx, mut rx) = mpsc::channel(buffer.max(1));
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    (EventSender(tx), Box::pin(stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A blocking "engine" behind the trait, the way an in-process model plugs in.
    struct BlockingEcho {
        produced: Arc<AtomicUsize>,
    }

    impl Provider for BlockingEcho {
        fn name(&self) -> &str {
            "echo"
        }
        fn model(&self) -> &str {
            "echo-1"
        }
        fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<EventStream, LlmError>> {
            let produced = self.produced.clone();
            Box::pin(async move {
                let (tx, stream) = event_channel(1);
                tokio::task::spawn_blocking(move || {
                    let text = request
                        .messages
                        .last()
                        .map(|m| m.text())
                        .unwrap_or_default();
                    if !tx.blocking_send(Ok(StreamEvent::text_start(0))) {
                        return;
                    }
                    for _ in 0..10_000 {
                        if !tx.blocking_send(Ok(StreamEvent::TextDelta {
                            index: 0,
                            text: text.clone(),
                        })) {
                            return; // cancelled
                        }
                        produced.fetch_add(1, Ordering::SeqCst);
                    }
                });
                Ok(stream)
            })
        }
    }

    #[tokio::test]
    async fn a_blocking_engine_streams_and_stops_when_the_stream_is_dropped() {
        use futures::StreamExt;
        let produced = Arc::new(AtomicUsize::new(0));
        let provider: Arc<dyn Provider> = Arc::new(BlockingEcho {
            produced: produced.clone(),
        });
        let request = ModelRequest::new("echo-1", "", vec![whittle_protocol::Message::user("hi")]);
        let mut stream = provider.stream(request).await.unwrap();
        for _ in 0..3 {
            stream.next().await.unwrap().unwrap();
        }
        drop(stream);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let after_drop = produced.load(Ordering::SeqCst);
        assert!(after_drop < 10, "engine kept going: {after_drop}");
    }
}
