//! The charts, drawn by plotters into SVG strings: context size per call with
//! the window, the compaction limit and a marker per step; cost bars; a
//! cumulative cost curve.
//!
//! plotters maps data to pixels and draws axes and lines. The step markers
//! are added after it, at the pixels plotters computed, because a marker
//! needs an SVG `<title>` (the browser's hover text) and a class the page's
//! CSS colours by step, which plotters' elements cannot carry.

use crate::downsample::downsample;
use crate::error::ReportError;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use whittle_protocol::abbreviate_count;

/// Width of a context chart, in pixels.
const WIDTH: u32 = 520;
/// Height of a context chart, in pixels.
const HEIGHT: u32 = 150;

/// How far above the curve and the limit the window may be and still be drawn.
const WINDOW_HEADROOM: u64 = 3;

const CURVE: RGBColor = RGBColor(31, 119, 180);
const WINDOW: RGBColor = RGBColor(214, 39, 40);
const LIMIT: RGBColor = RGBColor(255, 127, 14);
const AXIS_TEXT: RGBColor = RGBColor(90, 90, 90);
const BAR: RGBColor = RGBColor(44, 160, 44);

/// A step marked on a curve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The call (0-based) it ran before.
    pub call: u64,
    /// The step's name (`micro_compact`, ...), which picks its colour.
    pub step: String,
    /// The hover text.
    pub label: String,
}

/// What a context chart shows.
pub struct ContextCurve<'a> {
    /// Which chart, for error messages.
    pub name: &'a str,
    /// Context tokens of each call, in call order.
    pub tokens: &'a [u64],
    /// The model's window, drawn as a red line (unless it is more than
    /// three times above the curve and the limit).
    pub window: Option<u64>,
    /// Where compaction starts, drawn as a dashed orange line.
    pub limit: Option<u64>,
    /// The steps, in any order.
    pub markers: &'a [Marker],
    /// The top of the y axis: charts compared side by side share it.
    pub y_max: u64,
}

fn chart_error(name: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Chart {
        chart: name.to_string(),
        reason: e.to_string(),
    }
}

fn label_font() -> TextStyle<'static> {
    ("sans-serif", 10).into_font().color(&AXIS_TEXT)
}

/// Axes with a few labels and no grid: small multiples stay light.
fn draw_axes<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    y_label: &dyn Fn(&f64) -> String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let calls = chart.x_range().end.round() as usize + 1;
    chart
        .configure_mesh()
        .disable_mesh()
        // No more labels than calls: three calls would read "0 1 1 2 2".
        .x_labels(calls.min(5))
        .y_labels(3)
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .y_label_formatter(y_label)
        .label_style(label_font())
        .axis_style(AXIS_TEXT)
        .draw()
}

/// The context chart as an SVG element, markers included.
pub fn context_chart(curve: &ContextCurve<'_>) -> Result<String, ReportError> {
    let name = curve.name;
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let calls = curve.tokens.len();
    let x_max = calls.saturating_sub(1).max(1) as f64;
    // A window far above everything else would flatten the curve to its
    // axis: then it is left off (the page says the window in words).
    let below = curve.y_max.max(curve.limit.unwrap_or(0)).max(1);
    let window = curve
        .window
        .filter(|&w| w <= below.saturating_mul(WINDOW_HEADROOM));
    let y_max = below.max(window.unwrap_or(0)) as f64 * 1.05;
    let marked: Vec<u64> = curve.markers.iter().map(|m| m.call).collect();
    let kept = downsample(curve.tokens, &marked);
    let mut svg = String::new();
    let mut placed = Vec::with_capacity(curve.markers.len());
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(16)
            .y_label_area_size(38)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        draw_axes(&mut chart, &|y| abbreviate_count(y.round() as u64)).map_err(err)?;
        let level = |v: u64| [(0.0, v as f64), (x_max, v as f64)];
        if let Some(w) = window {
            chart
                .draw_series(LineSeries::new(level(w), WINDOW.stroke_width(1)))
                .map_err(err)?;
        }
        if let Some(l) = curve.limit {
            // Solid: plotters draws a dashed line as one element per dash.
            chart
                .draw_series(LineSeries::new(level(l), LIMIT.stroke_width(1)))
                .map_err(err)?;
        }
        chart
            .draw_series(LineSeries::new(
                kept.iter().map(|&i| (i as f64, curve.tokens[i] as f64)),
                CURVE.stroke_width(1),
            ))
            .map_err(err)?;
        for m in curve.markers {
            let Some(&tokens) = usize::try_from(m.call)
                .ok()
                .and_then(|i| curve.tokens.get(i))
            else {
                continue;
            };
            placed.push((chart.backend_coord(&(m.call as f64, tokens as f64)), m));
        }
        root.present().map_err(err)?;
    }
    Ok(with_markers(lighter(svg), &placed))
}

/// `svg` without what plotters writes on every element that says only the
/// default (full opacity): a tenth of a page of small multiples.
fn lighter(svg: String) -> String {
    svg.replace(" opacity=\"1\"", "")
}

/// `svg` with a hoverable circle per marker before its end.
fn with_markers(mut svg: String, placed: &[((i32, i32), &Marker)]) -> String {
    let mut group = String::from("<g class=\"markers\">");
    for ((x, y), m) in placed {
        group.push_str(&format!(
            "<circle class=\"step-marker s-{}\" cx=\"{x}\" cy=\"{y}\" r=\"3\"><title>{}</title></circle>",
            escape_xml(&m.step),
            escape_xml(&m.label)
        ));
    }
    group.push_str("</g>");
    match svg.rfind("</svg>") {
        Some(end) => svg.insert_str(end, &group),
        None => svg.push_str(&group),
    }
    svg
}

/// Text safe inside SVG markup.
fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// One horizontal bar per policy, labelled with its cost in dollars.
pub fn cost_bars(costs: &[(String, f64)]) -> Result<String, ReportError> {
    let name = "cost per policy";
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let n = costs.len().max(1);
    let height = 30 + 28 * n as u32;
    let top = costs
        .iter()
        .map(|(_, c)| *c)
        .filter(|c| c.is_finite())
        .fold(0.0_f64, f64::max)
        .max(0.01)
        * 1.25;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(16)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..top, (0..n).into_segmented())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(5)
            .x_label_formatter(&|x| dollars(*x, top))
            .y_label_formatter(&|y| match y {
                SegmentValue::CenterOf(i) => {
                    costs.get(*i).map(|(p, _)| p.clone()).unwrap_or_default()
                }
                _ => String::new(),
            })
            .label_style(label_font())
            .axis_style(AXIS_TEXT)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(costs.iter().enumerate().map(|(i, (_, cost))| {
                let mut bar = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (cost.max(0.0), SegmentValue::Exact(i + 1)),
                    ],
                    BAR.filled(),
                );
                bar.set_margin(4, 4, 0, 0);
                bar
            }))
            .map_err(err)?;
        chart
            .draw_series(costs.iter().enumerate().map(|(i, (_, cost))| {
                Text::new(
                    format!(" {}", dollars(*cost, top)),
                    (cost.max(0.0), SegmentValue::CenterOf(i)),
                    label_font(),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(lighter(svg))
}

/// `x` in dollars with the decimals a scale up to `top` needs to tell its
/// ticks apart.
fn dollars(x: f64, top: f64) -> String {
    let decimals = match top {
        t if t < 0.1 => 4,
        t if t < 1.0 => 3,
        _ => 2,
    };
    format!("${x:.decimals$}")
}

/// Dollars spent so far, after each call.
pub fn cumulative_cost(name: &str, spent: &[f64]) -> Result<String, ReportError> {
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let x_max = spent.len().saturating_sub(1).max(1) as f64;
    // In micro-dollars, for the downsampler's integer peaks.
    let micro: Vec<u64> = spent.iter().map(|d| (d * 1e6).max(0.0) as u64).collect();
    let kept = downsample(&micro, &[]);
    let top = spent
        .last()
        .copied()
        .filter(|d| d.is_finite())
        .unwrap_or(0.0)
        .max(0.0001)
        * 1.1;
    let mut svg = String::new();
    {
        let root: DrawingArea<SVGBackend<'_>, Shift> =
            SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(16)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..x_max, 0f64..top)
            .map_err(err)?;
        draw_axes(&mut chart, &|y| dollars(*y, top)).map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                kept.iter().map(|&i| (i as f64, spent[i])),
                BAR.stroke_width(1),
            ))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(lighter(svg))
}
