//! The charts, drawn by plotters into SVG strings: context size per call with
//! the window, the compaction limit and a marker per step; cost bars in
//! parts; a cumulative cost curve. Every axis says what it counts.
//!
//! plotters maps data to pixels and draws axes and lines. The step markers
//! are added after it, at the pixels plotters computed, because a marker
//! needs an SVG `<title>` (the browser's hover text) and a class the page's
//! CSS colours by step, which plotters' elements cannot carry.

use crate::axis::{dollar_decimals, dollars};
use crate::cost_parts::CostPart;
use crate::downsample::downsample;
use crate::error::ReportError;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use whittle_protocol::{abbreviate_count, group_digits};

/// Width of a context chart, in pixels.
const WIDTH: u32 = 520;
/// Height of a context chart, in pixels.
const HEIGHT: u32 = 180;

/// Curves of at most this many calls get a dot per call: a line through
/// a few points hides where they are, and one point draws no line at all.
const DOTS_UP_TO: usize = 12;

/// How far above the curve and the limit the window may be and still be drawn.
const WINDOW_HEADROOM: u64 = 3;

const CURVE: RGBColor = RGBColor(31, 119, 180);
const WINDOW: RGBColor = RGBColor(214, 39, 40);
const LIMIT: RGBColor = RGBColor(255, 127, 14);
const AXIS_TEXT: RGBColor = RGBColor(90, 90, 90);
const COST_CURVE: RGBColor = RGBColor(44, 160, 44);

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

/// Axis labels: plotters writes an SVG font size of about four fifths of
/// the size it is given, so 14 reads as 11 px.
fn label_font() -> TextStyle<'static> {
    ("sans-serif", 14).into_font().color(&AXIS_TEXT)
}

/// Labels on the y axis of a curve.
const Y_LABELS: usize = 3;

/// The x axis of a curve: calls, 0-based as the markers' hover text says.
/// One call gets room on both sides, so that its dot is not on the axis.
fn call_range(calls: usize) -> std::ops::Range<f64> {
    match calls {
        0 | 1 => -1.0..1.0,
        n => 0.0..(n - 1) as f64,
    }
}

/// Axes with a few labels, each named, and no grid: small multiples stay
/// light.
fn draw_axes<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    calls: usize,
    y_desc: &str,
    y_label: &dyn Fn(&f64) -> String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_mesh()
        .disable_mesh()
        // No more labels than calls: three calls would read "0 1 1 2 2".
        .x_labels(calls.clamp(1, 5))
        .y_labels(Y_LABELS)
        // Only whole calls: a one-call axis from -1 to 1 labels just 0.
        .x_label_formatter(&|x| {
            if x.fract() == 0.0 && *x >= 0.0 {
                format!("{}", *x as u64)
            } else {
                String::new()
            }
        })
        .y_label_formatter(y_label)
        .x_desc("call")
        .y_desc(y_desc)
        .label_style(label_font())
        .axis_desc_style(label_font())
        .axis_style(AXIS_TEXT)
        .draw()
}

/// What a chart of `calls` calls says when there is no curve to draw.
fn short_note(calls: usize, what: &str) -> Option<String> {
    match calls {
        0 => Some("no calls".to_owned()),
        1 => Some(format!("one call: {what}")),
        _ => None,
    }
}

/// The context chart as an SVG element, markers included.
pub fn context_chart(curve: &ContextCurve<'_>) -> Result<String, ReportError> {
    let name = curve.name;
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let calls = curve.tokens.len();
    let x_range = call_range(calls);
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
    let mut dots = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(x_range.clone(), 0f64..y_max)
            .map_err(err)?;
        draw_axes(&mut chart, calls, "tokens", &|y| {
            abbreviate_count(y.round() as u64)
        })
        .map_err(err)?;
        let level = |v: u64| [(x_range.start, v as f64), (x_range.end, v as f64)];
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
        if calls <= DOTS_UP_TO {
            for (call, &tokens) in curve.tokens.iter().enumerate() {
                let at = chart.backend_coord(&(call as f64, tokens as f64));
                dots.push((at, format!("call {call}: {} tokens", group_digits(tokens))));
            }
        }
        if let Some(note) = short_note(
            calls,
            &curve
                .tokens
                .first()
                .map(|t| format!("{} tokens", group_digits(*t)))
                .unwrap_or_default(),
        ) {
            draw_note(&mut chart, &note).map_err(err)?;
        }
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
    Ok(with_markers(with_dots(lighter(svg), &dots, CURVE), &placed))
}

/// `note` at the chart's top right, where no curve of one call is.
fn draw_note<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    note: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x, y) = (chart.x_range(), chart.y_range());
    let at = (x.start + (x.end - x.start) * 0.55, y.end * 0.95);
    chart.draw_series(std::iter::once(Text::new(
        note.to_owned(),
        at,
        label_font(),
    )))?;
    Ok(())
}

/// `svg` with a dot per point of a short curve, each with its value as
/// hover text, before its end.
fn with_dots(mut svg: String, dots: &[((i32, i32), String)], colour: RGBColor) -> String {
    if dots.is_empty() {
        return svg;
    }
    let RGBColor(r, g, b) = colour;
    let mut group = format!("<g class=\"dots\" fill=\"#{r:02x}{g:02x}{b:02x}\">");
    for ((x, y), title) in dots {
        group.push_str(&format!(
            "<circle class=\"dot\" cx=\"{x}\" cy=\"{y}\" r=\"2.5\"><title>{}</title></circle>",
            escape_xml(title)
        ));
    }
    group.push_str("</g>");
    match svg.rfind("</svg>") {
        Some(end) => svg.insert_str(end, &group),
        None => svg.push_str(&group),
    }
    svg
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

/// One policy's bar: its cost in parts.
pub struct CostBar {
    /// The policy's name, the bar's label.
    pub name: String,
    /// Dollars per part of [`CostPart::ALL`].
    pub parts: [f64; 5],
    /// The whole cost, written at the bar's end.
    pub total: f64,
}

/// Labels on the dollar axis of the cost bars.
const BAR_LABELS: usize = 5;

/// One horizontal bar per policy, stacked by what the cost is made of
/// (the page's legend names the colours), labelled with its cost.
pub fn cost_bars(bars: &[CostBar]) -> Result<String, ReportError> {
    let name = "cost per policy";
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let n = bars.len().max(1);
    let height = 54 + 30 * n as u32;
    let top = bars
        .iter()
        .map(|b| b.total)
        .filter(|c| c.is_finite())
        .fold(0.0_f64, f64::max)
        .max(0.0001)
        * 1.3;
    let decimals = dollar_decimals(top, BAR_LABELS);
    let mut svg = String::new();
    let mut segments = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..top, (0..n).into_segmented())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(BAR_LABELS)
            .x_label_formatter(&|x| dollars(*x, decimals))
            .y_label_formatter(&|y| match y {
                SegmentValue::CenterOf(i) => {
                    bars.get(*i).map(|b| b.name.clone()).unwrap_or_default()
                }
                _ => String::new(),
            })
            .x_desc("dollars")
            .label_style(bar_font())
            .axis_desc_style(label_font())
            .axis_style(AXIS_TEXT)
            .draw()
            .map_err(err)?;
        for (i, bar) in bars.iter().enumerate() {
            let mut left = 0.0;
            for (part, &dollars_spent) in CostPart::ALL.iter().zip(&bar.parts) {
                let right = left + dollars_spent.max(0.0);
                let (x0, y0) = chart.backend_coord(&(left, SegmentValue::Exact(i)));
                let (x1, y1) = chart.backend_coord(&(right, SegmentValue::Exact(i + 1)));
                // A part under a pixel is still drawn (zero wide, with its hover
                // text), so that the parts always add up to the bar's cost.
                if dollars_spent > 0.0 {
                    let share = if bar.total > 0.0 {
                        100.0 * dollars_spent / bar.total
                    } else {
                        0.0
                    };
                    segments.push(format!(
                        "<rect class=\"cost-part p-{}\" data-policy=\"{}\" data-value=\"{dollars_spent}\" x=\"{x0}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {} {} ({share:.0}%)</title></rect>",
                        part.key(),
                        escape_xml(&bar.name),
                        y0.min(y1) + 4,
                        x1 - x0,
                        (y1 - y0).abs().saturating_sub(8).max(1),
                        part.colour(),
                        escape_xml(&bar.name),
                        part.label(),
                        dollars(dollars_spent, decimals.max(2)),
                    ));
                }
                left = right;
            }
        }
        chart
            .draw_series(bars.iter().enumerate().map(|(i, bar)| {
                Text::new(
                    format!(" {}", dollars(bar.total, decimals)),
                    (bar.total.max(0.0), SegmentValue::CenterOf(i)),
                    bar_font().pos(Pos::new(HPos::Left, VPos::Center)),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    let mut svg = lighter(svg);
    let group = format!("<g class=\"cost-parts\">{}</g>", segments.concat());
    match svg.rfind("</svg>") {
        Some(end) => svg.insert_str(end, &group),
        None => svg.push_str(&group),
    }
    Ok(svg)
}

/// The bars' labels, 13 px: the policy names and totals are what the
/// chart says.
fn bar_font() -> TextStyle<'static> {
    ("sans-serif", 16).into_font().color(&AXIS_TEXT)
}

/// Dollars spent so far, after each call.
pub fn cumulative_cost(name: &str, spent: &[f64]) -> Result<String, ReportError> {
    let err = |e: DrawingAreaErrorKind<_>| chart_error(name, e);
    let calls = spent.len();
    let x_range = call_range(calls);
    // In micro-dollars, for the downsampler's integer peaks.
    let micro: Vec<u64> = spent.iter().map(|d| (d * 1e6).max(0.0) as u64).collect();
    let kept = downsample(&micro, &[]);
    let last = spent
        .last()
        .copied()
        .filter(|d| d.is_finite())
        .unwrap_or(0.0);
    let top = last.max(1e-6) * 1.1;
    let decimals = dollar_decimals(top, Y_LABELS);
    let mut svg = String::new();
    let mut dots = Vec::new();
    {
        let root: DrawingArea<SVGBackend<'_>, Shift> =
            SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(40)
            // The longest label and the axis's name beside it.
            .y_label_area_size(24 + 8 * dollars(top, decimals).len() as u32)
            .build_cartesian_2d(x_range, 0f64..top)
            .map_err(err)?;
        draw_axes(&mut chart, calls, "dollars", &|y| dollars(*y, decimals)).map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                kept.iter().map(|&i| (i as f64, spent[i])),
                COST_CURVE.stroke_width(1),
            ))
            .map_err(err)?;
        if calls <= DOTS_UP_TO {
            for (call, &d) in spent.iter().enumerate() {
                let at = chart.backend_coord(&(call as f64, d));
                dots.push((
                    at,
                    format!("after call {call}: {}", dollars(d, decimals + 1)),
                ));
            }
        }
        if let Some(note) = short_note(calls, &dollars(last, decimals + 1)) {
            draw_note(&mut chart, &note).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(with_dots(lighter(svg), &dots, COST_CURVE))
}
