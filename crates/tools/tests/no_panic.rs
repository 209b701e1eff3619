//! No input JSON makes any tool or the permission policy panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Map, Value};
use whittle_tools::{
    CancellationToken, PermissionMode, PermissionPolicy, ToolContext, ToolRegistry,
};

/// Field names the tools know, so random objects often reach past the
/// "missing field" check into the tools' own validation.
const KEYS: &[&str] = &[
    "command",
    "timeout_secs",
    "description",
    "path",
    "offset",
    "limit",
    "content",
    "old_string",
    "new_string",
    "replace_all",
    "pattern",
    "glob",
    "case_insensitive",
    "output_mode",
    "todos",
    "status",
    "activeForm",
    "name",
];

/// Strings without `/` or `~`, so a random path can never leave the temp dir.
fn safe_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[^/~]{0,12}",
        Just(String::new()),
        Just("..".to_owned()),
        Just("in_progress".to_owned()),
        Just("content".to_owned()),
        Just("a.txt".to_owned()),
        Just("*".to_owned()),
    ]
}

fn json_value(strings: BoxedStrategy<String>) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (0u64..5).prop_map(Value::from),
        strings.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, move |inner| {
        let key = prop_oneof![
            proptest::sample::select(KEYS).prop_map(str::to_owned),
            strings.clone()
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn tool_names() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "bash",
            "read_file",
            "write_file",
            "edit_file",
            "glob",
            "grep",
            "todo_write",
            "load_skill",
            "nope",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn tools_never_panic(name in tool_names(), input in json_value(safe_string().boxed())) {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("a/b/ws");
        std::fs::create_dir_all(ws.join(".whittle/skills/s")).unwrap();
        std::fs::write(ws.join("a.txt"), "x\ny\n").unwrap();
        std::fs::write(ws.join(".whittle/skills/s/SKILL.md"), "---\nname: s\ndescription: d\n---\nbody").unwrap();
        let registry = ToolRegistry::builtin();
        // bash gets a cancelled context: its input handling is exercised,
        // but no random command line ever runs.
        let token = CancellationToken::new();
        if name == "bash" {
            token.cancel();
        }
        let ctx = ToolContext::new(&ws).with_cancel(token);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let out = rt.block_on(registry.run(&name, input, &ctx));
        prop_assert!(!out.content.is_empty());
        prop_assert!(!out.content.contains("internal error"), "{}", out.content);
    }

    #[test]
    fn the_policy_never_panics(
        name in tool_names(),
        input in json_value(any::<String>().boxed()),
        command in prop_oneof![
            "\\PC{0,60}",
            "[a-z $'\"`();|&<>\\\\{}=~/.*-]{0,60}",
            // Function definitions after multi-byte characters.
            "[a:é→§ #]{0,8}\\(\\)\\{[a:|&; }]{0,12}",
        ],
        mode in proptest::sample::select(PermissionMode::NAMES.to_vec()),
    ) {
        let ws = tempfile::tempdir().unwrap();
        let policy = PermissionPolicy::new(mode.parse().unwrap())
            .with_allow_strs(["bash(git *)", "write_file(src/**)"])
            .unwrap();
        for input in [input, serde_json::json!({"command": command, "path": command})] {
            match policy.check(&name, &input, ws.path()) {
                whittle_tools::Decision::Allow => {}
                whittle_tools::Decision::Ask { reason } | whittle_tools::Decision::Deny { reason } => {
                    prop_assert!(!reason.is_empty());
                    prop_assert!(!reason.contains('\n'), "{reason:?}");
                }
            }
        }
    }
}
