//! The model picker: ACP's session config option of category `model`,
//! whose values are the models the host can talk to.

use crate::host::ModelMenu;
use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};

/// The config option's id.
pub const MODEL_OPTION: &str = "model";

/// The picker for `menu`, the model in use selected.
pub fn model_option(menu: &ModelMenu) -> SessionConfigOption {
    let options: Vec<SessionConfigSelectOption> = menu
        .choices
        .iter()
        .map(|c| SessionConfigSelectOption::new(c.id.clone(), c.name.clone()))
        .collect();
    SessionConfigOption::select(MODEL_OPTION, "Model", menu.current.clone(), options)
        .category(SessionConfigOptionCategory::Model)
        .description("The model whittle talks to; the conversation goes on.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::ModelChoice;
    use agent_client_protocol::v1::schema::{SessionConfigKind, SessionConfigSelectOptions};

    #[test]
    fn the_picker_lists_every_choice_with_the_current_one_selected() {
        let menu = ModelMenu {
            current: "local:".into(),
            choices: vec![
                ModelChoice {
                    id: "anthropic:claude-x".into(),
                    name: "anthropic:claude-x".into(),
                },
                ModelChoice {
                    id: "local:".into(),
                    name: "local:SmolLM2".into(),
                },
            ],
        };
        let option = model_option(&menu);
        assert_eq!(option.category, Some(SessionConfigOptionCategory::Model));
        let SessionConfigKind::Select(select) = option.kind else {
            panic!("a select");
        };
        assert_eq!(&*select.current_value.0, "local:");
        let SessionConfigSelectOptions::Ungrouped(options) = select.options else {
            panic!("ungrouped");
        };
        assert_eq!(options.len(), 2);
        assert_eq!(options[1].name, "local:SmolLM2");
    }
}
