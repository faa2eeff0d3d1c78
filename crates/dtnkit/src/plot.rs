//! Plotting helpers shared by the CLI tools (trace statistics now, the analyzer later).
//!
//! Text is rendered by plotters' pure-Rust `ab_glyph` path with an embedded DejaVu Sans (assets/fonts, registered
//! by the `bench` crate, whose experiment plots use it too), so the binary needs no system font libraries. The
//! output format follows the file extension: `.png` or `.svg`.

use std::path::Path;

use anyhow::Context;
use bench::plot::ensure_font;
use plotters::prelude::*;

/// One curve: a label and its points.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Axis labels, title and ranges of a line chart.
pub struct LineChart<'a> {
    /// Title on top.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// X range.
    pub x_range: (f64, f64),
    /// Y range.
    pub y_range: (f64, f64),
    /// Draw each series as a step function (for empirical CDFs).
    pub steps: bool,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
    series: &[Series],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 26))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(64)
        .build_cartesian_2d(
            chart.x_range.0..chart.x_range.1,
            chart.y_range.0..chart.y_range.1,
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    c.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = if chart.steps {
            let mut v = Vec::with_capacity(2 * s.points.len() + 1);
            let mut prev_y = 0.0;
            for &(x, y) in &s.points {
                v.push((x, prev_y));
                v.push((x, y));
                prev_y = y;
            }
            v.push((chart.x_range.1, prev_y));
            v
        } else {
            s.points.clone()
        };
        c.draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 18))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// Draws a line chart into `path` (`.png` 1000x650 or `.svg`).
pub fn line_chart(path: &Path, chart: &LineChart, series: &[Series]) -> anyhow::Result<()> {
    ensure_font();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => draw(
            SVGBackend::new(path, (1000, 650)).into_drawing_area(),
            chart,
            series,
        ),
        Some("png") => draw(
            BitMapBackend::new(path, (1000, 650)).into_drawing_area(),
            chart,
            series,
        ),
        _ => Err(crate::cmd::UsageError(format!(
            "--plot {}: expected a file name ending in .png or .svg",
            path.display()
        ))
        .into()),
    }
    .with_context(|| format!("drawing {}", path.display()))
}

/// One row of a timeline chart: a label and bars `(start, end, value in [0, 1])`.
pub struct TimelineRow {
    /// Text on the left of the row.
    pub label: String,
    /// Bars in x units; the value picks the fill colour (white 0 → dark red 1, above 1 black).
    pub bars: Vec<(f64, f64, f64)>,
}

fn heat(v: f64) -> RGBColor {
    if v > 1.0 {
        return BLACK;
    }
    let v = v.clamp(0.0, 1.0);
    // light grey for an unused bar, then yellow → red.
    if v == 0.0 {
        return RGBColor(225, 225, 225);
    }
    let g = (220.0 * (1.0 - v)) as u8;
    RGBColor(230, g, (40.0 * (1.0 - v)) as u8)
}

fn draw_timeline<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    rows: &[TimelineRow],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    root.fill(&WHITE).map_err(e)?;
    let xmax = rows
        .iter()
        .flat_map(|r| r.bars.iter().map(|b| b.1))
        .fold(1e-3, f64::max);
    let n = rows.len();
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..xmax, (0..n).into_segmented())
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(x_label)
        .y_labels(n)
        .y_label_formatter(&|y| match y {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 16))
        .disable_y_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(e)?;
    for (i, r) in rows.iter().enumerate() {
        c.draw_series(r.bars.iter().map(|&(s, t, v)| {
            Rectangle::new(
                [
                    (s, SegmentValue::Exact(i)),
                    (t.max(s + xmax * 1e-3), SegmentValue::Exact(i + 1)),
                ],
                heat(v).filled(),
            )
        }))
        .map_err(e)?;
        // A white outline keeps neighbouring rows and back-to-back contacts apart.
        c.draw_series(r.bars.iter().map(|&(s, t, _)| {
            Rectangle::new(
                [
                    (s, SegmentValue::Exact(i)),
                    (t.max(s + xmax * 1e-3), SegmentValue::Exact(i + 1)),
                ],
                WHITE.stroke_width(3),
            )
        }))
        .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Draws a timeline (one row of bars per label) into `path` (`.png` 1200 × (120 + 22 per row) or `.svg`).
pub fn timeline(
    path: &Path,
    title: &str,
    x_label: &str,
    rows: &[TimelineRow],
) -> anyhow::Result<()> {
    ensure_font();
    let size = (1200, 140 + 22 * rows.len() as u32);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => draw_timeline(
            SVGBackend::new(path, size).into_drawing_area(),
            title,
            x_label,
            rows,
        ),
        Some("png") => draw_timeline(
            BitMapBackend::new(path, size).into_drawing_area(),
            title,
            x_label,
            rows,
        ),
        _ => Err(crate::cmd::UsageError(format!(
            "{}: expected a file name ending in .png or .svg",
            path.display()
        ))
        .into()),
    }
    .with_context(|| format!("drawing {}", path.display()))
}
