//! What fills the context, for `/context`.

use super::Agent;
use super::config::MeterChoice;
use whittle_context::Meter;
use whittle_protocol::Block;

/// What fills the context, for `/context`, in the meter's unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextBreakdown {
    /// The system prompt.
    pub system: u64,
    /// Of `system`, the project instructions (AGENTS.md and the like).
    pub instructions: u64,
    /// The tool definitions.
    pub tools: u64,
    /// Of `tools`, the MCP servers' tools (and `mcp_tool_search`).
    pub mcp_tools: u64,
    /// Messages, except tool results.
    pub messages: u64,
    /// Tool results.
    pub tool_results: u64,
    /// Where compaction starts.
    pub limit: u64,
    /// The model's window (tokens), or the limit in chars mode.
    pub window: u64,
}

impl ContextBreakdown {
    /// Everything the next request carries (`system` includes the project
    /// instructions and `tools` the MCP schemas).
    pub fn used(&self) -> u64 {
        self.system + self.tools + self.messages + self.tool_results
    }
}

impl Agent {
    /// What fills the context, for `/context`.
    pub fn context_breakdown(&self) -> ContextBreakdown {
        let meter = self.compactor.meter();
        let specs = self.tools.specs();
        let mcp: Vec<_> = specs
            .iter()
            .filter(|s| s.name.starts_with("mcp_"))
            .collect();
        let result_chars: usize = self
            .history
            .messages()
            .iter()
            .flat_map(|m| {
                m.blocks()
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| matches!(b, Block::ToolResult(_)))
                    .map(|(i, _)| m.block_chars(i).unwrap_or(0))
            })
            .sum();
        let limits = self.compactor.limits();
        // An empty list is `[]` to the meter: no row for what is not there.
        fn json_units<T: serde::Serialize>(meter: &dyn Meter, items: &[T]) -> u64 {
            if items.is_empty() {
                0
            } else {
                meter.chars_to_units(whittle_protocol::json_chars(&items))
            }
        }
        ContextBreakdown {
            system: meter.chars_to_units(self.config.system_prompt.chars().count()),
            instructions: meter.chars_to_units(crate::instructions::instructions_chars(
                &self.config.system_prompt,
            )),
            tools: json_units(meter, &specs),
            mcp_tools: json_units(meter, &mcp),
            messages: if self.history.is_empty() {
                0
            } else {
                meter.chars_to_units(self.history.chars().saturating_sub(result_chars))
            },
            tool_results: meter.chars_to_units(result_chars),
            limit: limits.context_limit,
            window: match self.config.meter {
                MeterChoice::Chars => limits.context_limit,
                MeterChoice::Tokens => self.config.context_window,
            },
        }
    }
}
