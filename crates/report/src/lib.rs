//! A report page of what filled a context window, when compaction ran,
//! what it removed and what it cost: one self-contained HTML file (inline
//! CSS, SVG and a little JavaScript, nothing fetched) that opens in any
//! browser.
//!
//! It shows a replay ([`whittle_replay::ReplaySummary`]: policies side by
//! side, cost bars, a chart of context tokens per call per conversation and
//! policy with every applied step marked, a sortable table, worst
//! conversations first; costs in parts: cache reads, writes, output...) and whittle's own session logs (the same chart from
//! the usage the provider reported, cumulative cost, and a timeline of
//! compactions with relative links to the outputs and transcripts they
//! saved).
//!
//! It lives apart from `whittle-replay` because only people read it: it
//! brings a chart library and a template engine that a harness embedding
//! replay does not need. Long curves are downsampled (every marker kept),
//! so the page of a few hundred sessions stays a few megabytes.
//!
//! ```
//! // A long curve keeps its first, lowest and highest points per bucket, and
//! // every call marked (a compaction) with the one before it.
//! let tokens: Vec<u64> = (0..10_000).map(|i| (i % 500) as u64).collect();
//! let shown = whittle_report::downsample(&tokens, &[7_777]);
//! assert!(shown.len() <= 3 * whittle_report::MAX_POINTS + 2);
//! assert!(shown.contains(&7_777) && shown.contains(&7_776));
//! ```

mod axis;
mod chart;
mod cost_parts;
mod downsample;
mod error;
mod links;
mod page;
mod replay_view;
mod session_view;

pub use chart::Marker;
pub use cost_parts::{CostPart, LegendKey};
pub use downsample::{MAX_POINTS, downsample};
pub use error::ReportError;
pub use links::Link;
pub use page::Page;
pub use replay_view::{ConversationView, PolicyChart, PolicyColumn, ReplayView};
pub use session_view::{CompactionView, FailureView, SessionOptions, SessionView, session_view};
