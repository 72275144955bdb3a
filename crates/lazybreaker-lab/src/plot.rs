//! One self-contained HTML page: the table, and for each scenario two plots over time, the
//! goodput and the p99 latency of every strategy, the fault's span shaded.

use std::time::Duration;

use plotters::prelude::*;

use crate::report::{self, Row, WINDOW};
use crate::run::Sample;
use crate::scenario::{Scenario, Timeline};

/// Each strategy's colour, in [`crate::strategy::NAMES`]'s order (then the
/// [`VARIANTS`](crate::strategy::VARIANTS)').
const COLOURS: [RGBColor; 17] = [
    RGBColor(120, 120, 120),
    RGBColor(31, 95, 191),
    RGBColor(0, 140, 90),
    RGBColor(100, 190, 200),
    RGBColor(200, 120, 0),
    RGBColor(150, 60, 170),
    RGBColor(200, 40, 40),
    RGBColor(0, 200, 60),
    RGBColor(230, 180, 0),
    RGBColor(120, 70, 20),
    RGBColor(240, 110, 170),
    RGBColor(20, 20, 120),
    RGBColor(90, 160, 60),
    RGBColor(0, 0, 0),
    RGBColor(170, 0, 110),
    RGBColor(0, 110, 170),
    RGBColor(160, 160, 40),
];

/// The p99 is read over windows this long (enough calls for a 99th percentile).
const P99_WINDOW: Duration = Duration::from_secs(1);

/// One scenario's runs: (strategy, its calls).
pub type Runs<'a> = [(&'a str, Vec<Sample>)];

fn colour(strategy: &str) -> RGBColor {
    let i = crate::strategy::NAMES
        .iter()
        .chain(crate::strategy::VARIANTS)
        .position(|n| *n == strategy)
        .unwrap_or(0);
    COLOURS[i % COLOURS.len()]
}

/// The goodput (successful calls per second, per window) of `samples`.
fn goodput(samples: &[Sample], end: Duration) -> Vec<(f64, f64)> {
    report::windows(samples, end)
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (
                (WINDOW * i as u32).as_secs_f64(),
                w.ok as f64 / WINDOW.as_secs_f64(),
            )
        })
        .collect()
}

/// The p99 latency in milliseconds of the calls due in each [`P99_WINDOW`].
fn p99(samples: &[Sample], end: Duration) -> Vec<(f64, f64)> {
    let n = (end.as_nanos() / P99_WINDOW.as_nanos()) as usize;
    let mut bins: Vec<Vec<f64>> = vec![Vec::new(); n.max(1)];
    for s in samples {
        if let Some(bin) = bins.get_mut((s.at.as_nanos() / P99_WINDOW.as_nanos()) as usize) {
            bin.push(s.latency.as_secs_f64() * 1000.0);
        }
    }
    bins.into_iter()
        .enumerate()
        .map(|(i, mut bin)| {
            bin.sort_by(f64::total_cmp);
            let at = bin.len().saturating_sub(1) * 99 / 100;
            (
                (P99_WINDOW * i as u32).as_secs_f64() + P99_WINDOW.as_secs_f64() / 2.0,
                bin.get(at).copied().unwrap_or(0.0),
            )
        })
        .collect()
}

/// One plot of `series` (one line per strategy) as an SVG element.
fn chart(
    title: &str,
    y_desc: &str,
    timeline: Timeline,
    series: &[(&str, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let mut svg = String::new();
    let end = timeline.end.as_secs_f64();
    let top = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.1;
    {
        let root = SVGBackend::with_string(&mut svg, (900, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..end, 0f64..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(y_desc)
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (timeline.fault_at.as_secs_f64(), 0.0),
                    (timeline.recover_at.as_secs_f64(), top),
                ],
                RGBColor(250, 215, 215).filled(),
            )))
            .map_err(|e| e.to_string())?;
        for (strategy, points) in series {
            let c = colour(strategy);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(*strategy)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The two plots of one scenario.
pub fn scenario_svgs(
    scenario: &Scenario,
    timeline: Timeline,
    runs: &Runs<'_>,
) -> Result<String, String> {
    let good: Vec<_> = runs
        .iter()
        .map(|(s, samples)| (*s, goodput(samples, timeline.end)))
        .collect();
    let tail: Vec<_> = runs
        .iter()
        .map(|(s, samples)| (*s, p99(samples, timeline.end)))
        .collect();
    Ok(format!(
        "{}{}",
        chart(
            &format!("{}: goodput (fault shaded)", scenario.name),
            "successful calls/s",
            timeline,
            &good
        )?,
        chart(
            &format!("{}: p99 latency per second", scenario.name),
            "ms",
            timeline,
            &tail
        )?
    ))
}

/// Text made safe for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The whole page: what was run, the table, then each scenario's plots.
pub fn page(command: &str, rows: &[Row], sections: &[(&Scenario, String)]) -> String {
    let mut out = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>lazybreaker outage lab</title><style>\
         body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
         table{border-collapse:collapse}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}\
         td:nth-child(-n+2),th:nth-child(-n+2){text-align:left}svg{display:block;margin:.5em 0}\
         </style></head><body><h1>lazybreaker outage lab</h1>",
    );
    out.push_str(&format!("<p><code>{}</code></p>", escape(command)));
    out.push_str("<table><thead><tr>");
    let table = report::table(rows);
    let mut lines = table.lines();
    if let Some(header) = lines.next() {
        for cell in header.trim_matches('|').split('|') {
            out.push_str(&format!("<th>{}</th>", escape(cell.trim())));
        }
    }
    out.push_str("</tr></thead><tbody>");
    for line in lines.skip(1) {
        out.push_str("<tr>");
        for cell in line.trim_matches('|').split('|') {
            out.push_str(&format!("<td>{}</td>", escape(cell.trim())));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    for (scenario, svgs) in sections {
        out.push_str(&format!(
            "<h2 id=\"{0}\">{0}</h2><p>{1}</p>{svgs}",
            escape(scenario.name),
            escape(scenario.what)
        ));
    }
    out.push_str("</body></html>\n");
    out
}
