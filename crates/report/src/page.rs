//! The page: the replay and the sessions it shows, rendered through the
//! built-in template into one self-contained HTML string (CSS, SVG and a
//! little JavaScript inline; nothing fetched).

use crate::error::ReportError;
use crate::replay_view::ReplayView;
use crate::session_view::{SessionOptions, SessionView, session_view};
use minijinja::{Environment, context};
use serde::Serialize;
use std::path::Path;
use whittle_protocol::group_digits;
use whittle_replay::ReplaySummary;

const TEMPLATE: &str = include_str!("../templates/report.html");
const STYLE: &str = include_str!("../templates/report.css");
const SCRIPT: &str = include_str!("../templates/report.js");

/// A report page being put together.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Page {
    /// The page's title.
    pub title: String,
    /// The replay, when there is one.
    pub replay: Option<ReplayView>,
    /// whittle sessions, each with its real usage and compactions.
    pub sessions: Vec<SessionView>,
}

impl Page {
    /// An empty page titled `title`.
    pub fn new(title: impl Into<String>) -> Page {
        Page {
            title: title.into(),
            ..Page::default()
        }
    }

    /// Adds the replay `summary` (its charts are drawn now).
    pub fn add_replay(&mut self, summary: &ReplaySummary) -> Result<(), ReportError> {
        self.replay = Some(ReplayView::of(summary)?);
        Ok(())
    }

    /// Adds the session logged at `log`, linking to its files from a page
    /// written into `page_dir`.
    pub fn add_session(
        &mut self,
        log: &Path,
        page_dir: &Path,
        options: &SessionOptions,
    ) -> Result<(), ReportError> {
        let anchor = format!("s{}", self.sessions.len());
        self.sessions
            .push(session_view(log, page_dir, options, anchor)?);
        Ok(())
    }

    /// The page as one HTML document.
    pub fn render(&self) -> Result<String, ReportError> {
        let mut env = Environment::new();
        env.add_filter("count", |n: u64| group_digits(n));
        env.add_filter("fixed", |x: f64, digits: usize| format!("{x:.digits$}"));
        env.add_filter("dollars", dollars);
        env.add_template("report.html", TEMPLATE)?;
        let html = env.get_template("report.html")?.render(context! {
            page => minijinja::value::Serde(self),
            style => STYLE,
            script => SCRIPT,
        })?;
        Ok(html)
    }
}

/// `$12.35`, or four decimals under a dollar, where cents hide the differences.
fn dollars(x: f64) -> String {
    if x.abs() < 1.0 {
        format!("${x:.4}")
    } else {
        format!("${x:.2}")
    }
}
