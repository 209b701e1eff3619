//! What confining costs per command: `true` run plainly, contained (a PID
//! namespace of its own) and confined (namespaces, a root of bind mounts,
//! Landlock, the repositories of the workspace looked for again), through
//! the crate's own helper binary. The workspace is this repository, or the
//! folder `WHITTLE_BENCH_WORKSPACE` names (a large tree, say).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::PathBuf;
use std::process::Stdio;
use whittle_sandbox::{Layout, Level, Sandbox, private_layers, private_tmp};

fn spawn(c: &mut Criterion) {
    let ws: PathBuf = std::env::var_os("WHITTLE_BENCH_WORKSPACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../..").into());
    let tmp = private_tmp().unwrap();
    let layers = private_layers().unwrap();
    let env = |k: &str| std::env::var(k).ok();
    let policy = Layout {
        level: Level::WorkspaceWrite,
        workspace: ws.clone(),
        env: &env,
        writable_roots: vec![],
        read_roots: vec![],
        hidden: vec![],
        network: false,
        tmp: Some(tmp.path().to_path_buf()),
        layers: Some(layers.path().to_path_buf()),
    }
    .policy()
    .unwrap();
    let helper: PathBuf = env!("CARGO_BIN_EXE_whittle-sandbox").into();
    let sandboxes = [
        ("plain", Sandbox::none()),
        ("contained", Sandbox::contained(helper.clone(), vec![])),
        (
            "confined",
            Sandbox::confined(helper, policy, vec![tmp, layers], vec![]).unwrap(),
        ),
    ];
    let mut group = c.benchmark_group("spawn true");
    group.sample_size(30);
    for (name, sandbox) in &sandboxes {
        group.bench_function(*name, |b| {
            b.iter(|| {
                let status = sandbox
                    .command("true", std::iter::empty::<&str>())
                    .unwrap()
                    .current_dir(&ws)
                    .stdin(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                assert!(sandbox.after_command().is_empty());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
