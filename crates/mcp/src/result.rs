//! A `tools/call` result as the model sees it. Text stays text, whole;
//! images become image blocks when the model APIs take their type; what has
//! no block of its own (audio, binary resources, links) becomes a line that
//! names it; `structuredContent` is shown as JSON when there is no text.
//! Nothing is cut here: a huge result goes whole to the pipeline, which
//! persists it with a preview.

use serde_json::Value;
use whittle_protocol::Image;
use whittle_tools::ToolOutput;

/// Image types the Anthropic and OpenAI APIs accept in a tool result.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Base64 characters of the largest image sent on (the APIs take about 5 MB).
const MAX_IMAGE_BASE64: usize = 5 * 1024 * 1024;

/// Why an answer is not a tool result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotAResult {
    /// The answer is not a JSON object.
    #[error("expected a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// The server wants something whittle does not offer.
    #[error(
        "it asks for {0:?}, which whittle does not answer (it offers no elicitation, sampling or tasks)"
    )]
    Unanswerable(String),
    /// `content` is there but not a list.
    #[error("its content is {0}, not a list")]
    ContentNotAList(&'static str),
}

/// Maps one result; the error says why it is not a tool result.
pub fn to_output(result: &Value) -> Result<ToolOutput, NotAResult> {
    let Some(object) = result.as_object() else {
        return Err(NotAResult::NotAnObject(whittle_protocol::json_kind(result)));
    };
    if let Some(kind) = object.get("resultType").and_then(Value::as_str)
        && kind != "complete"
    {
        return Err(NotAResult::Unanswerable(kind.to_owned()));
    }
    let content = match object.get("content") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(other) => {
            return Err(NotAResult::ContentNotAList(whittle_protocol::json_kind(
                other,
            )));
        }
    };
    let mut lines: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut has_text = false;
    for item in content {
        match item.get("type").and_then(Value::as_str) {
            Some("text") => {
                has_text = true;
                lines.push(str_field(item, "text").to_owned());
            }
            Some("image") => lines.push(image(item, &mut images)),
            Some("audio") => lines.push(format!(
                "[audio: {}, {} not shown (the model cannot hear)]",
                mime(item),
                base64_size(str_field(item, "data"))
            )),
            Some("resource") => {
                let (line, text) = resource(item.get("resource").unwrap_or(&Value::Null));
                has_text |= text;
                lines.push(line);
            }
            Some("resource_link") => lines.push(resource_link(item)),
            _ => lines.push(item.to_string()),
        }
    }
    if !has_text && let Some(structured) = object.get("structuredContent") {
        lines.push(structured.to_string());
    }
    let text = if lines.is_empty() {
        "(the tool returned no content)".to_owned()
    } else {
        lines.join("\n")
    };
    let is_error = object
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut output = if is_error {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    };
    output.images = images;
    Ok(output)
}

fn str_field<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

fn mime(item: &Value) -> &str {
    match str_field(item, "mimeType") {
        "" => "type unknown",
        m => m,
    }
}

/// An image block when the APIs take it, else a line saying why not.
fn image(item: &Value, images: &mut Vec<Image>) -> String {
    let data = str_field(item, "data");
    let mime = mime(item);
    let size = base64_size(data);
    if !IMAGE_TYPES.contains(&mime) {
        return format!(
            "[image: {mime}, {size}; not shown: the model takes png, jpeg, gif and webp]"
        );
    }
    if data.is_empty() || data.len() > MAX_IMAGE_BASE64 || !looks_base64(data) {
        return format!("[image: {mime}, {size}; not shown: empty, too large or not base64]");
    }
    images.push(Image {
        source: serde_json::json!({"type": "base64", "media_type": mime, "data": data}),
        extra: Default::default(),
    });
    format!("[image {}: {mime}, {size}, attached]", images.len())
}

fn looks_base64(data: &str) -> bool {
    data.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'))
}

/// An embedded resource: its text under a line naming it, or a line for a
/// binary one. The flag says whether it carried text.
fn resource(res: &Value) -> (String, bool) {
    let uri = str_field(res, "uri");
    let mime = mime(res);
    match res.get("text").and_then(Value::as_str) {
        Some(text) => (format!("[resource {uri} ({mime})]\n{text}"), true),
        None => (
            format!(
                "[resource {uri}: binary, {mime}, {}; not shown]",
                base64_size(str_field(res, "blob"))
            ),
            false,
        ),
    }
}

fn resource_link(item: &Value) -> String {
    let mut line = format!("[resource link: {}", str_field(item, "uri"));
    let name = str_field(item, "name");
    if !name.is_empty() {
        line.push_str(&format!(" ({name})"));
    }
    let description = str_field(item, "description");
    if !description.is_empty() {
        line.push_str(&format!(": {description}"));
    }
    line.push(']');
    line
}

/// The decoded size of base64 text, for people.
fn base64_size(data: &str) -> String {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    let bytes = (data.len() / 4 * 3).saturating_sub(padding);
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_type_maps_to_text_or_an_image() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/tiff"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "a file"},
            {"type": "hologram", "beam": 1}
        ]});
        let out = to_output(&r).unwrap();
        assert!(!out.is_error);
        assert_eq!(out.images.len(), 1);
        assert_eq!(out.images[0].source["media_type"], "image/png");
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines[0], "hello");
        assert_eq!(lines[1], "[image 1: image/png, 8 bytes, attached]");
        assert!(lines[2].contains("image/tiff") && lines[2].contains("not shown"));
        assert!(lines[3].starts_with("[audio: audio/wav"));
        assert_eq!(lines[4], "[resource file:///a.txt (text/plain)]");
        assert_eq!(lines[5], "inside");
        assert!(lines[6].starts_with("[resource file:///b.bin: binary"));
        assert_eq!(lines[7], "[resource link: file:///c (c): a file]");
        assert_eq!(lines[8], r#"{"type":"hologram","beam":1}"#);
    }

    #[test]
    fn structured_content_shows_when_there_is_no_text() {
        let r = json!({"content": [], "structuredContent": {"temp": 21}});
        assert_eq!(to_output(&r).unwrap().content, r#"{"temp":21}"#);
        let r = json!({"content": [{"type": "text", "text": "21 degrees"}], "structuredContent": {"temp": 21}});
        assert_eq!(to_output(&r).unwrap().content, "21 degrees");
        let r = json!({});
        assert_eq!(
            to_output(&r).unwrap().content,
            "(the tool returned no content)"
        );
    }

    #[test]
    fn errors_and_bad_answers() {
        let r = json!({"content": [{"type": "text", "text": "no such file"}], "isError": true});
        let out = to_output(&r).unwrap();
        assert!(out.is_error);
        assert_eq!(out.content, "no such file");
        assert!(
            to_output(&json!([1]))
                .unwrap_err()
                .to_string()
                .contains("JSON object")
        );
        assert!(
            to_output(&json!({"content": "x"}))
                .unwrap_err()
                .to_string()
                .contains("not a list")
        );
        assert!(
            to_output(&json!({"resultType": "input_required"}))
                .unwrap_err()
                .to_string()
                .contains("input_required")
        );
    }

    #[test]
    fn text_is_never_cut() {
        let big = "x".repeat(3_000_000);
        let r = json!({"content": [{"type": "text", "text": big}]});
        assert_eq!(to_output(&r).unwrap().content.len(), 3_000_000);
    }
}
