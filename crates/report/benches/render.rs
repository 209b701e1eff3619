//! What drawing the report page costs: the page of `../shared/traces` at a
//! 32,000-token window (every policy), or of the replay fixtures without
//! them. The replay runs once, outside the measurement.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::{fixtures, replay};
use criterion::{Criterion, criterion_group, criterion_main};
use testkit::shared_traces_dir;
use whittle_report::Page;

fn render(c: &mut Criterion) {
    let shared = shared_traces_dir();
    let (name, summary) = if shared.is_dir() {
        ("shared traces", replay(shared, 32_000))
    } else {
        ("fixtures", replay(fixtures(), 4_000))
    };
    let mut group = c.benchmark_group("report");
    group.sample_size(10);
    group.bench_function(format!("page of the {name}"), |b| {
        b.iter(|| {
            let mut page = Page::new("bench");
            page.add_replay(&summary).unwrap();
            page.render().unwrap().len()
        })
    });
    group.finish();
}

criterion_group!(benches, render);
criterion_main!(benches);
