//! The HTTP side shared by the providers: one POST that answers with an
//! event stream, errors classified, silence bounded by the idle timeout.

use crate::error::{LlmError, classify_http, classify_stream_error};
use crate::event::{EventStream, StreamEvent};
use crate::secret::Secret;
use crate::sse::{SseDecoder, SseEvent};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use std::pin::Pin;
use std::time::Duration;

/// Decoded server-sent events of one response.
pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, LlmError>> + Send>>;

/// An error body longer than this is cut; we only need its first words.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Whether `url` points at this machine (a local model server).
fn is_loopback(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    match parsed.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// How whittle talks HTTP to `url`, for the providers and for MCP servers
/// alike: rustls with the ring crypto provider, no overall timeout (streams
/// are long; silence is bounded by an idle timeout instead). Proxies from the
/// environment are honoured, except for a server on this machine, which a
/// corporate proxy cannot reach.
pub fn http_client_builder(url: &str) -> reqwest::ClientBuilder {
    // Installing twice fails harmlessly; whoever installed first wins.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .user_agent(concat!("whittle/", env!("CARGO_PKG_VERSION")));
    if is_loopback(url) {
        builder.no_proxy()
    } else {
        builder
    }
}

/// The HTTP client every provider uses; see [`http_client_builder`].
pub(crate) fn build_client(url: &str) -> Result<reqwest::Client, LlmError> {
    http_client_builder(url).build().map_err(|e| {
        LlmError::config_caused(
            format!("cannot set up the HTTP client: {}", describe(&e)),
            e,
        )
    })
}

/// The innermost cause of a reqwest error: "Connection refused (os error
/// 111)" says more than "error sending request for url".
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text = s.to_string();
        source = s.source();
    }
    if error.is_connect() && !text.to_lowercase().contains("connect") {
        text = format!("connection failed: {text}");
    }
    text
}

pub(crate) fn transport(address: &str, message: impl Into<String>) -> LlmError {
    LlmError::Transport {
        address: address.to_owned(),
        message: message.into(),
    }
}

/// One request, ready to be sent as often as retries need.
#[derive(Clone, Debug)]
pub(crate) struct HttpCall {
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub idle_timeout: Duration,
    /// Where the credential comes from, for [`LlmError::Auth`].
    pub auth_hint: String,
    /// Scrubbed from anything the server says.
    pub secret: Option<Secret>,
}

impl HttpCall {
    /// Sends the request; a non-success status becomes its error class, a
    /// success becomes the decoded event stream.
    pub async fn send(self) -> Result<SseStream, LlmError> {
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(self.body.clone())
            .send();
        let response = match tokio::time::timeout(self.idle_timeout, request).await {
            Err(_) => {
                return Err(transport(
                    &self.url,
                    format!("no response in {} s", self.idle_timeout.as_secs()),
                ));
            }
            Ok(Err(e)) => return Err(transport(&self.url, describe(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = self.read_capped(response).await;
            return Err(classify_http(
                status.as_u16(),
                &body,
                retry_after,
                &self.auth_hint,
                self.secret.as_ref(),
            ));
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/json"));
        if is_json {
            // A proxy or server that ignored `stream: true`, or an error sent with 200.
            let body = self.read_capped(response).await;
            return Err(match serde_json::from_str::<serde_json::Value>(&body) {
                Ok(v) if v.get("error").is_some_and(|e| !e.is_null()) => {
                    classify_stream_error(&v, &self.auth_hint, self.secret.as_ref())
                }
                _ => LlmError::malformed(
                    "the server answered with plain JSON instead of an event stream",
                ),
            });
        }
        Ok(self.decode(response))
    }

    async fn read_capped(&self, response: reqwest::Response) -> String {
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while body.len() < MAX_ERROR_BODY {
            match tokio::time::timeout(self.idle_timeout, chunks.next()).await {
                Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(MAX_ERROR_BODY);
        String::from_utf8_lossy(&body).into_owned()
    }

    fn decode(self, response: reqwest::Response) -> SseStream {
        let url = self.url;
        let idle = self.idle_timeout;
        Box::pin(async_stream::stream! {
            let mut decoder = SseDecoder::new();
            let mut chunks = response.bytes_stream();
            let mut out = Vec::new();
            loop {
                let step = match tokio::time::timeout(idle, chunks.next()).await {
                    Err(_) => Err(transport(&url, format!("the stream went silent for {} s", idle.as_secs()))),
                    Ok(None) => {
                        let end = decoder.finish(&mut out);
                        for event in out.drain(..) {
                            yield Ok(event);
                        }
                        if let Err(e) = end {
                            yield Err(e);
                        }
                        return;
                    }
                    Ok(Some(Err(e))) => Err(transport(&url, format!("the stream broke: {}", describe(&e)))),
                    Ok(Some(Ok(chunk))) => decoder.push(&chunk, &mut out),
                };
                for event in out.drain(..) {
                    yield Ok(event);
                }
                if let Err(e) = step {
                    yield Err(e);
                    return;
                }
            }
        })
    }
}

/// `retry-after-ms` (Anthropic), else `retry-after` as seconds or as an HTTP
/// date (RFC 9110 allows both; a date in the past means now).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, std::time::SystemTime::now())
}

fn retry_after_at(headers: &HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    let seconds = |v: &str| -> Option<f64> {
        let v: f64 = v.parse().ok()?;
        (0.0..1e9).contains(&v).then_some(v)
    };
    if let Some(ms) = text("retry-after-ms").and_then(seconds) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Some(s) = seconds(value) {
        return Some(Duration::from_secs_f64(s));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Turns one provider's server-sent events into [`StreamEvent`]s.
pub(crate) trait EventParser: Send + 'static {
    /// Handles one event; returns `true` once the response is complete.
    fn event(&mut self, sse: SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError>;

    /// The connection ended before the parser said the response was complete.
    fn early_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), LlmError>;
}

/// Applies `parser` to `sse`. Stops reading (and so drops the connection)
/// as soon as the response is complete.
pub(crate) fn parse_events<P: EventParser>(mut sse: SseStream, mut parser: P) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut out = Vec::new();
        loop {
            let step = match sse.next().await {
                None => parser.early_end(&mut out).map(|()| true),
                Some(Err(e)) => Err(e),
                Some(Ok(event)) => parser.event(event, &mut out),
            };
            for event in out.drain(..) {
                yield Ok(event);
            }
            match step {
                Ok(false) => {}
                Ok(true) => return,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn loopback_hosts() {
        for url in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:8080",
            "http://[::1]:1/",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in ["https://api.anthropic.com", "http://10.0.0.1", "not a url"] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        let date = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let before = date - Duration::from_secs(90);
        assert_eq!(retry_after_at(&h, before), Some(Duration::from_secs(90)));
        assert_eq!(
            retry_after_at(&h, date + Duration::from_secs(5)),
            Some(Duration::ZERO)
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("1e300"));
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&h), None);
    }
}
