//! `[mcp_servers.NAME]` as written in a config file, and the checked form
//! the rest of the crate uses.
//!
//! ```toml
//! [mcp_servers.fs]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! env = { KEY = "value" }
//! startup_timeout_s = 20
//! tool_timeout_s = 120
//! [mcp_servers.remote]
//! url = "https://example.invalid/mcp"
//! headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::template::Template;

/// Seconds a server has to start and list its tools unless configured.
pub const DEFAULT_STARTUP_TIMEOUT_S: f64 = 30.0;
/// Seconds one tool call may take unless configured.
pub const DEFAULT_TOOL_TIMEOUT_S: f64 = 120.0;
/// Longest server name: it is part of every tool name, which may have 64 characters.
pub const MAX_SERVER_NAME: usize = 32;

/// One `[mcp_servers.NAME]` table as written. Unknown keys are errors, as
/// everywhere in the config: a typo should not silently do nothing.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it, `${VAR}` expanded from whittle's own.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The folder it starts in (default: the workspace).
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable HTTP server.
    pub url: Option<String>,
    /// HTTP headers sent with every request, `${VAR}` expanded.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds to start and list tools.
    pub startup_timeout_s: Option<f64>,
    /// Seconds one tool call may take.
    pub tool_timeout_s: Option<f64>,
    /// `false` turns off a server a broader config declared.
    pub enabled: Option<bool>,
}

/// A server's name: what its tools are prefixed with. Letters, digits,
/// `_` and `-`, so that `mcp__NAME__TOOL` needs no rewriting.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerName(String);

impl ServerName {
    /// Checks a name from the config.
    pub fn new(name: &str) -> Result<ServerName, ConfigError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_SERVER_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if ok {
            Ok(ServerName(name.to_owned()))
        } else {
            Err(ConfigError::BadName(name.to_owned()))
        }
    }

    /// The name as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How whittle reaches a server.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on top of the few whittle passes through.
        env: BTreeMap<String, Template>,
        /// Where it starts; `None` is the workspace.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// `http://` or `https://`.
        url: String,
        /// Headers, expanded only when connecting.
        headers: BTreeMap<String, Template>,
    },
}

/// One server, checked: a name, a transport and its limits.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// The name from `[mcp_servers.NAME]`.
    pub name: ServerName,
    /// How to reach it.
    pub transport: Transport,
    /// How long starting and listing tools may take.
    pub startup_timeout: Duration,
    /// How long one call may take before it is cancelled.
    pub tool_timeout: Duration,
}

impl ServerConfig {
    /// Checks one entry; `Ok(None)` when it is turned off with `enabled = false`.
    pub fn from_entry(
        name: &str,
        entry: &ServerEntry,
    ) -> Result<Option<ServerConfig>, ConfigError> {
        let name = ServerName::new(name)?;
        let problem = |message: &str| ConfigError::Invalid {
            server: name.to_string(),
            message: message.to_owned(),
        };
        let transport = match (&entry.command, &entry.url) {
            (Some(_), Some(_)) => return Err(problem("give either `command` or `url`, not both")),
            (None, None) => {
                return Err(problem(
                    "give `command` (a program speaking MCP on stdio) or `url` (a streamable HTTP endpoint)",
                ));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(problem("`command` is empty"));
                }
                if !entry.headers.is_empty() {
                    return Err(problem(
                        "`headers` are for `url` servers; use `env` for a command",
                    ));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: entry.args.clone(),
                    env: templates(&name, &entry.env)?,
                    cwd: entry.cwd.clone(),
                }
            }
            (None, Some(url)) => {
                if !entry.args.is_empty() || !entry.env.is_empty() || entry.cwd.is_some() {
                    return Err(problem(
                        "`args`, `env` and `cwd` are for `command` servers; a `url` server takes `headers`",
                    ));
                }
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                    return Err(problem("`url` must start with http:// or https://"));
                }
                Transport::Http {
                    url: url.clone(),
                    headers: templates(&name, &entry.headers)?,
                }
            }
        };
        if entry.enabled == Some(false) {
            return Ok(None);
        }
        Ok(Some(ServerConfig {
            transport,
            startup_timeout: seconds(
                &name,
                "startup_timeout_s",
                entry.startup_timeout_s,
                DEFAULT_STARTUP_TIMEOUT_S,
            )?,
            tool_timeout: seconds(
                &name,
                "tool_timeout_s",
                entry.tool_timeout_s,
                DEFAULT_TOOL_TIMEOUT_S,
            )?,
            name,
        }))
    }

    /// How the server is started or reached, for `whittle mcp list`. Never
    /// shows an expanded value: templates are shown as written.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut words = vec![command.clone()];
                words.extend(args.iter().cloned());
                words.join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

fn templates(
    server: &ServerName,
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Template>, ConfigError> {
    values
        .iter()
        .map(|(k, v)| {
            Template::parse(v)
                .map(|t| (k.clone(), t))
                .map_err(|problem| ConfigError::Invalid {
                    server: server.to_string(),
                    message: format!("{k}: {problem}"),
                })
        })
        .collect()
}

fn seconds(
    server: &ServerName,
    key: &str,
    given: Option<f64>,
    default: f64,
) -> Result<Duration, ConfigError> {
    let s = given.unwrap_or(default);
    // A day is far beyond any sensible wait; it also keeps Duration happy.
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(ConfigError::Invalid {
            server: server.to_string(),
            message: format!("{key} must be above 0 and at most 86400 seconds, not {s}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(toml_like: impl FnOnce(&mut ServerEntry)) -> ServerEntry {
        let mut e = ServerEntry::default();
        toml_like(&mut e);
        e
    }

    #[test]
    fn a_stdio_and_an_http_server() {
        let fs = entry(|e| {
            e.command = Some("npx".into());
            e.args = vec!["-y".into(), "server".into()];
            e.env.insert("KEY".into(), "${HOME}/x".into());
            e.tool_timeout_s = Some(5.0);
        });
        let c = ServerConfig::from_entry("fs", &fs).unwrap().unwrap();
        assert_eq!(c.tool_timeout, Duration::from_secs(5));
        assert_eq!(
            c.startup_timeout,
            Duration::from_secs_f64(DEFAULT_STARTUP_TIMEOUT_S)
        );
        assert_eq!(c.describe(), "npx -y server");
        let remote = entry(|e| {
            e.url = Some("https://example.invalid/mcp".into());
            e.headers
                .insert("Authorization".into(), "Bearer ${TOKEN}".into());
        });
        let c = ServerConfig::from_entry("remote", &remote)
            .unwrap()
            .unwrap();
        assert!(matches!(c.transport, Transport::Http { .. }));
        assert_eq!(c.describe(), "https://example.invalid/mcp");
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let both = entry(|e| {
            e.command = Some("x".into());
            e.url = Some("http://x".into());
        });
        let cases: Vec<(&str, ServerEntry, &str)> = vec![
            ("ok", ServerEntry::default(), "give `command`"),
            ("ok", both, "not both"),
            (
                "ok",
                entry(|e| e.url = Some("ftp://x".into())),
                "http:// or https://",
            ),
            (
                "ok",
                entry(|e| {
                    e.url = Some("http://x".into());
                    e.args = vec!["a".into()];
                }),
                "`command` servers",
            ),
            (
                "ok",
                entry(|e| {
                    e.command = Some("x".into());
                    e.headers.insert("A".into(), "b".into());
                }),
                "`url` servers",
            ),
            (
                "ok",
                entry(|e| {
                    e.command = Some("x".into());
                    e.tool_timeout_s = Some(0.0);
                }),
                "tool_timeout_s",
            ),
            (
                "ok",
                entry(|e| {
                    e.command = Some("x".into());
                    e.env.insert("A".into(), "${".into());
                }),
                "A:",
            ),
            (
                "bad name",
                entry(|e| e.command = Some("x".into())),
                "bad name",
            ),
            ("", entry(|e| e.command = Some("x".into())), "letters"),
        ];
        for (name, e, expect) in cases {
            let err = ServerConfig::from_entry(name, &e).unwrap_err().to_string();
            assert!(err.contains(expect), "{name}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn disabled_servers_are_checked_then_left_out() {
        let off = entry(|e| {
            e.command = Some("x".into());
            e.enabled = Some(false);
        });
        assert_eq!(ServerConfig::from_entry("x", &off).unwrap(), None);
        let off_and_bad = entry(|e| e.enabled = Some(false));
        assert!(ServerConfig::from_entry("x", &off_and_bad).is_err());
    }

    #[test]
    fn server_names_are_bounded_and_plain() {
        assert!(ServerName::new("fs_2-b").is_ok());
        assert!(ServerName::new(&"a".repeat(MAX_SERVER_NAME)).is_ok());
        assert!(ServerName::new(&"a".repeat(MAX_SERVER_NAME + 1)).is_err());
        assert!(ServerName::new("a.b").is_err());
        assert!(ServerName::new("ä").is_err());
    }
}
