//! How fast the permission check, the search tools and bash's output
//! collection are.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use whittle_tools::{BashTool, GrepTool, PermissionMode, PermissionPolicy, Tool, ToolContext};

fn permission(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    let policy = PermissionPolicy::new(PermissionMode::Default)
        .with_allow_strs(["bash(git status*)", "write_file(src/**)"])
        .unwrap();
    let long: String = (0..100)
        .map(|i| format!("echo {i} && "))
        .collect::<String>()
        + "true";
    let cases = [
        ("simple", json!({"command": "cargo test -p whittle-tools"})),
        (
            "compound",
            json!({"command": "cd src && FOO=1 timeout 60 bash -c 'grep -rn x . | head' > out.txt 2>&1"}),
        ),
        ("long_100_commands", json!({"command": long})),
        (
            "substitutions_2000",
            json!({"command": "echo $(date) ".repeat(2000)}),
        ),
    ];
    let mut g = c.benchmark_group("permission_check_bash");
    for (name, input) in &cases {
        g.bench_function(*name, |b| {
            b.iter(|| policy.check("bash", black_box(input), ws.path()))
        });
    }
    g.finish();
    c.bench_function("permission_check_write_file", |b| {
        let input = json!({"path": "src/a/b/c.rs", "content": "x"});
        b.iter(|| policy.check("write_file", black_box(&input), ws.path()))
    });
}

fn grep(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    let mut bytes = 0u64;
    for d in 0..20 {
        let dir = ws.path().join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            let text: String = (0..50)
                .map(|l| format!("line {l} of file {f} in dir {d}: some ordinary source text\n"))
                .collect();
            bytes += text.len() as u64;
            std::fs::write(dir.join(format!("f{f}.rs")), text).unwrap();
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ToolContext::new(ws.path());
    let tool = GrepTool::default();
    let mut g = c.benchmark_group("grep_2000_files");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(20);
    g.bench_function("content_mode", |b| {
        b.iter(|| {
            rt.block_on(tool.run(
                json!({"pattern": "file 7[0-9] in dir 1", "output_mode": "content"}),
                &ctx,
            ))
        })
    });
    g.finish();
}

fn bash_output(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ToolContext::new(ws.path());
    let tool = BashTool::default();
    // `seq 1 1000000` prints 6,888,896 bytes.
    let mut g = c.benchmark_group("bash_collect_output");
    g.throughput(Throughput::Bytes(6_888_896));
    g.sample_size(10);
    g.bench_function("seq_1M", |b| {
        b.iter(|| rt.block_on(tool.run(json!({"command": "seq 1 1000000"}), &ctx)))
    });
    g.finish();
}

criterion_group!(benches, permission, grep, bash_output);
criterion_main!(benches);
