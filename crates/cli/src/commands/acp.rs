//! `whittle acp`: sessions for an editor, built exactly as the REPL builds
//! them (settings, model, sandbox, MCP servers, session log), with the
//! client's own MCP servers added to the configured ones.

use crate::args::AgentArgs;
use crate::commands::mcp::{self, Progress};
use crate::config::providers::{connect, models_with_keys};
use crate::config::setup::{self, Session};
use crate::config::{self, Settings};
use crate::ui::slash::{render_context, render_cost, uncompact_line};
use crate::ui::style::Style;
use futures::future::BoxFuture;
use whittle_acp::{
    ClientMcpServer, Host, HostError, HostSession, ListedSession, ModelChoice, ModelMenu,
    OpenRequest,
};
use whittle_agent::{Agent, Approver, EventSink};
use whittle_llm::ModelSpec;
use whittle_mcp::{McpServers, ServerEntry};
use whittle_tools::{CancellationToken, PermissionMode};

/// How the environment is read: a plain function, so sessions can move
/// between the runtime's threads.
type EnvFn = fn(&str) -> Option<String>;

/// Opens sessions with the flags `whittle acp` was started with.
pub struct CliHost {
    args: AgentArgs,
    env: EnvFn,
}

impl CliHost {
    pub fn new(args: AgentArgs, env: EnvFn) -> Self {
        CliHost { args, env }
    }
}

/// Builds a session as the REPL does. Not `Send` (the settings' readers
/// borrow the environment), so it runs on a thread of its own.
async fn open_session(
    args: AgentArgs,
    env_fn: EnvFn,
    request: OpenRequest,
    approver: Box<dyn Approver>,
) -> anyhow::Result<Box<dyn HostSession>> {
    let env = &env_fn;
    {
        let args = AgentArgs {
            cwd: Some(request.cwd.clone()),
            resume: request.resume.clone(),
            continue_session: false,
            prompt: None,
            ..args
        };
        let mut settings = config::load(&args, env, None)?;
        if let Some(w) = &settings.withheld {
            crate::ui::render::err_line(&w.ignored_notice());
        }
        for server in request.mcp_servers {
            let (name, entry) = server_entry(server);
            settings.mcp_servers.insert(name, entry);
        }
        let mcp = mcp::start_for_session(&settings, env, Progress::Problems).await?;
        let mut session = match setup::open(&settings, &args, env, approver, &mcp) {
            Ok(s) => s,
            Err(e) => {
                mcp.stop().await;
                return Err(e);
            }
        };
        session.ensure_logging()?;
        Ok(Box::new(CliSession {
            session,
            settings,
            mcp,
            env: env_fn,
        }))
    }
}

/// A client's MCP server as a config entry.
fn server_entry(server: ClientMcpServer) -> (String, ServerEntry) {
    match server {
        ClientMcpServer::Stdio {
            name,
            command,
            args,
            env,
        } => (
            name,
            ServerEntry {
                command: Some(command.display().to_string()),
                args,
                env,
                ..ServerEntry::default()
            },
        ),
        ClientMcpServer::Http { name, url, headers } => (
            name,
            ServerEntry {
                url: Some(url),
                headers,
                ..ServerEntry::default()
            },
        ),
    }
}

impl Host for CliHost {
    fn list_sessions(&self, cwd: &std::path::Path) -> Vec<ListedSession> {
        let dir = crate::config::state_dir_of(cwd).join("sessions");
        whittle_agent::list_sessions(&dir)
            .into_iter()
            .map(|s| ListedSession {
                id: s.id,
                cwd: cwd.to_path_buf(),
                updated_at: crate::commands::rewind::rfc3339(s.modified),
            })
            .collect()
    }

    fn open(
        &self,
        request: OpenRequest,
        approver: Box<dyn Approver>,
    ) -> BoxFuture<'_, Result<Box<dyn HostSession>, HostError>> {
        let (args, env) = (self.args.clone(), self.env);
        let handle = tokio::runtime::Handle::current();
        let opened = tokio::task::spawn_blocking(move || {
            handle
                .block_on(open_session(args, env, request, approver))
                .map_err(|e| HostError::new(crate::ui::render::error_line(&e)))
        });
        Box::pin(async move {
            opened
                .await
                .map_err(|e| HostError::new(format!("opening the session failed: {e}")))?
        })
    }
}

/// One editor session.
struct CliSession {
    session: Session,
    settings: Settings,
    mcp: McpServers,
    env: EnvFn,
}

impl CliSession {
    fn set_mode_now(&mut self, mode: PermissionMode) -> anyhow::Result<()> {
        self.settings.permission_mode = mode;
        let confinement = crate::config::sandboxing::confine(&self.settings, &self.env, false)?;
        let policy = setup::policy(&self.settings, &self.mcp)?;
        let agent = &mut self.session.agent;
        agent.set_sandbox(confinement.sandbox);
        agent.set_policy(policy);
        self.session.support = confinement.support;
        Ok(())
    }

    async fn run_command(
        &mut self,
        name: &str,
        arg: Option<&str>,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<String> {
        let prices = self.session.prices();
        let agent = &mut self.session.agent;
        Ok(match name {
            "context" => {
                let unit = crate::ui::repl::meter_unit(agent.config().meter);
                render_context(&agent.context_breakdown(), unit, Style::detect(false))
            }
            "cost" => render_cost(&agent.usage(), &prices),
            "report" => crate::commands::report::write_session_page(agent, prices, &self.settings)?
                .display()
                .to_string(),
            "sandbox" => {
                let (text, _) = crate::commands::sandbox_check::report(
                    &agent.config().sandbox,
                    self.session.support.as_ref(),
                    &self.settings.workspace,
                    &self.env,
                );
                text.trim_end().to_string()
            }
            "compact" if agent.history().is_empty() => "nothing to compact yet".to_string(),
            "compact" => {
                let report = agent.compact(arg, sink, cancel).await?;
                if report.applied() {
                    report.describe(Some(&self.settings.workspace))
                } else {
                    format!(
                        "the conversation was left as it was: {}",
                        report.describe(Some(&self.settings.workspace))
                    )
                }
            }
            "uncompact" => uncompact_line(&agent.uncompact()?),
            "rewind" => crate::commands::rewind::rewind_by_command(agent, arg, sink).await?,
            "diff" => crate::commands::rewind::session_diff_text(agent, &self.settings.workspace)?,
            other => anyhow::bail!("unknown command /{other}"),
        })
    }
}

impl CliSession {
    fn model_menu(&self) -> ModelMenu {
        let mut specs = vec![self.session.spec.clone()];
        specs.extend(self.settings.model.iter().map(|c| c.spec.clone()));
        specs.extend(models_with_keys(&self.env));
        let mut choices: Vec<ModelChoice> = Vec::new();
        for spec in specs {
            let id = spec.to_string();
            if !choices.iter().any(|c| c.id == id) {
                choices.push(ModelChoice {
                    id,
                    name: setup::model_label(&spec),
                });
            }
        }
        ModelMenu {
            current: self.session.spec.to_string(),
            choices,
        }
    }

    fn switch_model(&mut self, id: &str) -> anyhow::Result<()> {
        let spec: ModelSpec = id.parse()?;
        let connection = connect(&spec, &self.settings)?;
        let config = setup::agent_config(&self.settings, &spec, connection.context_window, "");
        self.session
            .agent
            .switch_model(connection.provider, &config);
        self.session.spec = spec;
        self.session.local = connection.local;
        Ok(())
    }
}

impl HostSession for CliSession {
    fn models(&self) -> ModelMenu {
        self.model_menu()
    }

    fn set_model(&mut self, id: &str) -> Result<(), HostError> {
        self.switch_model(id)
            .map_err(|e| HostError::new(crate::ui::render::error_line(&e)))
    }

    fn agent(&mut self) -> &mut Agent {
        &mut self.session.agent
    }

    fn mode(&self) -> PermissionMode {
        self.settings.permission_mode
    }

    fn set_mode(&mut self, mode: PermissionMode) -> Result<(), HostError> {
        self.set_mode_now(mode)
            .map_err(|e| HostError::new(crate::ui::render::error_line(&e)))
    }

    fn command<'a>(
        &'a mut self,
        name: &'a str,
        arg: Option<&'a str>,
        sink: &'a mut dyn EventSink,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            self.run_command(name, arg, sink, cancel)
                .await
                .map_err(|e| HostError::new(crate::ui::render::error_line(&e)))
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let CliSession { session, mcp, .. } = *self;
            drop(session);
            mcp.stop().await;
        })
    }
}
