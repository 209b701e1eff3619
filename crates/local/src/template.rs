//! The chat template: the model's own `tokenizer.chat_template` (Jinja), rendered with
//! minijinja configured like Hugging Face's renderer, with a ChatML fallback.
//!
//! Hugging Face renders templates with `trim_blocks` and `lstrip_blocks`, Python string
//! methods (`.strip()`, `.startswith()`, `.items()`) and a `raise_exception` function;
//! the same setup here lets GGUF templates written for it render unchanged.

use crate::error::LocalError;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, Error, ErrorKind, Value, context};
use serde::Serialize;

/// The template used when a GGUF has no `tokenizer.chat_template`: ChatML
/// (`<|im_start|>role\ncontent<|im_end|>\n`), which SmolLM2, Qwen2 and many fine-tunes use.
/// It has no tool role, so tool results are sent as user text.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// One message as chat templates expect it: `{"role": ..., "content": ...}` plus, for the
/// `tool` role, the id and name of the call it answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TemplateMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// For `tool` messages: the id of the tool_use answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `tool` messages: the tool's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl TemplateMessage {
    /// A message with just a role and text.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        TemplateMessage {
            role: role.to_string(),
            content: content.into(),
            tool_call_id: None,
            name: None,
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    fallback: bool,
    tool_role: bool,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("fallback", &self.fallback)
            .field("tool_role", &self.tool_role)
            .field("source_chars", &self.source.chars().count())
            .finish()
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

impl ChatTemplate {
    /// Compiles `source`, or the ChatML fallback when it is `None`. `bos_token` and
    /// `eos_token` are the strings templates see as `bos_token` / `eos_token`.
    pub fn new(source: Option<&str>, bos_token: &str, eos_token: &str) -> Result<Self, LocalError> {
        let fallback = source.is_none();
        let source = source.unwrap_or(CHATML_TEMPLATE).to_string();
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| {
                LocalError::Template(whittle_protocol::first_line(&e.to_string()).to_string())
            })?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        minijinja_contrib::add_to_environment(&mut env);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned("chat", source.clone())
            .map_err(|e| {
                LocalError::Template(whittle_protocol::first_line(&e.to_string()).to_string())
            })?;
        let tool_role = source.contains("'tool'") || source.contains("\"tool\"");
        Ok(ChatTemplate {
            env,
            source,
            fallback,
            tool_role,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Whether this is the ChatML fallback rather than the file's own template.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// Whether the template handles `tool` role messages (it mentions the role by name),
    /// so tool results can go back in it rather than as user text.
    pub fn has_tool_role(&self) -> bool {
        self.tool_role
    }

    /// The template's Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders messages into prompt text; `add_generation_prompt` appends the opening of
    /// the assistant's turn.
    pub fn render(
        &self,
        messages: &[TemplateMessage],
        add_generation_prompt: bool,
    ) -> Result<String, LocalError> {
        let template = self.env.get_template("chat").map_err(|e| {
            LocalError::Template(whittle_protocol::first_line(&e.to_string()).to_string())
        })?;
        template
            .render(context! {
                messages => Value::from(Serde(messages)),
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token.as_str(),
                eos_token => self.eos_token.as_str(),
            })
            .map_err(|e| {
                LocalError::Template(whittle_protocol::first_line(&e.to_string()).to_string())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs() -> Vec<TemplateMessage> {
        vec![
            TemplateMessage::new("system", "Be brief."),
            TemplateMessage::new("user", "Hi"),
        ]
    }

    #[test]
    fn chatml_fallback_renders() {
        let t = ChatTemplate::new(None, "", "<|im_end|>").unwrap();
        assert!(t.is_fallback());
        assert!(!t.has_tool_role());
        assert_eq!(
            t.render(&msgs(), true).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert!(!t.render(&msgs(), false).unwrap().ends_with("assistant\n"));
    }

    #[test]
    fn python_methods_trim_blocks_and_raise_exception() {
        let src = "{% for m in messages %}\n  {% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}\n{{ m.content.strip().upper() }}|{% endfor %}";
        let t = ChatTemplate::new(Some(src), "<s>", "</s>").unwrap();
        assert_eq!(
            t.render(&[TemplateMessage::new("user", "  hi ")], false)
                .unwrap(),
            "HI|"
        );
        let err = t.render(&msgs(), false).unwrap_err();
        assert!(err.to_string().contains("no system role"), "{err}");
    }

    #[test]
    fn tool_role_is_detected_and_rendered() {
        let src = "{% for m in messages %}{% if m.role == 'tool' %}<tool_response name={{ m.name }} id={{ m.tool_call_id }}>{{ m.content }}</tool_response>{% else %}{{ m.content }}{% endif %}{% endfor %}{{ bos_token }}";
        let t = ChatTemplate::new(Some(src), "<s>", "</s>").unwrap();
        assert!(t.has_tool_role());
        let mut m = TemplateMessage::new("tool", "ok");
        m.tool_call_id = Some("t1".into());
        m.name = Some("bash".into());
        assert_eq!(
            t.render(&[m], false).unwrap(),
            "<tool_response name=bash id=t1>ok</tool_response><s>"
        );
    }

    #[test]
    fn broken_template_is_an_error() {
        let err = ChatTemplate::new(Some("{% for %}"), "", "").unwrap_err();
        assert!(matches!(err, LocalError::Template(_)));
    }

    /// The shape of Qwen2.5's template: tool messages grouped into one user turn.
    const QWEN25_STYLE: &str = r#"{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
    {{- '<|im_start|>system\nYou are Qwen.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

    #[test]
    fn renders_a_qwen25_style_template_with_tool_messages() {
        let t = ChatTemplate::new(Some(QWEN25_STYLE), "", "<|im_end|>").unwrap();
        assert!(t.has_tool_role());
        let mut a = TemplateMessage::new("tool", "x");
        a.name = Some("bash".into());
        let b = TemplateMessage::new("tool", "y");
        let messages = [
            TemplateMessage::new("user", "go"),
            TemplateMessage::new("assistant", "<tool_call>\n{}\n</tool_call>"),
            a,
            b,
        ];
        assert_eq!(
            t.render(&messages, true).unwrap(),
            "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response>\n<tool_response>\ny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        );
    }
}
