//! The REPL on a real terminal (a pseudo-terminal).

use crate::{Harness, Terminal, tool_result};
use serde_json::json;
use testkit::{Reply, content_text};

#[test]
fn the_terminal_repl_asks_before_edits_keeps_history_and_quits_on_ctrl_d() {
    let h = Harness::new();
    h.server.push(Reply::tool_use(
        "w",
        "write_file",
        json!({"path": "notes.txt", "content": "remember the parser\n"}),
    ));
    h.server.push(Reply::text("Saved the notes."));
    h.server.push(Reply::tool_use(
        "w2",
        "write_file",
        json!({"path": "other.txt", "content": "no"}),
    ));
    h.server.push(Reply::text("Left it alone."));
    let mut term = Terminal::spawn(&h, &[]);
    term.expect("Ctrl-D quits", 1);
    term.expect("> ", 1);
    term.type_keys("please save the notes\r");
    term.expect("allow? [y]es / [n]o / [a]lways", 1);
    term.type_keys("y\r");
    term.expect("Saved the notes.", 1);
    // After the turn, one dim status line: context against window and threshold, cost.
    term.expect("compacts at", 1);
    let screen = term.screen();
    let status = screen.lines().find(|l| l.contains("compacts at")).unwrap();
    assert!(status.contains("\x1b[2mcontext "), "{status:?}");
    assert!(
        status.contains(" tokens (") && status.contains("· $"),
        "{status:?}"
    );
    assert_eq!(
        std::fs::read_to_string(h.ws().join("notes.txt")).unwrap(),
        "remember the parser\n"
    );
    term.expect("> ", 2);
    term.type_keys("now write other.txt\r");
    term.expect("allow? [y]es / [n]o / [a]lways", 2);
    term.type_keys("n\r");
    term.expect("Left it alone.", 1);
    assert!(!h.ws().join("other.txt").exists());
    // Ctrl-C at the prompt drops the line; Ctrl-D on an empty line quits.
    term.expect("> ", 3);
    term.type_keys("a half-typed thought");
    term.expect("a half-typed thought", 1);
    term.type_keys("\x03");
    term.expect("> ", 4);
    term.type_keys("\x04");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{}", term.screen());

    let requests = h.requests();
    assert_eq!(requests.len(), 4, "the dropped line was never sent");
    assert!(
        content_text(&tool_result(&requests[3].body, "w2")).starts_with("[denied]"),
        "a no is a refusal"
    );
    let history = std::fs::read_to_string(h.state().join("repl-history")).unwrap();
    assert!(history.contains("please save the notes"), "{history}");
    assert!(history.contains("now write other.txt"));
    assert!(!history.contains("half-typed"));
    h.assert_clean();
}
