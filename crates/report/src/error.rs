//! Why a report could not be made.

/// Why a report could not be made. Every variant says it in one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The session log could not be read, is not one, or has a line that
    /// is not a record.
    #[error(transparent)]
    Session(#[from] whittle_context::session::SessionError),
    /// The chart library refused to draw (a bug of ours: the inputs are checked).
    #[error("cannot draw the chart {chart}: {reason}")]
    Chart {
        /// Which chart.
        chart: String,
        /// What plotters said.
        reason: String,
    },
    /// The page template failed (a bug of ours: the templates are built in).
    #[error("cannot render the report page: {0}")]
    Template(#[from] minijinja::Error),
}
