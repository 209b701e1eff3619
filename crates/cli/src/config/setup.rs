//! Assembling an agent from the settings: provider, limits, tools,
//! permissions, hooks, and the session to continue.

use crate::args::{AgentArgs, Preset};
use crate::config::providers::{Connection, choose_model, connect};
use crate::config::{DEFAULT_MAX_TOKENS_CAP, Env, Settings};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use whittle_agent::{
    Agent, AgentConfig, Approver, CompactTool, EMBEDDED_TOOLS, Hooks, MeterChoice,
    ProjectInstructions, TaskTool, UsageMeter, embedded_system_prompt, environment_block,
    find_session, session_system_prompt,
};
use whittle_context::{Limits, TokenBudget, TokenMeter};
use whittle_llm::{ModelSpec, Prices, ProviderKind, model_facts_with};
use whittle_mcp::{Installation, McpServers, TOOL_SEARCH_NAME};
use whittle_protocol::Redactor;
use whittle_protocol::tool_names;
use whittle_tools::{PermissionPolicy, Sandbox, Skills, ToolRegistry};

/// Tools the policy lets through in every mode: they touch no files themselves.
const TRUSTED_TOOLS: [&str; 3] = [tool_names::COMPACT, tool_names::TASK, TOOL_SEARCH_NAME];

/// An agent ready to take input.
pub struct Session {
    /// The agent.
    pub agent: Agent,
    /// The model it talks to.
    pub spec: ModelSpec,
    /// The embedded model, when that is the provider.
    pub local: Option<Arc<whittle_llm::LocalProvider>>,
    /// Set when an earlier session was continued: its id and how many
    /// unanswered tool calls were given an "interrupted" result.
    pub resumed: Option<(String, usize)>,
    /// What the kernel's sandbox can do, when commands are confined.
    pub support: Option<whittle_sandbox::Support>,
    /// How the MCP servers' tools were offered to the model.
    pub mcp: Installation,
}

impl Session {
    /// The model as a person should read it: `local` alone means the
    /// embedded default, so that one is named.
    pub fn model_label(&self) -> String {
        model_label(&self.spec)
    }

    /// The prices `/cost` and `-p --output-format json` estimate with.
    pub fn prices(&self) -> Prices {
        Prices::for_provider(self.spec.provider)
    }

    /// Starts the session log unless one is open (a new session is logged
    /// only once there is something to log).
    pub fn ensure_logging(&mut self) -> anyhow::Result<()> {
        if self.agent.session_id().is_none() {
            self.agent.start_session()?;
        }
        Ok(())
    }
}

/// A model as a person should read it: `local` alone means the embedded
/// default, so that one is named.
pub fn model_label(spec: &ModelSpec) -> String {
    if spec.provider == ProviderKind::Local && spec.model.is_empty() {
        let name = whittle_local::DEFAULT_MODEL_FILE.trim_end_matches(".gguf");
        format!("local:{name}")
    } else {
        spec.to_string()
    }
}

/// Output tokens per call: configured, else the model's limit capped.
fn max_tokens(settings: &Settings, model_max: u64) -> u32 {
    settings
        .max_tokens
        .unwrap_or_else(|| u32::try_from(model_max.min(DEFAULT_MAX_TOKENS_CAP)).unwrap_or(u32::MAX))
}

/// The agent's configuration for `spec`; `reported_window` is the context
/// window the provider itself reported (a config override still wins);
/// `environment` is the environment block of the system prompt.
pub fn agent_config(
    settings: &Settings,
    spec: &ModelSpec,
    reported_window: Option<u64>,
    environment: &str,
) -> AgentConfig {
    let mut facts = model_facts_with(&spec.model, &settings.models);
    let configured = settings
        .models
        .get(&spec.model)
        .and_then(|o| o.context_window);
    if let (Some(w), None) = (reported_window, configured) {
        facts.context_window = w;
    }
    // Answers get at most a quarter of the window, so small local models keep room to work.
    let max_tokens = max_tokens(
        settings,
        facts
            .max_output_tokens
            .min(facts.context_window / 4)
            .max(256),
    );
    let (limits, meter) = match settings.preset {
        Some(Preset::Teaching) => (Limits::teaching(), MeterChoice::Chars),
        None => (
            Limits::tokens(TokenBudget {
                context_window: facts.context_window,
                reserved_output_tokens: settings
                    .reserved_output_tokens
                    .unwrap_or(u64::from(max_tokens)),
                auto_compact_fraction: settings.auto_compact_fraction,
            }),
            MeterChoice::Tokens,
        ),
    };
    let skills = Skills::discover(&settings.workspace);
    let instructions =
        ProjectInstructions::discover(&settings.workspace, settings.user_instructions.as_deref());
    AgentConfig {
        model: spec.model.clone(),
        model_label: spec.to_string(),
        max_tokens,
        max_turns: settings.max_turns,
        workspace: settings.workspace.clone(),
        state_dir: settings.state_dir(),
        limits,
        meter,
        context_window: facts.context_window,
        system_prompt: if spec.provider == ProviderKind::Local {
            embedded_system_prompt(
                &settings.workspace,
                settings.system_prompt_extra.as_deref(),
                &instructions,
            )
        } else {
            session_system_prompt(
                &settings.workspace,
                &skills,
                settings.system_prompt_extra.as_deref(),
                environment,
                &instructions,
            )
        },
        reasoning: settings.reasoning,
        sandbox: Sandbox::none(),
        redactor: Redactor::default(),
        session_key: settings.session_key.clone(),
        resume_unsealed: settings.folder_trusted,
    }
}

/// Characters the MCP tools' definitions may take before they are searched
/// instead of sent: `mcp_schema_share` of the window.
fn mcp_budget_chars(settings: &Settings, config: &AgentConfig) -> usize {
    let window_chars = match config.meter {
        MeterChoice::Chars => config.limits.context_limit as f64,
        MeterChoice::Tokens => config.context_window as f64 * TokenMeter::DEFAULT_CHARS_PER_TOKEN,
    };
    (window_chars * settings.mcp_schema_share) as usize
}

/// Builds the agent, with the tools of the started MCP servers, and
/// continues a session if `args` asks to.
pub fn open(
    settings: &Settings,
    args: &AgentArgs,
    env: Env<'_>,
    approver: Box<dyn Approver>,
    mcp: &McpServers,
) -> anyhow::Result<Session> {
    let spec = choose_model(settings, env);
    let Connection {
        provider,
        context_window,
        local,
    } = connect(&spec, settings)?;
    // Commands are confined; in -p nobody can be told they would run
    // unconfined, so a kernel that cannot confine refuses them.
    let confinement = crate::config::sandboxing::confine(settings, env, args.prompt.is_some())?;
    let style = crate::ui::style::Style::detect(std::io::stderr().is_terminal());
    for notice in &confinement.notices {
        crate::ui::render::err_line(&style.dim(notice));
    }
    let today = crate::ui::slash::utc_date(std::time::SystemTime::now());
    let environment = environment_block(&settings.workspace, &today, &confinement.git);
    let mut config = agent_config(settings, &spec, context_window, &environment);
    config.sandbox = confinement.sandbox;
    config.redactor = confinement.redactor;
    let support = confinement.support;
    let mut tools = ToolRegistry::builtin();
    // The embedded model gets a short prompt and three tools (see EMBEDDED_TOOLS).
    let embedded = spec.provider == ProviderKind::Local;
    if embedded {
        let others: Vec<String> = tools
            .names()
            .filter(|n| !EMBEDDED_TOOLS.contains(n))
            .map(str::to_owned)
            .collect();
        for name in others {
            tools.remove(&name);
        }
    } else {
        tools.register(Arc::new(CompactTool));
    }
    let installation = mcp.install(&mut tools, mcp_budget_chars(settings, &config));
    let mut hooks = Hooks::new();
    hooks.add_commands(settings.hooks.iter().cloned());
    let usage = UsageMeter::default();
    let policy = policy(settings, mcp)?;
    let task = TaskTool::new(provider.clone(), &tools, config.clone())
        .with_hooks(hooks.clone())
        .with_usage_meter(usage.clone())
        .with_parent_policy(&policy);
    if !embedded {
        tools.register(Arc::new(task));
    }
    let mut agent = Agent::new(provider, tools, config)
        .with_policy(policy)
        .with_approver(approver)
        .with_hooks(hooks)
        .with_usage_meter(usage)
        .with_checkpoints(settings.checkpoint_max_file_size);
    let resumed = match session_to_resume(settings, args)? {
        Some(path) => {
            let resumed = agent.resume_session(&path)?;
            // Each missing or changed saved output: one line, then go on.
            for problem in &resumed.problems {
                crate::ui::render::err_line(&format!("whittle: {problem}"));
            }
            let id = agent.session_id().unwrap_or_default().to_string();
            Some((id, resumed.repairs))
        }
        None => None,
    };
    Ok(Session {
        agent,
        local,
        spec,
        resumed,
        support,
        mcp: installation,
    })
}

/// The permission policy of `settings.permission_mode`.
pub fn policy(settings: &Settings, mcp: &McpServers) -> anyhow::Result<PermissionPolicy> {
    Ok(PermissionPolicy::new(settings.permission_mode)
        .with_allow_strs(&settings.allow)?
        .with_trusted_tools(TRUSTED_TOOLS)
        .with_read_only_mcp_tools(mcp.read_only_tool_names()))
}

fn session_to_resume(settings: &Settings, args: &AgentArgs) -> anyhow::Result<Option<PathBuf>> {
    let dir = settings.state_dir().join("sessions");
    Ok(match (&args.resume, args.continue_session) {
        (Some(id), _) => Some(find_session(&dir, Some(id))?),
        (None, true) => Some(find_session(&dir, None).map_err(|_| {
            anyhow::anyhow!(
                "no session to continue in {} (start one without --continue)",
                settings.workspace.display()
            )
        })?),
        (None, false) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::resolve;

    fn spec(s: &str) -> ModelSpec {
        s.parse().unwrap()
    }

    #[test]
    fn teaching_measures_chars_and_tokens_follow_the_window() {
        let args = AgentArgs {
            preset: Some(Preset::Teaching),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![], &args, &|_| None).unwrap();
        let c = agent_config(&s, &spec("anthropic:claude-sonnet-5-5"), None, "");
        assert_eq!(c.limits, Limits::teaching());
        assert_eq!(c.meter, MeterChoice::Chars);

        let args = AgentArgs {
            max_tokens: Some(8_000),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![], &args, &|_| None).unwrap();
        let c = agent_config(&s, &spec("anthropic:claude-sonnet-4-5"), None, "");
        assert_eq!(c.meter, MeterChoice::Tokens);
        assert_eq!(c.context_window, 200_000);
        assert_eq!(c.max_tokens, 8_000);
        assert_eq!(
            c.limits,
            Limits::tokens(TokenBudget::new(200_000, 8_000)),
            "reserve = max_tokens, default fraction"
        );
        assert_eq!(c.state_dir, PathBuf::from("/w/.whittle"));
    }

    #[test]
    fn config_overrides_the_window_and_the_reserve() {
        let file = crate::config::file::parse_file_config(
            "reserved_output_tokens = 1000\nauto_compact_fraction = 0.5\n[models.\"tiny\"]\ncontext_window = 10000\n",
        )
        .unwrap();
        let s = resolve(
            "/w".into(),
            vec![("/c".into(), file)],
            &AgentArgs::default(),
            &|_| None,
        )
        .unwrap();
        let c = agent_config(&s, &spec("openai:tiny"), Some(8_192), "");
        assert_eq!(
            c.context_window, 10_000,
            "the config wins over the provider"
        );
        assert_eq!(c.limits.context_limit, 4_500, "(10000 - 1000) * 0.5");
        let c = agent_config(&s, &spec("local:/m/smol.gguf"), Some(8_192), "");
        assert_eq!(c.context_window, 8_192, "the provider wins over the table");
    }
}
