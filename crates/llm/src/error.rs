//! The one error type of this crate, and the one place that classifies what
//! a server answered into it.

use crate::secret::Secret;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// What lay under a setup or engine failure, kept so a caller walking
/// [`std::error::Error::source`] reaches the library that failed. Shared, so
/// the error stays `Clone` for the retry events that carry it; two causes
/// are equal when they say the same, as their types need not be comparable.
#[derive(Clone, Debug)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// Keeps `error` as a cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(error))
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// Why a model call failed. Each message is one line that says what to do;
/// none ever contains a credential.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum LlmError {
    /// No credential was configured.
    #[error("no API key for {provider}: set {var}")]
    MissingApiKey {
        /// The provider that needs it.
        provider: String,
        /// The environment variable(s) to set.
        var: String,
    },
    /// The configuration cannot work (bad base URL, bad model spec).
    #[error("invalid model configuration: {message}")]
    Config {
        /// What is wrong, in one line that already names the cause.
        message: String,
        /// The failure underneath, when a library reported one.
        #[source]
        source: Option<Cause>,
    },
    /// The request does not fit the model's context window. The agent answers
    /// this by compacting, so it is never retried as is.
    #[error(
        "the conversation is too long for the model's context window ({message}); compact it with /compact or start a new session"
    )]
    ContextOverflow {
        /// The server's words.
        message: String,
        /// Tokens the request had, when the server said.
        tokens: Option<u64>,
        /// The limit, when the server said.
        limit: Option<u64>,
    },
    /// The credential was refused (401/403).
    #[error("the server rejected the credentials (HTTP {status}: {message}); check {hint}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The server's words.
        message: String,
        /// Where the credential comes from, e.g. `ANTHROPIC_API_KEY`.
        hint: String,
    },
    /// The account cannot pay (402, exhausted credit or quota).
    #[error(
        "the account cannot pay for this request (HTTP {status}: {message}); check the plan and credits"
    )]
    Billing {
        /// HTTP status.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// Too many requests (429); retried after `retry_after` when the server gave one.
    #[error("rate limited (HTTP 429: {message}); {}", wait_hint(*.retry_after))]
    RateLimited {
        /// How long the server asked us to wait.
        retry_after: Option<Duration>,
        /// The server's words.
        message: String,
    },
    /// The service is overloaded for everyone (529); retried.
    #[error("the model server is overloaded ({message}); try again in a minute")]
    Overloaded {
        /// The server's words.
        message: String,
    },
    /// The server failed (5xx); retried.
    #[error("the model server failed (HTTP {status}: {message}); try again later")]
    Server {
        /// HTTP status.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// The connection failed, broke, or went silent; retried before content arrives.
    #[error(
        "cannot talk to {address} ({message}); check the network and that a server is up at that address"
    )]
    Transport {
        /// The URL we were talking to.
        address: String,
        /// What happened.
        message: String,
    },
    /// The server refused the request as invalid (400 and other 4xx); never retried.
    #[error(
        "the server rejected the request (HTTP {status}: {message}); check the model name and settings"
    )]
    InvalidRequest {
        /// HTTP status.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// The server sent something that is not the protocol (bad JSON, bad order).
    #[error(
        "malformed response from the model server ({message}); try again, and check that the base URL points at a compatible server"
    )]
    MalformedResponse {
        /// What was wrong.
        message: String,
    },
    /// The embedded local model failed (bad file, engine error).
    #[error("the local model failed: {message}")]
    Local {
        /// What happened, in one line that already names the cause.
        message: String,
        /// The engine's own error, when it reported one.
        #[source]
        source: Option<Cause>,
    },
}

fn wait_hint(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!("wait {} s and try again", d.as_secs_f64().ceil()),
        None => "wait a little and try again".to_owned(),
    }
}

impl LlmError {
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::Transport { .. }
        )
    }

    /// Whether this is the context-window overflow the agent compacts for.
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, LlmError::ContextOverflow { .. })
    }

    /// The wait the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A configuration error with nothing underneath.
    pub(crate) fn config(message: impl Into<String>) -> Self {
        LlmError::Config {
            message: message.into(),
            source: None,
        }
    }

    /// A configuration error caused by `source`; the message names it too,
    /// so the one line is whole without walking the chain.
    pub(crate) fn config_caused(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        LlmError::Config {
            message: message.into(),
            source: Some(Cause::new(source)),
        }
    }

    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        LlmError::MalformedResponse {
            message: message.into(),
        }
    }
}

/// The fields of an error body, whatever server wrote it.
#[derive(Debug, Default)]
struct ErrorInfo {
    kind: String,
    code: String,
    message: String,
    prompt_tokens: Option<u64>,
    context: Option<u64>,
}

fn string_field(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn info_from_value(v: &Value, depth: u8) -> ErrorInfo {
    match v.get("error") {
        // Anthropic {"type":"error","error":{...}}, OpenAI and llama.cpp {"error":{...}}.
        Some(e @ Value::Object(_)) => ErrorInfo {
            kind: string_field(e, "type"),
            code: string_field(e, "code"),
            message: string_field(e, "message"),
            prompt_tokens: e.get("n_prompt_tokens").and_then(Value::as_u64),
            context: e.get("n_ctx").and_then(Value::as_u64),
        },
        // Ollama {"error":"..."}, sometimes with a JSON body inside the string.
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(inner @ Value::Object(_)) if depth < 2 => info_from_value(&inner, depth + 1),
            _ => ErrorInfo {
                message: s.clone(),
                ..ErrorInfo::default()
            },
        },
        // vLLM {"object":"error","message":...,"type":...,"code":400}.
        _ if v.get("message").is_some() => ErrorInfo {
            kind: string_field(v, "type"),
            code: string_field(v, "code"),
            message: string_field(v, "message"),
            ..ErrorInfo::default()
        },
        _ => ErrorInfo {
            message: v.to_string(),
            ..ErrorInfo::default()
        },
    }
}

fn parse_error_body(body: &str) -> ErrorInfo {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => info_from_value(&v, 0),
        Err(_) => ErrorInfo {
            message: body.to_owned(),
            ..ErrorInfo::default()
        },
    }
}

/// Phrases servers use for "the prompt does not fit", lowercase:
/// Anthropic, OpenAI and vLLM, llama.cpp and Ollama, LM Studio, Bedrock.
const OVERFLOW_PHRASES: &[&str] = &[
    "prompt is too long",
    "maximum context length",
    "context_length_exceeded",
    "exceeds the available context size",
    "context the overflows",
    "greater than the context length",
    "context size has been exceeded",
    "reached context length of",
    "input is too long",
    "exceeds the context window",
];

fn is_overflow(status: u16, info: &ErrorInfo) -> bool {
    if status == 413
        || matches!(
            info.kind.as_str(),
            "request_too_large" | "exceed_context_size_error"
        )
        || info.code == "context_length_exceeded"
    {
        return true;
    }
    // A 429 "request too large for tokens per min" is a rate limit, not a window.
    if status == 429 {
        return false;
    }
    let lower = info.message.to_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| lower.contains(p))
}

/// The first integer after `needle` (spaces, commas and `(` skipped before it).
fn number_after(haystack: &str, needle: &str) -> Option<u64> {
    let start = haystack.find(needle)? + needle.len();
    let rest = haystack[start..].trim_start_matches([' ', '(']);
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Tokens sent and the limit, from the wording of the servers we know.
fn overflow_numbers(info: &ErrorInfo) -> (Option<u64>, Option<u64>) {
    let m = info.message.as_str();
    let first = |needles: &[&str]| needles.iter().find_map(|n| number_after(m, n));
    let tokens = info.prompt_tokens.or_else(|| {
        first(&[
            "prompt is too long:",
            "resulted in",
            "you requested",
            "your request has",
            "request (",
            "keep the first",
            "n_keep:",
        ])
    });
    let limit = info.context.or_else(|| {
        first(&[
            "tokens >",
            "maximum context length is",
            "context size (",
            "context length of only",
            "n_ctx:",
        ])
    });
    (tokens, limit)
}

/// One line of server text, safe to show: no credential, no newlines, bounded.
pub(crate) fn clean_message(text: &str, secret: Option<&Secret>) -> String {
    const MAX_CHARS: usize = 300;
    let scrubbed = match secret {
        Some(s) => s.scrub(text),
        None => text.to_owned(),
    };
    let one_line = scrubbed.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return "no details given".to_owned();
    }
    if one_line.chars().count() <= MAX_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(MAX_CHARS).collect();
    cut.push('…');
    cut
}

/// Turns a failed HTTP response into its error class.
///
/// `auth_hint` names where the credential comes from (for [`LlmError::Auth`]);
/// `secret` is scrubbed from anything the server says.
pub(crate) fn classify_http(
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    auth_hint: &str,
    secret: Option<&Secret>,
) -> LlmError {
    let info = parse_error_body(body);
    classify(status, &info, retry_after, auth_hint, secret)
}

/// Turns an error object that arrived inside a 200 stream (Anthropic's
/// `error` event, an OpenAI-compatible chunk with `error`) into its class.
pub(crate) fn classify_stream_error(
    value: &Value,
    auth_hint: &str,
    secret: Option<&Secret>,
) -> LlmError {
    let info = info_from_value(value, 0);
    // In-stream errors have no status of their own; infer it from the type.
    let status = match info.kind.as_str() {
        "overloaded_error" => 529,
        "rate_limit_error" => 429,
        "authentication_error" => 401,
        "permission_error" => 403,
        "billing_error" => 402,
        "invalid_request_error" | "not_found_error" => 400,
        "request_too_large" => 413,
        _ => match info.code.parse::<u16>() {
            Ok(code) if (400..600).contains(&code) => code,
            _ => 500,
        },
    };
    classify(status, &info, None, auth_hint, secret)
}

fn classify(
    status: u16,
    info: &ErrorInfo,
    retry_after: Option<Duration>,
    auth_hint: &str,
    secret: Option<&Secret>,
) -> LlmError {
    let message = clean_message(&info.message, secret);
    if is_overflow(status, info) {
        let (tokens, limit) = overflow_numbers(info);
        return LlmError::ContextOverflow {
            message,
            tokens,
            limit,
        };
    }
    let lower = info.message.to_lowercase();
    let kind = info.kind.as_str();
    let code = info.code.as_str();
    if kind == "overloaded_error" {
        return LlmError::Overloaded { message };
    }
    if kind == "billing_error"
        || kind == "insufficient_quota"
        || code == "insufficient_quota"
        || lower.contains("credit balance is too low")
    {
        return LlmError::Billing { status, message };
    }
    if matches!(kind, "authentication_error" | "permission_error") || code == "invalid_api_key" {
        return LlmError::Auth {
            status,
            message,
            hint: auth_hint.to_owned(),
        };
    }
    match status {
        401 | 403 => LlmError::Auth {
            status,
            message,
            hint: auth_hint.to_owned(),
        },
        402 => LlmError::Billing { status, message },
        429 => LlmError::RateLimited {
            retry_after,
            message,
        },
        529 => LlmError::Overloaded { message },
        408 | 409 | 500..=599 => LlmError::Server { status, message },
        _ if kind == "rate_limit_error" => LlmError::RateLimited {
            retry_after,
            message,
        },
        _ => LlmError::InvalidRequest { status, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> LlmError {
        classify_http(status, body, None, "ANTHROPIC_API_KEY", None)
    }

    fn overflow(status: u16, body: &str) -> (Option<u64>, Option<u64>) {
        match http(status, body) {
            LlmError::ContextOverflow { tokens, limit, .. } => (tokens, limit),
            other => panic!("not an overflow: {other:?} for {body}"),
        }
    }

    // Every body below is a real server's text, as reported in public issues.

    #[test]
    fn anthropic_prompt_too_long_is_an_overflow_with_numbers() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 1036683 tokens > 1000000 maximum"},"request_id":"req_011Cbro1hEUeFY2CEYiDrR1E"}"#;
        assert_eq!(overflow(400, body), (Some(1_036_683), Some(1_000_000)));
    }

    #[test]
    fn anthropic_request_too_large_is_an_overflow() {
        let body = r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#;
        assert_eq!(overflow(413, body), (None, None));
        // Cloudflare may answer 413 with HTML; the status alone decides.
        assert!(http(413, "<html>413 Request Entity Too Large</html>").is_context_overflow());
    }

    #[test]
    fn openai_context_length_exceeded_is_an_overflow() {
        let body = r#"{
  "error": {
    "message": "This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded"
  }
}"#;
        assert_eq!(overflow(400, body), (Some(4120), Some(4097)));
    }

    #[test]
    fn vllm_overflow_bodies_are_recognised() {
        let old = r#"{"object":"error","message":"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(overflow(400, old), (Some(6616), Some(6048)));
        let new = r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, your request has 8 input tokens plus 2045 'max_tokens'. Please reduce one or the other. (parameter=input_tokens, max_tokens, value=(8, 2045))","type":"BadRequestError","param":"input_tokens, max_tokens","code":400}}"#;
        assert_eq!(overflow(400, new), (Some(8), Some(2048)));
    }

    #[test]
    fn llama_cpp_and_ollama_overflow_bodies_are_recognised() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#;
        assert_eq!(overflow(400, llama), (Some(14429), Some(8192)));
        // Older llama.cpp answered the same with HTTP 500.
        let llama_500 = r#"{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":1407,"n_ctx":256}}"#;
        assert_eq!(overflow(500, llama_500), (Some(1407), Some(256)));
        let newer = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        assert!(http(400, newer).is_context_overflow());
        // Ollama wraps llama.cpp's body in a string.
        let ollama = r#"{"error":"{\"error\":{\"code\":400,\"message\":\"request (351 tokens) exceeds the available context size (256 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":351,\"n_ctx\":256}}"}"#;
        assert_eq!(overflow(400, ollama), (Some(351), Some(256)));
    }

    #[test]
    fn lm_studio_overflow_bodies_are_recognised() {
        let keep = r#"{"error":"Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context length of only 7866 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input."}"#;
        assert_eq!(overflow(400, keep), (Some(10136), Some(7866)));
        let n_keep = r#"{"error":"The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 10247 >= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter prompt."}"#;
        assert_eq!(overflow(400, n_keep), (Some(10247), Some(4096)));
    }

    #[test]
    fn status_classes() {
        let auth = http(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#,
        );
        assert!(matches!(auth, LlmError::Auth { status: 401, .. }));
        assert!(auth.to_string().contains("ANTHROPIC_API_KEY"));
        assert!(matches!(
            http(
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#
            ),
            LlmError::Auth { status: 403, .. }
        ));
        assert!(matches!(
            http(
                402,
                r#"{"type":"error","error":{"type":"billing_error","message":"Billing error"}}"#
            ),
            LlmError::Billing { .. }
        ));
        // Anthropic reports exhausted credit as a 400.
        assert!(matches!(
            http(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#
            ),
            LlmError::Billing { .. }
        ));
        // OpenAI reports exhausted quota as a 429 that must not be retried.
        let quota = http(
            429,
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert!(matches!(quota, LlmError::Billing { .. }));
        assert!(!quota.is_retryable());
        let limited = classify_http(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
            Some(Duration::from_secs(7)),
            "",
            None,
        );
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(7)));
        assert!(limited.is_retryable());
        assert!(limited.to_string().contains("wait 7 s"));
        assert!(matches!(
            http(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            LlmError::Overloaded { .. }
        ));
        assert!(matches!(
            http(
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#
            ),
            LlmError::Server { status: 500, .. }
        ));
        assert!(matches!(
            http(
                504,
                r#"{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}"#
            ),
            LlmError::Server { status: 504, .. }
        ));
        let invalid = http(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620"}}"#,
        );
        assert!(matches!(
            invalid,
            LlmError::InvalidRequest { status: 400, .. }
        ));
        assert!(!invalid.is_retryable());
        assert!(!http(401, "").is_retryable());
    }

    #[test]
    fn in_stream_errors_are_classified_by_type() {
        let v: Value = serde_json::from_str(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert!(matches!(
            classify_stream_error(&v, "", None),
            LlmError::Overloaded { .. }
        ));
        let v: Value = serde_json::from_str(r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#).unwrap();
        assert!(classify_stream_error(&v, "", None).is_context_overflow());
    }

    #[test]
    fn messages_are_one_line_bounded_and_never_hold_the_key() {
        let key = Secret::new("sk-live-abcdef123456");
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: sk-live-abcdef123456.\nYou can find your API key at https://platform.openai.com/account/api-keys. {}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#,
            "x".repeat(1000)
        );
        let err = classify_http(401, &body, None, "OPENAI_API_KEY", Some(&key));
        let shown = err.to_string();
        assert!(!shown.contains("sk-live-abcdef123456"), "{shown}");
        assert!(!shown.contains('\n'));
        assert!(shown.chars().count() < 500);
        assert!(shown.contains("OPENAI_API_KEY"));
    }

    #[test]
    fn garbage_bodies_never_panic() {
        for body in ["", "null", "[]", "{", "\"x\"", "{\"error\":3}", "<html>"] {
            for status in [400, 401, 413, 429, 500, 529, 600, 0] {
                let _ = http(status, body).to_string();
            }
        }
    }
}
