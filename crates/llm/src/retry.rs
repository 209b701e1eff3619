//! Retrying a model call until its first content arrives.

use crate::error::LlmError;
use crate::event::{EventStream, StreamEvent};
use crate::provider::BoxFuture;
use futures::StreamExt;
use std::time::Duration;

/// When and how often a failed call is sent again, and how long a silent
/// stream is tolerated.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 4).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles each time (default 0.5 s).
    pub initial_delay: Duration,
    /// Backoff never exceeds this (default 8 s).
    pub max_delay: Duration,
    /// A server's `retry-after` is honoured up to this; longer asks fall back
    /// to backoff (default 60 s).
    pub max_retry_after: Duration,
    /// A stream (or a response's headers) silent for this long is a
    /// transport failure (default 120 s).
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries at all, for callers that handle failure themselves.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `attempt` (1-based) after `error`: the
    /// server's `retry-after` when it gave a usable one, else exponential
    /// backoff with up to 25% jitter so that clients do not retry in lockstep.
    pub fn delay(&self, attempt: u32, error: &LlmError) -> Duration {
        if let Some(after) = error.retry_after()
            && after <= self.max_retry_after
        {
            return after;
        }
        let doublings = attempt.saturating_sub(1).min(20);
        let backoff = self
            .initial_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        backoff.mul_f64(1.0 - 0.25 * fastrand::f64())
    }
}

/// Something that sends the request once and returns its raw event stream.
pub type Attempt = Box<dyn FnMut() -> BoxFuture<'static, Result<EventStream, LlmError>> + Send>;

/// Wraps `attempt` in retries: failures before the first content event are
/// retried per `policy` and reported as [`StreamEvent::Retry`]; events that
/// precede content (message start, usage) are held back until content
/// arrives, so a retried attempt leaves no trace in the message. After the
/// first content event, errors pass through.
pub fn retrying(policy: RetryPolicy, mut attempt: Attempt) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut retries = 0u32;
        loop {
            let failure = match attempt().await {
                Err(e) => e,
                Ok(mut inner) => {
                    let mut held = Vec::new();
                    let mut content = false;
                    loop {
                        match inner.next().await {
                            Some(Ok(event)) if content => yield Ok(event),
                            Some(Ok(event)) if event.is_content() => {
                                content = true;
                                for h in held.drain(..) {
                                    yield Ok(h);
                                }
                                yield Ok(event);
                            }
                            Some(Ok(event)) => held.push(event),
                            Some(Err(e)) if content => {
                                yield Err(e);
                                return;
                            }
                            Some(Err(e)) => break e,
                            None => {
                                for h in held.drain(..) {
                                    yield Ok(h);
                                }
                                return;
                            }
                        }
                    }
                }
            };
            if !failure.is_retryable() || retries >= policy.max_retries {
                yield Err(failure);
                return;
            }
            retries += 1;
            let delay = policy.delay(retries, &failure);
            yield Ok(StreamEvent::Retry { attempt: retries, delay, reason: failure });
            tokio::time::sleep(delay).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn fast() -> RetryPolicy {
        RetryPolicy {
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..RetryPolicy::default()
        }
    }

    fn overloaded() -> LlmError {
        LlmError::Overloaded {
            message: "Overloaded".into(),
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy::default();
        for attempt in 1..=6 {
            let d = p.delay(attempt, &overloaded());
            let full = Duration::from_millis(500 * (1 << (attempt - 1))).min(p.max_delay);
            assert!(d <= full && d >= full.mul_f64(0.75), "{attempt}: {d:?}");
        }
        let limited = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
            message: String::new(),
        };
        assert_eq!(p.delay(1, &limited), Duration::from_secs(3));
        let too_long = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
            message: String::new(),
        };
        assert!(p.delay(1, &too_long) <= p.max_delay);
    }

    #[tokio::test]
    async fn retries_until_success_and_reports_each_retry() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let stream = retrying(
            fast(),
            Box::new(move || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    if n < 2 {
                        return Err(overloaded());
                    }
                    let events: Vec<Result<StreamEvent, LlmError>> = vec![
                        Ok(StreamEvent::text_start(0)),
                        Ok(StreamEvent::BlockStop { index: 0 }),
                    ];
                    Ok(Box::pin(futures::stream::iter(events)) as EventStream)
                })
            }),
        );
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let retries: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                Ok(StreamEvent::Retry { attempt, .. }) => Some(*attempt),
                _ => None,
            })
            .collect();
        assert_eq!(retries, vec![1, 2]);
        assert!(events.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn a_break_before_content_is_retried_and_held_events_are_not_duplicated() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let stream = retrying(
            fast(),
            Box::new(move || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    let start = Ok(StreamEvent::MessageStart {
                        id: format!("m{n}"),
                        model: "x".into(),
                    });
                    let events: Vec<Result<StreamEvent, LlmError>> = if n == 0 {
                        vec![
                            start,
                            Err(LlmError::Transport {
                                address: "a".into(),
                                message: "reset".into(),
                            }),
                        ]
                    } else {
                        vec![start, Ok(StreamEvent::text_start(0))]
                    };
                    Ok(Box::pin(futures::stream::iter(events)) as EventStream)
                })
            }),
        );
        let events: Vec<_> = stream.collect().await;
        let starts: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, Ok(StreamEvent::MessageStart { .. })))
            .collect();
        assert_eq!(starts.len(), 1);
        assert!(matches!(starts[0], Ok(StreamEvent::MessageStart { id, .. }) if id == "m1"));
    }

    #[tokio::test]
    async fn errors_after_content_and_permanent_errors_are_not_retried() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let stream = retrying(
            fast(),
            Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    let events: Vec<Result<StreamEvent, LlmError>> =
                        vec![Ok(StreamEvent::text_start(0)), Err(overloaded())];
                    Ok(Box::pin(futures::stream::iter(events)) as EventStream)
                })
            }),
        );
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(events.last().unwrap().is_err());

        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let stream = retrying(
            fast(),
            Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
                Box::pin(async {
                    Err(LlmError::Auth {
                        status: 401,
                        message: "no".into(),
                        hint: "X".into(),
                    })
                })
            }),
        );
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(events.len(), 1);
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let stream = retrying(
            fast(),
            Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Err(overloaded()) })
            }),
        );
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        assert!(matches!(
            events.last(),
            Some(Err(LlmError::Overloaded { .. }))
        ));
    }
}
