//! A real browser opens a report: headless Chromium renders the page of
//! `../shared/traces` (or of the repository's fixtures in a lone clone),
//! the screenshot must not be blank, the page's script must have run
//! without an error, the console must stay silent, and the policy table
//! must fit its column in a 1,280 px window. Without a browser
//! (CI installs Debian's `chromium`), it says in one line that it did not run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fixtures, replay};
use libtest_mimic::{Arguments, Trial};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};
use testkit::shared_traces_dir;
use whittle_report::Page;

/// The browsers tried, in order.
const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

fn find_browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| BROWSERS.iter().map(move |b| dir.join(b)))
        .find(|p| p.is_file())
}

/// Runs the browser headless on `page` with `extra` flags, in its own
/// process group, which is killed once it exits (or after two minutes).
fn headless(browser: &Path, profile: &Path, page: &Path, extra: &[&str]) -> Output {
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = loop {
        if let Ok(out) = rx.try_recv() {
            break out.unwrap();
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = killpg(group, Signal::SIGKILL);
            panic!("the browser did not finish in two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Helpers (zygote, GPU, renderer) go with it.
    let _ = killpg(group, Signal::SIGKILL);
    output
}

/// Console messages the browser logged (our script logs none).
fn console_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

/// The mean and variance of the screenshot's grey levels, and the share of
/// pixels that are not background white.
fn pixel_stats(png_path: &Path) -> (f64, f64, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let greys: Vec<f64> = bytes
        .chunks(channels)
        .map(|px| {
            px.iter()
                .take(3.min(channels))
                .map(|&c| c as f64)
                .sum::<f64>()
                / 3.0f64.min(channels as f64)
        })
        .collect();
    let n = greys.len() as f64;
    let mean = greys.iter().sum::<f64>() / n;
    let variance = greys.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
    let inked = greys.iter().filter(|&&g| g < 250.0).count() as f64 / n;
    (mean, variance, inked)
}

/// Measures the policy table after layout and writes the widths, in CSS
/// pixels, on the body (`data-fit="table container page viewport"`).
const MEASURE_TABLE: &str = "<script>(function () {
  var t = document.querySelector('table.policies');
  var c = t.parentElement;
  document.body.setAttribute('data-fit', [t.scrollWidth, c.clientWidth,
    document.documentElement.scrollWidth, window.innerWidth].join(' '));
})();</script></body>";

/// The widths `MEASURE_TABLE` wrote.
#[derive(Debug)]
struct TableFit {
    table: u32,
    container: u32,
    page: u32,
    viewport: u32,
}

fn table_fit(dom: &str) -> TableFit {
    let doc = scraper::Html::parse_document(dom);
    let body = doc
        .select(&scraper::Selector::parse("body").unwrap())
        .next()
        .unwrap();
    let widths: Vec<u32> = body
        .value()
        .attr("data-fit")
        .expect("the measuring script ran")
        .split(' ')
        .map(|w| w.parse().unwrap())
        .collect();
    let [table, container, page, viewport] = widths[..] else {
        panic!("four widths: {widths:?}");
    };
    TableFit {
        table,
        container,
        page,
        viewport,
    }
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let Some(browser) = find_browser() else {
        println!("browser: not run: no chromium on PATH (CI installs Debian's chromium)");
        return ExitCode::SUCCESS;
    };
    let trial = Trial::test(
        "a_headless_browser_renders_the_report_without_errors",
        move || {
            let shared = shared_traces_dir();
            let (input, window) = if shared.is_dir() {
                (shared, 32_000)
            } else {
                (fixtures(), 4_000)
            };
            let summary = replay(input, window);
            let mut page = Page::new("whittle report");
            page.add_replay(&summary).unwrap();
            let html = page.render().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("report.html");
            std::fs::write(&file, &html).unwrap();

            // The same page with a script that measures the policy table
            // in a 1,280 px window: the DOM it dumps carries the widths.
            let measured = dir.path().join("measured.html");
            std::fs::write(&measured, html.replace("</body>", MEASURE_TABLE)).unwrap();
            let dom = headless(
                &browser,
                &dir.path().join("profile-dom"),
                &measured,
                &["--dump-dom", "--window-size=1280,1600"],
            );
            let text = String::from_utf8_lossy(&dom.stdout);
            assert!(
                text.contains("data-script=\"ok\""),
                "the page's script did not finish cleanly: {}",
                String::from_utf8_lossy(&dom.stderr)
            );
            assert_eq!(console_lines(&dom.stderr), Vec::<String>::new());
            let fit = table_fit(&text);
            println!("browser: policy table at 1,280 px: {fit:?}");
            assert_eq!(fit.viewport, 1280, "{fit:?}");
            assert!(
                fit.table <= fit.container,
                "the policy table is {} px wide in a {} px column: its last columns hide behind a scrollbar",
                fit.table,
                fit.container
            );
            assert!(
                fit.page <= fit.viewport,
                "the page scrolls sideways: {} px in a {} px window",
                fit.page,
                fit.viewport
            );

            let shot = dir.path().join("shot.png");
            let out = headless(
                &browser,
                &dir.path().join("profile-shot"),
                &file,
                &[
                    &format!("--screenshot={}", shot.display()),
                    "--window-size=1280,1600",
                    "--hide-scrollbars",
                ],
            );
            assert!(
                shot.is_file(),
                "no screenshot: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(console_lines(&out.stderr), Vec::<String>::new());
            let (mean, variance, inked) = pixel_stats(&shot);
            println!(
                "browser: screenshot mean {mean:.1}, variance {variance:.1}, {:.1}% inked",
                inked * 100.0
            );
            assert!(
                variance > 100.0,
                "the screenshot is blank: variance {variance}"
            );
            assert!(inked > 0.02, "the screenshot is almost empty: {inked}");
            Ok(())
        },
    );
    libtest_mimic::run(&args, vec![trial]).exit_code()
}
