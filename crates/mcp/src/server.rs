//! One configured server over the session: started once, restarted once
//! on the next use after it died, then given up on with a line that says
//! why. Calls never hold the lock while they run, so a hung call does not
//! block the server's other tools from failing fast.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex;
use whittle_tools::CancellationToken;

use crate::catalog::Catalog;
use crate::config::ServerConfig;
use crate::connection::{Connection, StartOptions};
use crate::error::{CallError, StartError};

/// Restarts allowed after a server died.
const RESTARTS: u32 = 1;

enum State {
    Up(Arc<Connection>),
    Down {
        reason: String,
        /// Whether the next use may start it again.
        may_restart: bool,
    },
}

/// A server and its connection, if any.
pub struct McpServer {
    config: ServerConfig,
    options: Arc<StartOptions>,
    state: Mutex<State>,
    restarts: Mutex<u32>,
}

/// How a server's start went, for the progress line and `whittle mcp list`.
#[derive(Clone, Debug, PartialEq)]
pub enum StartOutcome {
    /// Running, with its tools.
    Ready {
        /// Protocol revision and server identity.
        peer: String,
        /// The tools it offers and the ones left out.
        catalog: Catalog,
    },
    /// Not running.
    Failed(StartError),
}

impl McpServer {
    /// Starts the server and lists its tools within its startup timeout.
    pub async fn start(
        config: ServerConfig,
        options: Arc<StartOptions>,
    ) -> (Arc<McpServer>, StartOutcome) {
        let (state, outcome) = match open_and_list(&config, &options).await {
            Ok((connection, catalog)) => {
                let peer = connection.describe_peer();
                (
                    State::Up(Arc::new(connection)),
                    StartOutcome::Ready { peer, catalog },
                )
            }
            Err(e) => (
                State::Down {
                    reason: e.to_string(),
                    may_restart: false,
                },
                StartOutcome::Failed(e),
            ),
        };
        let server = Arc::new(McpServer {
            config,
            options,
            state: Mutex::new(state),
            restarts: Mutex::new(0),
        });
        (server, outcome)
    }

    /// The server's config.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Calls `tool` with `arguments`; restarts the server first if it died
    /// since the last call and has not been restarted before.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let connection = self.connection(cancel).await?;
        let result = connection
            .call(tool, arguments, self.config.tool_timeout, cancel)
            .await;
        if let Err(CallError::Died { reason, .. }) = &result {
            let may_restart = *self.restarts.lock().await < RESTARTS;
            *self.state.lock().await = State::Down {
                reason: reason.clone(),
                may_restart,
            };
            return Err(CallError::Died {
                server: self.config.name.to_string(),
                reason: if may_restart {
                    format!("{reason}; it will be restarted on the next call")
                } else {
                    format!("{reason}; it was restarted once already and stays stopped")
                },
            });
        }
        result
    }

    /// The live connection, restarting the server once if it is down.
    async fn connection(&self, cancel: &CancellationToken) -> Result<Arc<Connection>, CallError> {
        let mut state = self.state.lock().await;
        if let State::Up(c) = &*state {
            if !c.is_closed() {
                return Ok(Arc::clone(c));
            }
            let reason = c.failure().await;
            let may_restart = *self.restarts.lock().await < RESTARTS;
            *state = State::Down {
                reason,
                may_restart,
            };
        }
        let State::Down {
            reason,
            may_restart,
        } = &*state
        else {
            return Err(self.unavailable("in an unknown state"));
        };
        if !may_restart {
            return Err(self.unavailable(reason));
        }
        *self.restarts.lock().await += 1;
        let restarted = tokio::select! {
            r = open_and_list(&self.config, &self.options) => r,
            _ = cancel.cancelled() => {
                return Err(CallError::Cancelled { server: self.config.name.to_string() });
            }
        };
        match restarted {
            Ok((connection, _)) => {
                let connection = Arc::new(connection);
                *state = State::Up(Arc::clone(&connection));
                Ok(connection)
            }
            Err(e) => {
                let reason = format!("it stopped and could not be restarted: {e}");
                *state = State::Down {
                    reason: reason.clone(),
                    may_restart: false,
                };
                Err(self.unavailable(&reason))
            }
        }
    }

    fn unavailable(&self, reason: &str) -> CallError {
        CallError::Unavailable {
            server: self.config.name.to_string(),
            reason: reason.to_owned(),
        }
    }

    /// `running`, or `stopped: REASON`, for `whittle mcp list`.
    pub async fn state_line(&self) -> String {
        let reason = match &*self.state.lock().await {
            State::Up(c) if !c.is_closed() => return "running".to_owned(),
            State::Up(c) => c.failure().await,
            State::Down { reason, .. } => reason.clone(),
        };
        let own = format!("mcp server {}: ", self.config.name);
        format!("stopped: {}", reason.strip_prefix(&own).unwrap_or(&reason))
    }

    /// Stops the server (closing stdin, then killing its process group),
    /// once the cancellations of calls it was given up on were sent.
    pub async fn stop(&self) {
        let mut state = self.state.lock().await;
        if let State::Up(c) = &*state {
            c.shutdown().await;
        }
        *state = State::Down {
            reason: "stopped by whittle".into(),
            may_restart: false,
        };
    }
}

async fn open_and_list(
    config: &ServerConfig,
    options: &StartOptions,
) -> Result<(Connection, Catalog), StartError> {
    let work = async {
        let connection = Connection::open(config, options).await?;
        let catalog = connection.list_tools().await?;
        Ok((connection, catalog))
    };
    match tokio::time::timeout(config.startup_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(StartError::Timeout {
            server: config.name.to_string(),
            seconds: config.startup_timeout.as_secs().max(1),
        }),
    }
}
