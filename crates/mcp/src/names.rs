//! The name a server's tool is called by: `mcp__<server>__<tool>`, within
//! the model APIs' rule for tool names (`^[a-zA-Z0-9_-]{1,64}$`).

use crate::config::ServerName;

/// The longest tool name the model APIs accept.
pub const MAX_TOOL_NAME: usize = 64;

/// The prefix every MCP tool name starts with.
pub const PREFIX: &str = "mcp__";

/// `mcp__<server>__<tool>` with every character the APIs refuse turned into
/// `_`. A name that would be too long keeps its head and ends in a hash of
/// the server's own name, so two long names stay apart. `None` for an empty
/// tool name.
pub fn public_tool_name(server: &ServerName, tool: &str) -> Option<String> {
    if tool.is_empty() {
        return None;
    }
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let head = format!("{PREFIX}{server}__");
    let name = format!("{head}{clean}");
    if name.len() <= MAX_TOOL_NAME {
        return Some(name);
    }
    let tag = format!("_{:08x}", fnv1a(tool.as_bytes()));
    // `clean` is ASCII, so any byte index is a character boundary.
    let keep = MAX_TOOL_NAME.saturating_sub(head.len() + tag.len());
    Some(format!("{head}{}{tag}", &clean[..keep.min(clean.len())]))
}

/// Whether `name` follows the APIs' rule for tool names.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// FNV-1a: stable across runs and Rust versions, so a long tool keeps its
/// name (and the allow rules naming it) from one session to the next.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str) -> ServerName {
        ServerName::new(name).unwrap()
    }

    #[test]
    fn plain_names_are_kept_and_others_cleaned() {
        let fs = server("fs");
        assert_eq!(
            public_tool_name(&fs, "read_file").as_deref(),
            Some("mcp__fs__read_file")
        );
        assert_eq!(
            public_tool_name(&fs, "get.weather/now ü").as_deref(),
            Some("mcp__fs__get_weather_now__")
        );
        assert_eq!(public_tool_name(&fs, ""), None);
    }

    #[test]
    fn long_names_are_cut_to_64_and_stay_apart() {
        let s = server(&"s".repeat(32));
        let a = public_tool_name(&s, &format!("{}a", "x".repeat(80))).unwrap();
        let b = public_tool_name(&s, &format!("{}b", "x".repeat(80))).unwrap();
        assert_eq!(a.len(), MAX_TOOL_NAME);
        assert!(is_valid_tool_name(&a) && is_valid_tool_name(&b));
        assert_ne!(a, b);
    }

    proptest::proptest! {
        #[test]
        fn every_name_follows_the_api_rule(tool in "\\PC{1,120}", s in "[a-zA-Z0-9_-]{1,32}") {
            let name = public_tool_name(&server(&s), &tool).unwrap();
            proptest::prop_assert!(is_valid_tool_name(&name), "{}", name);
            proptest::prop_assert!(name.starts_with(PREFIX));
        }
    }
}
