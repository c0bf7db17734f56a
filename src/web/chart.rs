//! Server-rendered SVG charts: geometry only, computed here; templates draw
//! it with `<rect>`, `<polyline>` and `<text>` (no JavaScript, no inline
//! style, so the CSP holds). Labels are escaped by the templates like any
//! other text.
//!
//! - [`stacked_bars`]: one bar per column, segments stacked bottom-up (the
//!   daily history: succeeded under failed).
//! - [`sparkline`]: a small line over a fixed time range (the retry size
//!   over the last hour for the outage signal).

/// Rounds to one decimal, so the SVG stays short.
fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The smallest "nice" number (1, 2 or 5 × 10^k) at least `v` (1 for v ≤ 1).
pub fn nice_ceil(v: u64) -> u64 {
    let mut base = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            let n = base.saturating_mul(m);
            if n >= v || n == u64::MAX {
                return n;
            }
        }
        base = base.saturating_mul(10);
    }
}

/// One stacked segment of a bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// Top edge (SVG y, grows downwards).
    pub y: f64,
    /// Height in SVG units (0 for a zero value: still drawn, invisible).
    pub height: f64,
    /// Fill colour (an SVG presentation attribute, allowed by the CSP).
    pub fill: &'static str,
}

/// One bar: a column of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Left edge.
    pub x: f64,
    /// Width.
    pub width: f64,
    /// Tooltip (`<title>`), e.g. `2026-11-29: 12 processed, 3 failed`.
    pub title: String,
    /// Segments bottom-up, in the order of the series.
    pub segments: Vec<Segment>,
}

/// A horizontal grid line with its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    /// SVG y of the line.
    pub y: f64,
    /// The value it marks.
    pub label: String,
}

/// A label under the x axis.
#[derive(Clone, Debug, PartialEq)]
pub struct XLabel {
    /// Centre of the label.
    pub x: f64,
    /// Text.
    pub text: String,
}

/// A series of a stacked bar chart: its name and colour (the legend).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: &'static str,
    /// Fill colour.
    pub fill: &'static str,
}

/// One column of input: its axis label, tooltip and one value per series.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Short label under the axis (shown for some columns only).
    pub label: String,
    /// Tooltip.
    pub title: String,
    /// Values bottom-up, one per series.
    pub values: Vec<u64>,
}

/// A stacked bar chart, ready to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// `viewBox` width.
    pub width: f64,
    /// `viewBox` height.
    pub height: f64,
    /// Left edge of the plot area (room for the y labels).
    pub left: f64,
    /// Top edge of the plot area (the axis maximum).
    pub top: f64,
    /// Right edge of the plot area.
    pub right: f64,
    /// Bottom edge of the plot area (the x axis).
    pub bottom: f64,
    /// Bars, one per column, left to right.
    pub bars: Vec<Bar>,
    /// Grid lines from 0 up to the axis maximum.
    pub ticks: Vec<Tick>,
    /// Labels under the axis (at most about ten).
    pub x_labels: Vec<XLabel>,
    /// The series (legend).
    pub series: Vec<Series>,
}

const LEFT: f64 = 48.0;
const TOP: f64 = 10.0;
const BOTTOM_ROOM: f64 = 22.0;
const RIGHT_ROOM: f64 = 8.0;

/// Lays out `columns` as stacked bars in a `width` × `height` box. The y axis
/// runs from 0 to a nice round maximum at or above the tallest stack, with
/// four grid steps; every k-th column is labelled so at most about ten
/// labels show.
pub fn stacked_bars(series: Vec<Series>, columns: &[Column], width: f64, height: f64) -> BarChart {
    let right = width - RIGHT_ROOM;
    let bottom = height - BOTTOM_ROOM;
    let plot_h = bottom - TOP;
    let tallest = columns
        .iter()
        .map(|c| c.values.iter().fold(0u64, |a, v| a.saturating_add(*v)))
        .max()
        .unwrap_or(0);
    let step = nice_ceil(tallest.div_ceil(4).max(1));
    let axis_max = step.saturating_mul(4);
    let scale = plot_h / axis_max as f64;
    let ticks = (0..=4)
        .map(|i| Tick {
            y: r1(bottom - (step * i) as f64 * scale),
            label: (step * i).to_string(),
        })
        .collect();
    let n = columns.len().max(1);
    let slot = (right - LEFT) / n as f64;
    let bar_w = (slot * 0.8).max(1.0);
    let every = n.div_ceil(10).max(1);
    let mut bars = Vec::with_capacity(columns.len());
    let mut x_labels = Vec::new();
    for (i, col) in columns.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar_w) / 2.0;
        let mut base = bottom;
        let segments = col
            .values
            .iter()
            .zip(&series)
            .map(|(v, s)| {
                let h = *v as f64 * scale;
                base -= h;
                Segment {
                    y: r1(base),
                    height: r1(h),
                    fill: s.fill,
                }
            })
            .collect();
        bars.push(Bar {
            x: r1(x),
            width: r1(bar_w),
            title: col.title.clone(),
            segments,
        });
        // Label the last column (today) and every `every`-th one counting back from it.
        if (columns.len() - 1 - i).is_multiple_of(every) {
            x_labels.push(XLabel {
                x: r1(x + bar_w / 2.0),
                text: col.label.clone(),
            });
        }
    }
    BarChart {
        width,
        height,
        left: LEFT,
        top: TOP,
        right,
        bottom,
        bars,
        ticks,
        x_labels,
        series,
    }
}

/// A sparkline, ready to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Sparkline {
    /// `viewBox` width.
    pub width: f64,
    /// `viewBox` height.
    pub height: f64,
    /// `points` attribute of the `<polyline>`: `x,y x,y ...`; empty when
    /// there are no points.
    pub points: String,
    /// The newest point (drawn as a dot), if any.
    pub last: Option<(f64, f64)>,
    /// Largest value (the top of the scale).
    pub max: u64,
}

/// A line through `(t, value)` points placed over the time range `[t0, t1]`
/// (any unit, e.g. unix seconds) in a `width` × `height` box, scaled from 0
/// at the bottom to the largest value (at least 1) at the top. Points
/// outside the range are clamped to its edges.
pub fn sparkline(points: &[(f64, u64)], t0: f64, t1: f64, width: f64, height: f64) -> Sparkline {
    let pad = 2.0;
    let max = points.iter().map(|p| p.1).max().unwrap_or(0).max(1);
    let span = (t1 - t0).max(f64::MIN_POSITIVE);
    let place = |(t, v): (f64, u64)| {
        let x = pad + ((t - t0) / span).clamp(0.0, 1.0) * (width - 2.0 * pad);
        let y = height - pad - v as f64 / max as f64 * (height - 2.0 * pad);
        (r1(x), r1(y))
    };
    let placed: Vec<(f64, f64)> = points.iter().map(|p| place(*p)).collect();
    let text = placed
        .iter()
        .map(|(x, y)| format!("{x},{y}"))
        .collect::<Vec<_>>()
        .join(" ");
    Sparkline {
        width,
        height,
        points: text,
        last: placed.last().copied(),
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_numbers() {
        assert_eq!(nice_ceil(0), 1);
        assert_eq!(nice_ceil(1), 1);
        assert_eq!(nice_ceil(3), 5);
        assert_eq!(nice_ceil(7), 10);
        assert_eq!(nice_ceil(11), 20);
        assert_eq!(nice_ceil(2500), 5000);
        assert_eq!(nice_ceil(u64::MAX), u64::MAX);
    }

    /// Stacks sum bottom-up, the axis maximum is 4 nice steps at or above
    /// the tallest stack, one bar per column.
    #[test]
    fn bars_stack_and_scale() {
        let series = vec![
            Series {
                name: "a",
                fill: "#0a0",
            },
            Series {
                name: "b",
                fill: "#a00",
            },
        ];
        let cols = vec![
            Column {
                label: "d1".into(),
                title: "t1".into(),
                values: vec![30, 10],
            },
            Column {
                label: "d2".into(),
                title: "t2".into(),
                values: vec![0, 0],
            },
        ];
        let c = stacked_bars(series, &cols, 448.0, 132.0);
        assert_eq!(c.bars.len(), 2);
        // tallest 40 → step nice(10) = 10 → axis 40; plot height 100.
        assert_eq!(c.ticks.last().unwrap().label, "40");
        assert_eq!(c.ticks[0].y, 110.0);
        let s = &c.bars[0].segments;
        assert_eq!((s[0].y, s[0].height), (35.0, 75.0));
        assert_eq!((s[1].y, s[1].height), (10.0, 25.0));
        assert_eq!(c.bars[1].segments[0].height, 0.0);
        assert_eq!(c.x_labels.len(), 2);
    }

    /// At most about ten labels, today's always among them.
    #[test]
    fn labels_are_thinned() {
        let cols: Vec<Column> = (0..90)
            .map(|i| Column {
                label: format!("{i}"),
                title: String::new(),
                values: vec![1],
            })
            .collect();
        let c = stacked_bars(
            vec![Series {
                name: "a",
                fill: "#000",
            }],
            &cols,
            900.0,
            200.0,
        );
        assert_eq!(c.x_labels.len(), 10);
        assert_eq!(c.x_labels.last().unwrap().text, "89");
        assert_eq!(c.ticks.last().unwrap().label, "4");
    }

    #[test]
    fn sparkline_scales_to_max() {
        let s = sparkline(&[(0.0, 0), (50.0, 5), (100.0, 10)], 0.0, 100.0, 104.0, 24.0);
        assert_eq!(s.points, "2,22 52,12 102,2");
        assert_eq!(s.last, Some((102.0, 2.0)));
        assert_eq!(s.max, 10);
        let empty = sparkline(&[], 0.0, 1.0, 10.0, 10.0);
        assert_eq!((empty.points.as_str(), empty.last), ("", None));
    }
}
