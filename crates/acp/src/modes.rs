//! whittle's permission modes as ACP session modes.

use agent_client_protocol::v1::schema::{SessionMode, SessionModeId, SessionModeState};
use whittle_tools::PermissionMode;

const MODES: [(PermissionMode, &str, &str, &str); 4] = [
    (
        PermissionMode::ReadOnly,
        "read-only",
        "Read only",
        "Only reads: writes are refused and commands run in a read-only sandbox",
    ),
    (
        PermissionMode::Default,
        "default",
        "Default",
        "Asks before edits, risky commands and paths outside the workspace",
    ),
    (
        PermissionMode::AcceptEdits,
        "accept-edits",
        "Accept edits",
        "Edits files in the workspace without asking; asks for the rest",
    ),
    (
        PermissionMode::Yolo,
        "yolo",
        "Yolo",
        "Runs everything except the deny list, commands unconfined",
    ),
];

/// The mode's ACP id.
pub fn mode_id(mode: PermissionMode) -> SessionModeId {
    let id = MODES
        .iter()
        .find(|(m, ..)| *m == mode)
        .map_or("default", |(_, id, ..)| id);
    SessionModeId::new(id)
}

/// The mode an ACP id names.
pub fn mode_of(id: &SessionModeId) -> Option<PermissionMode> {
    MODES
        .iter()
        .find(|(_, name, ..)| *name == &*id.0)
        .map(|(m, ..)| *m)
}

/// Every mode, `current` marked.
pub fn mode_state(current: PermissionMode) -> SessionModeState {
    let modes = MODES
        .iter()
        .map(|(_, id, name, about)| SessionMode::new(*id, *name).description(*about))
        .collect();
    SessionModeState::new(mode_id(current), modes)
}
