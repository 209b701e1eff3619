//! Asking the person at the terminal before a tool the policy is unsure about.

use crate::ui::interrupt::CancelSlot;
use crate::ui::render::tool_input_summary;
use crate::ui::style::Style;
use futures::future::BoxFuture;
use serde_json::Value;
use whittle_agent::{Approval, Approver};

/// Asks `allow? [y]es / [n]o / [a]lways` on the terminal. Ctrl-C at the
/// question refuses and cancels the turn.
pub struct TerminalApprover {
    style: Style,
    cancel: CancelSlot,
}

impl TerminalApprover {
    /// An approver that cancels through `cancel` when the person presses Ctrl-C.
    pub fn new(style: Style, cancel: CancelSlot) -> Self {
        TerminalApprover { style, cancel }
    }
}

/// The answer typed, read leniently.
pub fn parse_answer(answer: &str) -> Approval {
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Approval::Allow,
        "a" | "always" => Approval::AllowForSession,
        _ => Approval::Deny,
    }
}

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        let question = format!(
            "{} {} {}\n{} ",
            self.style.yellow("?"),
            self.style
                .bold(&format!("{tool} {}", tool_input_summary(tool, input))),
            self.style.dim(&format!("({reason})")),
            self.style.yellow("allow? [y]es / [n]o / [a]lways"),
        );
        let cancel = self.cancel.clone();
        Box::pin(async move {
            let asked = tokio::task::spawn_blocking(move || {
                let mut editor = rustyline::DefaultEditor::new()?;
                editor.readline(&question)
            })
            .await;
            match asked {
                Ok(Ok(answer)) => parse_answer(&answer),
                Ok(Err(rustyline::error::ReadlineError::Interrupted)) => {
                    cancel.cancel();
                    Approval::Deny
                }
                _ => Approval::Deny,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently_and_default_to_no() {
        assert_eq!(parse_answer(" Y\n"), Approval::Allow);
        assert_eq!(parse_answer("always"), Approval::AllowForSession);
        assert_eq!(parse_answer(""), Approval::Deny);
        assert_eq!(parse_answer("sure"), Approval::Deny);
    }
}
