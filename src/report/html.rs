//! `--report out.html`: one self-contained HTML file (no scripts, no network) with the run's
//! configuration, the kernel-format tables and plots drawn by the plotters crate's SVG backend,
//! embedded inline. Every plot is a `<figure class="plot" id="plot-…">` holding one `<svg>`
//! (tests/report.rs checks them in headless Chromium).

use std::fmt::Write;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use serde_json::Value;

use super::timeline::TimelineReport;
use super::Report;

const W: u32 = 880;
const H: u32 = 320;

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\n\
body{{font-family:sans-serif;max-width:960px;margin:1em auto;padding:0 1em;color:#222}}\n\
h1{{font-size:1.4em}} h2{{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}}\n\
pre{{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}}\n\
table{{border-collapse:collapse;font-size:.85em}} td,th{{border:1px solid #ddd;padding:2px 6px;text-align:right}}\n\
td:first-child,th:first-child{{text-align:left}}\n\
figure.plot{{margin:1em 0}} figure.plot svg{{max-width:100%;height:auto}}\n\
.grid{{display:flex;flex-wrap:wrap;gap:8px}} .grid figure.plot{{margin:0}}\n\
</style>\n</head>\n<body>\n{}</body>\n</html>\n",
        esc(title),
        body
    )
}

/// An SVG drawn into a string by `draw`, with the XML prolog removed so it can sit inline.
fn svg(size: (u32, u32), draw: impl FnOnce(DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        draw(root)?;
    }
    let start = buf.find("<svg").unwrap_or(0);
    Ok(buf[start..].to_string())
}

fn figure(id: &str, caption: &str, svg: &str) -> String {
    format!("<figure class=\"plot\" id=\"plot-{id}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n", esc(caption))
}

/// An axis label: 250000 → "250k", 0.5 → "0.5".
fn axis(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A line plot of named series over simulated time (ms).
fn line_plot(title: &str, ylabel: &str, series: &[(String, Vec<(f64, f64)>)], legend_at: SeriesLabelPosition) -> Result<String, String> {
    let xmax = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).fold(0.0f64, f64::max).max(1e-6);
    let ymax = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.08 } else { 1.0 };
    svg((W, H), |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(8)
            .x_label_area_size(38)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(|x| e(&x))?;
        chart.configure_mesh().x_desc("simulated time (ms)").y_desc(ylabel).y_label_formatter(&|v| axis(*v)).light_line_style(WHITE.mix(0.0)).draw().map_err(|x| e(&x))?;
        let legend = series.len() <= 12;
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let s = chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2))).map_err(|x| e(&x))?;
            if legend {
                s.label(name.as_str()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            }
        }
        if legend && !series.is_empty() {
            chart.configure_series_labels().position(legend_at).background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))
    })
}

/// A bar chart: one bar per (label, value), coloured by `colour_of(index)`.
fn bar_plot(title: &str, bars: &[(String, f64)], colour_of: impl Fn(usize) -> RGBColor) -> Result<String, String> {
    let ymax = bars.iter().map(|b| b.1).fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let n = bars.len() as u32;
    svg((430, 260), |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 13))
            .margin(6)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d((0u32..n).into_segmented(), 0f64..ymax)
            .map_err(|x| e(&x))?;
        let fmt = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => bars.get(*i as usize).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        };
        chart.configure_mesh().disable_x_mesh().x_label_formatter(&fmt).x_labels(n as usize).y_label_formatter(&|v| axis(*v)).draw().map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let i = i as u32;
                let mut r = Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), b.1)], colour_of(i as usize).filled());
                r.set_margin(0, 0, 6, 6);
                r
            }))
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))
    })
}

/// The three timeline plots of a run: shootdown IRQs/s per CPU, memory per node and tier, and
/// faults/migrations/reclaim per second.
pub fn timeline_plots(tl: &TimelineReport) -> Result<String, String> {
    let dur = tl.durations();
    let t_ms: Vec<f64> = tl.t_ns.iter().map(|&t| t as f64 / 1e6).collect();
    let rate = |v: &[u64]| -> Vec<(f64, f64)> { v.iter().enumerate().map(|(i, &x)| (t_ms[i], x as f64 * 1e9 / dur[i] as f64)).collect() };
    let mut out = String::new();
    let cpus: Vec<(String, Vec<(f64, f64)>)> = tl.tlb_shootdowns.iter().enumerate().map(|(c, v)| (format!("CPU{c}"), rate(v))).collect();
    out += &figure("shootdowns", "TLB shootdown IRQs received per second, per CPU (the TLB: line of /proc/interrupts over time)", &line_plot("TLB shootdown IRQs/s per CPU", "IRQs/s", &cpus, SeriesLabelPosition::UpperLeft)?);
    let nodes: Vec<(String, Vec<(f64, f64)>)> = tl
        .node_used_kb
        .iter()
        .enumerate()
        .map(|(n, v)| {
            let tier = if tl.node_tier[n] == 0 { "DRAM" } else { "CPU-less tier" };
            (format!("node {n} ({tier})"), v.iter().enumerate().map(|(i, &kb)| (t_ms[i], kb as f64 / 1024.0)).collect())
        })
        .collect();
    out += &figure("memory", "Memory in use per NUMA node and tier (MemTotal - MemFree), MiB", &line_plot("Memory in use per node and tier", "MiB", &nodes, SeriesLabelPosition::UpperLeft)?);
    let get = |k: &str| tl.counters.get(k).cloned().unwrap_or_else(|| vec![0; t_ms.len()]);
    let steal: Vec<u64> = get("pgsteal_kswapd").iter().zip(get("pgsteal_direct")).map(|(a, b)| a + b).collect();
    let mm = vec![
        ("pgfault".to_string(), rate(&get("pgfault"))),
        ("pgmigrate_success".to_string(), rate(&get("pgmigrate_success"))),
        ("pgsteal (kswapd + direct)".to_string(), rate(&steal)),
    ];
    out += &figure("mm-rates", "Page faults, migrations and reclaimed pages per second (/proc/vmstat deltas)", &line_plot("Faults, migrations and reclaim per second", "events/s", &mm, SeriesLabelPosition::UpperRight)?);
    Ok(out)
}

/// The ids of the plots a run report holds (tests/report.rs looks for each).
pub const RUN_PLOTS: &[&str] = &["plot-shootdowns", "plot-memory", "plot-mm-rates"];

/// The HTML report of one run. `config` is the effective knobs, `key = value` lines.
pub fn run_report(r: &Report, config: &str) -> Result<String, String> {
    let mut b = String::new();
    let _ = writeln!(b, "<h1>mmsim run: {} (seed {})</h1>", esc(&r.scenario), r.seed);
    let shoot: u64 = r.per_cpu.tlb_shootdowns.iter().sum();
    let _ = writeln!(
        b,
        "<p>{} — simulated {:.3} ms: {} TLB shootdown IRQs, {} remote flush requests, {} page faults.</p>",
        esc(&r.outcome),
        r.time.elapsed_ns as f64 / 1e6,
        shoot,
        r.counters.get("nr_tlb_remote_flush").copied().unwrap_or(0),
        r.counters.get("pgfault").copied().unwrap_or(0)
    );
    for e in &r.errors {
        let _ = writeln!(b, "<p><b>workload error:</b> {}</p>", esc(e));
    }
    b += "<h2>Over time</h2>\n";
    match &r.timeline {
        Some(tl) => b += &timeline_plots(tl)?,
        None => b += "<p>No timeline was recorded.</p>\n",
    }
    for (title, text) in [("/proc/interrupts", r.proc_interrupts()), ("/proc/vmstat", r.proc_vmstat()), ("/proc/meminfo", r.proc_meminfo()), ("perf stat", r.perf_stat())] {
        let _ = writeln!(b, "<h2>{title}</h2>\n<pre>{}</pre>", esc(&text));
    }
    let _ = writeln!(b, "<h2>Configuration</h2>\n<pre>{}</pre>", esc(config));
    Ok(page(&format!("mmsim: {}", r.scenario), &b))
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Bars of one reproduction row: published and simulated, BEFORE/AFTER when the row has them.
fn row_bars(row: &Value) -> Vec<(String, f64)> {
    let mut bars = Vec::new();
    for side in ["published", "simulated"] {
        let short = if side == "published" { "pub" } else { "sim" };
        match row.get(side) {
            Some(v) if num(v).is_some() => bars.push((short.to_string(), num(v).unwrap())),
            Some(Value::Object(m)) if m.get("value").and_then(num).is_some() => bars.push((short.to_string(), num(&m["value"]).unwrap())),
            Some(Value::Object(m)) if m.contains_key("before") || m.contains_key("after") => {
                for k in ["before", "after", "after_v12"] {
                    if let Some(x) = m.get(k).and_then(num) {
                        bars.push((format!("{short} {k}"), x));
                    }
                }
            }
            _ => {}
        }
    }
    bars
}

/// A row's label: its string fields (machine, workload, case…) then the metric.
pub fn row_label(row: &Value) -> String {
    let Some(m) = row.as_object() else { return String::new() };
    let mut parts: Vec<String> = m.iter().filter(|(k, v)| *k != "metric" && v.is_string()).map(|(_, v)| v.as_str().unwrap().to_string()).collect();
    if let Some(mt) = m.get("metric").and_then(Value::as_str) {
        parts.push(mt.to_string());
    }
    parts.join(" / ")
}

/// The HTML report of a reproduction (`{"experiment", "rows": [...]}`): published vs simulated
/// bars per metric, and the rows as a table.
pub fn reproduce_report(v: &Value) -> Result<(String, usize), String> {
    let exp = v.get("experiment").and_then(Value::as_str).unwrap_or("?");
    let rows = v.get("rows").and_then(Value::as_array).ok_or("the reproduction JSON has no \"rows\" array")?;
    let mut b = String::new();
    let _ = writeln!(b, "<h1>mmsim reproduce {}</h1>", esc(exp));
    b += "<p>Published figures beside simulated ones, per metric (blue: published, orange: simulated). \
Rows whose values are not numbers (histograms) are in the table only.</p>\n<h2>Published vs simulated</h2>\n<div class=\"grid\">\n";
    let mut plots = 0;
    for (i, row) in rows.iter().enumerate() {
        let bars = row_bars(row);
        if bars.is_empty() {
            continue;
        }
        let label = row_label(row);
        let colours: Vec<RGBColor> = bars.iter().map(|(n, _)| if n.starts_with("pub") { RGBColor(70, 110, 190) } else { RGBColor(230, 140, 40) }).collect();
        let s = bar_plot(&label, &bars, |j| colours[j])?;
        b += &figure(&format!("row-{i}"), &label, &s);
        plots += 1;
    }
    b += "</div>\n<h2>Rows</h2>\n<table>\n<tr><th>row</th><th>published</th><th>simulated</th></tr>\n";
    for row in rows {
        let show = |k: &str| row.get(k).map(|x| if x.to_string().len() > 120 { format!("{}…", &x.to_string()[..120]) } else { x.to_string() }).unwrap_or_default();
        let _ = writeln!(b, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&row_label(row)), esc(&show("published")), esc(&show("simulated")));
    }
    b += "</table>\n";
    let other: Vec<String> = v.as_object().map(|m| m.iter().filter(|(k, _)| *k != "rows" && *k != "experiment").map(|(k, x)| format!("{k} = {x}")).collect()).unwrap_or_default();
    let _ = writeln!(b, "<h2>Configuration</h2>\n<pre>experiment = {}\n{}</pre>", esc(exp), esc(&other.join("\n")));
    Ok((page(&format!("mmsim reproduce {exp}"), &b), plots))
}
