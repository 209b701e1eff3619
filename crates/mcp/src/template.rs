//! `${VAR}` in header and environment values, expanded from whittle's own
//! environment only when a server is started, into a [`Secret`] that never
//! prints its value.

use std::fmt;

/// A value as written in the config: literal text and `${VAR}` references.
#[derive(Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    written: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(String),
}

/// Why a config value is not a template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `${` with no `}` after it.
    #[error("`${{` without a closing `}}` in {0:?}")]
    Unclosed(String),
    /// `${...}` holding something other than a variable name.
    #[error("`${{{0}}}` is not a variable name (letters, digits and `_`)")]
    NotAName(String),
}

/// A variable a template refers to is not set (its name, never a value).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not set")]
pub struct Unset(pub String);

/// An environment: the value of a variable, if set.
pub type Env = dyn Fn(&str) -> Option<String> + Send + Sync;

/// What expanding a template needs: the value of an environment variable.
pub type EnvLookup<'a> = &'a Env;

impl Template {
    /// Parses `text`; `$` not followed by `{` is literal, `$${` is a literal `${`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(escaped) = after.strip_prefix("${") {
                literal.push_str("${");
                rest = escaped;
            } else if let Some(inner) = after.strip_prefix('{') {
                let Some(end) = inner.find('}') else {
                    return Err(TemplateError::Unclosed(text.to_owned()));
                };
                let name = &inner[..end];
                let plain = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit());
                if !plain {
                    return Err(TemplateError::NotAName(name.to_owned()));
                }
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var(name.to_owned()));
                rest = &inner[end + 1..];
            } else {
                literal.push('$');
                rest = after;
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template {
            parts,
            written: text.to_owned(),
        })
    }

    /// The value as written in the config (safe to show: it names variables,
    /// never their values).
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// The variables it refers to.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The value with every variable replaced; the error names the first
    /// variable that is not set.
    pub fn expand(&self, env: EnvLookup<'_>) -> Result<Secret, Unset> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => match env(v) {
                    Some(value) => out.push_str(&value),
                    None => return Err(Unset(v.clone())),
                },
            }
        }
        Ok(Secret(out))
    }
}

impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.written)
    }
}

/// An expanded value: it may hold a token, so Debug shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_and_keeps_the_rest() {
        let t = Template::parse("Bearer ${TOKEN}!").unwrap();
        assert_eq!(t.expand(&env).unwrap().expose(), "Bearer s3cret!");
        assert_eq!(t.variables().collect::<Vec<_>>(), ["TOKEN"]);
        let t = Template::parse("$HOME $5 $${TOKEN} ${EMPTY}x").unwrap();
        assert_eq!(t.expand(&env).unwrap().expose(), "$HOME $5 ${TOKEN} x");
        assert_eq!(
            Template::parse("${NOPE}").unwrap().expand(&env),
            Err(Unset("NOPE".into()))
        );
    }

    #[test]
    fn bad_references_are_errors() {
        assert!(Template::parse("${TOKEN").is_err());
        assert!(Template::parse("${}").is_err());
        assert!(Template::parse("${A-B}").is_err());
        assert!(Template::parse("${1A}").is_err());
    }

    #[test]
    fn secrets_and_templates_never_print_values() {
        let t = Template::parse("Bearer ${TOKEN}").unwrap();
        let s = t.expand(&env).unwrap();
        assert!(!format!("{s:?}").contains("s3cret"));
        assert_eq!(format!("{t:?}"), "\"Bearer ${TOKEN}\"");
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_says_why(text in "\\PC{0,40}") {
            if let Ok(t) = Template::parse(&text) {
                // Without `${`, a template is its own text.
                if !text.contains("${") {
                    let expanded = t.expand(&env).unwrap();
                    proptest::prop_assert_eq!(expanded.expose(), text.as_str());
                }
            }
        }
    }
}
