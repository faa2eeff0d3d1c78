//! The `[[plot]]` charts of an experiment (PNG and SVG), drawn with plotters from the per-point aggregates.
//!
//! Text is rendered by plotters' pure-Rust `ab_glyph` path with an embedded DejaVu Sans (assets/fonts), so the
//! binary needs no system font libraries; [`ensure_font`] is shared with the CLI's other plots.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Once;

use analyze::experiment::{Experiment, PlotSpec, PointAggregate};
use anyhow::Context;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// DejaVu Sans, embedded (license: assets/fonts/LICENSE-DejaVu.txt).
static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// Registers the embedded font as plotters' "sans-serif" (once per process).
pub fn ensure_font() {
    REGISTER.call_once(|| {
        // The font is a known-good file compiled into the binary; failure would only mean unreadable labels.
        let _ = register_font("sans-serif", FontStyle::Normal, DEJAVU_SANS);
    });
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One chart's data: x categories/values, series, and per (series, x) the mean and CI of each y metric.
pub(crate) struct ChartData {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) kind: String,
    /// Line plot with log10 x positions (labels show 10^x).
    pub(crate) x_log: bool,
    /// (x position, x label)
    pub(crate) xs: Vec<(f64, String)>,
    pub(crate) series: Vec<String>,
    pub(crate) y_names: Vec<String>,
    /// values[series][x][metric] = (mean, ci)
    pub(crate) values: Vec<Vec<Vec<(f64, f64)>>>,
    /// Line plots: individual runs drawn as small dots, per series (x, y).
    pub(crate) dots: Vec<Vec<(f64, f64)>>,
}

/// Draws one `[[plot]]` (one chart per combination of the axes on neither x nor series) as PNG and SVG into
/// `out`; returns the file stems.
pub(crate) fn draw_plot(
    exp: &Experiment,
    points: &[PointAggregate],
    spec: &PlotSpec,
    index: usize,
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    let ax_pos = |name: &str| exp.axes.iter().position(|a| a.name == name);
    let Some(xi) = ax_pos(&spec.x) else {
        return Ok(Vec::new());
    };
    let si = spec.series.as_deref().and_then(ax_pos);
    // One chart per combination of the other axes' points.
    let others: Vec<usize> = (0..exp.axes.len())
        .filter(|&i| i != xi && Some(i) != si)
        .collect();
    let mut groups: BTreeMap<Vec<usize>, Vec<&PointAggregate>> = BTreeMap::new();
    for p in points {
        let key: Vec<usize> = others
            .iter()
            .filter_map(|&i| p.point.get(i).copied())
            .collect();
        groups.entry(key).or_default().push(p);
    }
    let stem = spec
        .file
        .clone()
        .unwrap_or_else(|| format!("plot{}_{}_vs_{}", index + 1, spec.y.join("+"), spec.x));
    let mut files = Vec::new();
    let many = groups.len() > 1;
    for (key, members) in groups {
        let suffix: String = others
            .iter()
            .zip(&key)
            .filter_map(|(&a, &i)| {
                exp.axes
                    .get(a)
                    .and_then(|ax| ax.points.get(i))
                    .map(|p| p.label.clone())
            })
            .collect::<Vec<_>>()
            .join("_");
        let file = if many {
            format!("{stem}_{}", sanitize(&suffix))
        } else {
            stem.clone()
        };
        let x_axis = &exp.axes[xi];
        let xs: Vec<(f64, String)> = x_axis
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let x = p.x.unwrap_or(i as f64);
                (if spec.x_log { x.log10() } else { x }, p.label.clone())
            })
            .collect();
        let series: Vec<String> = match si {
            Some(s) => exp.axes[s].points.iter().map(|p| p.label.clone()).collect(),
            None => vec![String::new()],
        };
        let mut values = vec![vec![vec![(f64::NAN, 0.0); spec.y.len()]; xs.len()]; series.len()];
        for p in members {
            let s = si.and_then(|s| p.point.get(s).copied()).unwrap_or(0);
            let x = p.point.get(xi).copied().unwrap_or(0);
            for (k, y) in spec.y.iter().enumerate() {
                if let (Some(m), Some(slot)) = (
                    p.metrics.get(y),
                    values
                        .get_mut(s)
                        .and_then(|v| v.get_mut(x))
                        .and_then(|v| v.get_mut(k)),
                ) {
                    *slot = (m.mean, if m.ci95.is_finite() { m.ci95 } else { 0.0 });
                }
            }
        }
        let mut title = spec.title.clone().unwrap_or_else(|| spec.y.join(" + "));
        if many {
            title = format!("{title} ({suffix})");
        }
        let data = ChartData {
            title,
            x_label: spec.x_label.clone().unwrap_or_else(|| spec.x.clone()),
            x_log: spec.x_log && spec.kind == "line",
            y_label: spec.y_label.clone().unwrap_or_else(|| spec.y.join(", ")),
            kind: spec.kind.clone(),
            xs,
            series,
            y_names: spec.y.clone(),
            values,
            dots: Vec::new(),
        };
        render(out, &file, &data)?;
        files.push(file);
    }
    Ok(files)
}

/// Draws `data` as `OUT/file.png` and `OUT/file.svg`.
pub(crate) fn render(out: &Path, file: &str, data: &ChartData) -> anyhow::Result<()> {
    for ext in ["png", "svg"] {
        let path = out.join(format!("{file}.{ext}"));
        let r = if ext == "png" {
            chart(
                BitMapBackend::new(&path, (1000, 650)).into_drawing_area(),
                data,
            )
        } else {
            chart(
                SVGBackend::new(&path, (1000, 650)).into_drawing_area(),
                data,
            )
        };
        r.with_context(|| format!("drawing {}", path.display()))?;
    }
    Ok(())
}

pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn chart<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    d: &ChartData,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    ensure_font();
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    root.fill(&WHITE).map_err(err)?;
    let stacked = d.kind == "stacked";
    let bars = d.kind == "bars" || stacked;
    let mut y_max: f64 = 0.0;
    let mut y_min: f64 = 0.0;
    for s in &d.values {
        for x in s {
            if stacked {
                let (pos, neg) =
                    x.iter()
                        .filter(|v| v.0.is_finite())
                        .fold((0.0, 0.0), |(p, n), v| {
                            if v.0 >= 0.0 {
                                (p + v.0, n)
                            } else {
                                (p, n + v.0)
                            }
                        });
                y_max = y_max.max(pos);
                y_min = y_min.min(neg);
            } else {
                for v in x.iter().filter(|v| v.0.is_finite()) {
                    y_max = y_max.max(v.0 + v.1);
                    y_min = y_min.min(v.0 - v.1);
                }
            }
        }
    }
    for (_, y) in d.dots.iter().flatten().filter(|p| p.1.is_finite()) {
        y_max = y_max.max(*y);
        y_min = y_min.min(*y);
    }
    if y_max <= y_min {
        y_max = y_min + 1.0;
    }
    let pad = (y_max - y_min) * 0.08;
    let (x_lo, x_hi) = if bars {
        (-0.5, d.xs.len() as f64 - 0.5)
    } else {
        let lo = d.xs.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
        let hi = d.xs.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max);
        let w = (hi - lo).max(1.0) * 0.04;
        (lo - w, hi + w)
    };
    let xs = d.xs.clone();
    let x_log = d.x_log;
    let mut c = ChartBuilder::on(&root)
        .caption(&d.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            x_lo..x_hi,
            (y_min - if y_min < 0.0 { pad } else { 0.0 })..(y_max + pad),
        )
        .map_err(err)?;
    let label_fmt = move |v: &f64| -> String {
        if bars {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                return xs.get(i as usize).map(|x| x.1.clone()).unwrap_or_default();
            }
            String::new()
        } else if x_log {
            let x = 10f64.powf(*v);
            if x >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.3}")
            }
        } else {
            format!("{v}")
        }
    };
    let mut mesh = c.configure_mesh();
    mesh.x_desc(d.x_label.as_str())
        .y_desc(d.y_label.as_str())
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&label_fmt);
    if bars {
        mesh.x_labels(d.xs.len().max(1) * 4 + 1);
    }
    mesh.draw().map_err(err)?;
    let ns = d.series.len().max(1);
    if stacked {
        // One stacked bar per (x, series); components in y order.
        let width = 0.8 / ns as f64;
        for (si, s) in d.values.iter().enumerate() {
            for (xi, comps) in s.iter().enumerate() {
                let left = xi as f64 - 0.4 + si as f64 * width;
                let (mut pos, mut neg) = (0.0, 0.0);
                for (k, v) in comps.iter().enumerate() {
                    if !v.0.is_finite() {
                        continue;
                    }
                    let (b, t) = if v.0 >= 0.0 {
                        let b = pos;
                        pos += v.0;
                        (b, pos)
                    } else {
                        let t = neg;
                        neg += v.0;
                        (neg, t)
                    };
                    let col = PALETTE[k % PALETTE.len()];
                    c.draw_series(std::iter::once(Rectangle::new(
                        [(left + 0.02, b), (left + width - 0.02, t)],
                        col.filled(),
                    )))
                    .map_err(err)?;
                }
            }
        }
        for (k, name) in d.y_names.iter().enumerate() {
            let col = PALETTE[k % PALETTE.len()];
            c.draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], col.filled()));
        }
    } else if bars {
        let width = 0.8 / ns as f64;
        for (si, s) in d.values.iter().enumerate() {
            let col = PALETTE[si % PALETTE.len()];
            for (xi, comps) in s.iter().enumerate() {
                let Some(&(m, ci)) = comps.first() else {
                    continue;
                };
                if !m.is_finite() {
                    continue;
                }
                let left = xi as f64 - 0.4 + si as f64 * width;
                let mid = left + width / 2.0;
                c.draw_series(std::iter::once(Rectangle::new(
                    [(left + 0.02, 0.0), (left + width - 0.02, m)],
                    col.filled(),
                )))
                .map_err(err)?;
                if ci > 0.0 {
                    c.draw_series(std::iter::once(PathElement::new(
                        vec![(mid, m - ci), (mid, m + ci)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(err)?;
                }
            }
            if !d.series[si].is_empty() {
                c.draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                    .map_err(err)?
                    .label(d.series[si].clone())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 16, y + 6)], col.filled())
                    });
            }
        }
    } else {
        for (si, dots) in d.dots.iter().enumerate() {
            let col = PALETTE[si % PALETTE.len()].mix(0.35);
            c.draw_series(
                dots.iter()
                    .map(|&(x, y)| Circle::new((x, y), 2, col.filled())),
            )
            .map_err(err)?;
        }
        let mut idx = 0;
        for (si, s) in d.values.iter().enumerate() {
            for (k, yname) in d.y_names.iter().enumerate() {
                let col = PALETTE[idx % PALETTE.len()];
                idx += 1;
                let pts: Vec<(f64, f64, f64)> = s
                    .iter()
                    .zip(&d.xs)
                    .filter_map(|(v, x)| {
                        v.get(k)
                            .filter(|v| v.0.is_finite())
                            .map(|v| (x.0, v.0, v.1))
                    })
                    .collect();
                let label = match (d.series[si].is_empty(), d.y_names.len() > 1) {
                    (true, _) => yname.clone(),
                    (false, false) => d.series[si].clone(),
                    (false, true) => format!("{} {yname}", d.series[si]),
                };
                c.draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    col.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3))
                });
                c.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4, col.filled())))
                    .map_err(err)?;
                // CI whiskers: a vertical segment with short caps (the errorbar feature of plotters is not
                // compiled in).
                let cap = (x_hi - x_lo) * 0.006;
                c.draw_series(pts.iter().filter(|p| p.2 > 0.0).flat_map(|&(x, y, e)| {
                    [
                        PathElement::new(vec![(x, y - e), (x, y + e)], col.stroke_width(1)),
                        PathElement::new(
                            vec![(x - cap, y - e), (x + cap, y - e)],
                            col.stroke_width(1),
                        ),
                        PathElement::new(
                            vec![(x - cap, y + e), (x + cap, y + e)],
                            col.stroke_width(1),
                        ),
                    ]
                }))
                .map_err(err)?;
            }
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
