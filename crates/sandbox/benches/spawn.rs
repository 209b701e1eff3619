//! What confining costs per command: `true` run plainly, contained (a PID
//! namespace of its own) and confined (namespaces, a root of bind mounts,
//! Landlock), through the crate's own helper binary.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::process::Stdio;
use whittle_sandbox::{Layout, Level, Sandbox, private_tmp};

fn spawn(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    let tmp = private_tmp().unwrap();
    let env = |k: &str| std::env::var(k).ok();
    let policy = Layout {
        level: Level::WorkspaceWrite,
        workspace: ws.path().to_path_buf(),
        env: &env,
        writable_roots: vec![],
        read_roots: vec![],
        hidden: vec![],
        network: false,
        tmp: Some(tmp.path().to_path_buf()),
        layers: None,
    }
    .policy()
    .unwrap();
    let helper: std::path::PathBuf = env!("CARGO_BIN_EXE_whittle-sandbox").into();
    let sandboxes = [
        ("plain", Sandbox::none()),
        ("contained", Sandbox::contained(helper.clone(), vec![])),
        (
            "confined",
            Sandbox::confined(helper, policy, vec![tmp], vec![]).unwrap(),
        ),
    ];
    let mut group = c.benchmark_group("spawn true");
    for (name, sandbox) in &sandboxes {
        group.bench_function(*name, |b| {
            b.iter(|| {
                let status = sandbox
                    .command("true", std::iter::empty::<&str>())
                    .unwrap()
                    .current_dir(ws.path())
                    .stdin(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
