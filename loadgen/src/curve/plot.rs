//! The curve as an SVG: three panels against the object count (log scale), events/s per
//! partition count, p99 and p99.9 latency per partition count, and resident bytes per object.
//!
//! Drawn with plotters' SVG backend alone: text goes into the file as `<text>` elements for the
//! viewer to render, so drawing needs no font file and no system library, and builds on a bare
//! CI machine.

use super::Curve;
use plotters::prelude::*;

/// Width and height of the whole figure, in pixels.
const SIZE: (u32, u32) = (1500, 460);

/// One line of a panel: its legend and its points (objects, value).
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
}

/// The curve's SVG document.
pub fn svg(curve: &Curve) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let panels = root.split_evenly((1, 3));
        panel(&panels[0], "events/s (millions)", &throughput(curve))?;
        panel(&panels[1], "processGraphChanges latency (µs)", &latency(curve))?;
        panel(&panels[2], "resident bytes per object", &memory(curve))?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

fn drawing<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow::anyhow!("drawing the curve: {e}")
}

fn throughput(curve: &Curve) -> Vec<Series> {
    curve
        .partitions
        .iter()
        .map(|&p| Series {
            label: format!("P = {p}"),
            points: curve
                .rows
                .iter()
                .filter(|r| r.partitions == p)
                .map(|r| (r.objects as f64, r.events_per_sec / 1e6))
                .collect(),
        })
        .collect()
}

fn latency(curve: &Curve) -> Vec<Series> {
    let mut series = Vec::new();
    for &p in &curve.partitions {
        let rows = || curve.rows.iter().filter(move |r| r.partitions == p);
        series.push(Series {
            label: format!("p99, P = {p}"),
            points: rows()
                .map(|r| (r.objects as f64, r.latency_ns.p99 as f64 / 1e3))
                .collect(),
        });
        series.push(Series {
            label: format!("p99.9, P = {p}"),
            points: rows()
                .map(|r| (r.objects as f64, r.latency_ns.p999 as f64 / 1e3))
                .collect(),
        });
    }
    series
}

fn memory(curve: &Curve) -> Vec<Series> {
    vec![Series {
        label: "warm-up run, fresh process".into(),
        points: curve
            .sizes
            .iter()
            .filter_map(|s| Some((s.objects as f64, s.rss_bytes_per_object?)))
            .collect(),
    }]
}

/// One panel: `series` against the object count, the x axis logarithmic, the y axis from 0.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    series: &[Series],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min).max(1.0);
    let x_max = points().map(|p| p.0).fold(1.0, f64::max).max(x_min);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max);
    // Margins around the points, so that one size still gives a range and no point sits on a
    // frame; the top 40 % is left for the legend.
    let x_range = (x_min / 1.6..x_max * 1.6).log_scale();
    let y_range = 0.0..(y_max * 1.65).max(1e-9);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, y_range)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("objects (log scale)")
        .x_label_formatter(&|x| objects_label(*x))
        .y_label_formatter(&|y| y_label(*y, y_max))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(drawing)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(drawing)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(drawing)
}

/// A value as an axis label, with as many decimals as the panel's scale needs.
fn y_label(y: f64, y_max: f64) -> String {
    match y_max {
        m if m >= 100.0 => format!("{y:.0}"),
        m if m >= 10.0 => format!("{y:.1}"),
        _ => format!("{y:.2}"),
    }
}

/// An object count as an axis label: 10k, 1M, 5M.
fn objects_label(x: f64) -> String {
    if x >= 1e6 {
        format!("{}M", trim(x / 1e6))
    } else if x >= 1e3 {
        format!("{}k", trim(x / 1e3))
    } else {
        trim(x)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}
