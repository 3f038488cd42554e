//! Seeing results: the tracepoint log (`--trace`), timelines (`--timeline`), the HTML report
//! (`--report`, rendered in headless Chromium when one is installed) and `mmsim compare`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory in the system temp dir, removed when the returned guard drops.
fn tmpdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("mmsim-report-test-").tempdir().unwrap()
}

fn mmsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim")).current_dir(root()).args(args).output().expect("mmsim runs")
}

fn ok(args: &[&str]) -> String {
    let o = mmsim(args);
    assert!(o.status.success(), "mmsim {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn trace_tlb_flush_lines_agree_with_the_counters() {
    let d = tmpdir();
    for sc in ["scenarios/munmap-storm.toml", "scenarios/fork-cow.toml"] {
        let (t, j) = (d.path().join("agree.trace"), d.path().join("agree.json"));
        ok(&["run", sc, "--trace", t.to_str().unwrap(), "--json", j.to_str().unwrap(), "--only", "summary"]);
        let trace = std::fs::read_to_string(&t).unwrap();
        let v = json(&j);
        let c = |k: &str| v["counters"][k].as_u64().unwrap();
        let lines = |pat: &str| trace.lines().filter(|l| l.contains(pat)).count() as u64;
        // Every tlb_flush tracepoint hit is one line, and the counter counts the same hits.
        assert_eq!(lines(" tlb_flush: "), c("tlb:tlb_flush"), "{sc}");
        assert!(c("tlb:tlb_flush") > 100, "{sc}: the scenario flushes");
        // Each flush_tlb_multi() is one nr_tlb_remote_flush and one "remote ipi send".
        assert_eq!(lines("reason=remote ipi send (4)"), c("nr_tlb_remote_flush"), "{sc}");
        // Each shootdown IPI sent is one IRQ on the TLB: line of its target.
        let irqs: u64 = v["per_cpu"]["tlb_shootdowns"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
        assert_eq!(lines(" ipi_send_cpu: "), irqs, "{sc}");
        assert_eq!(lines(" page_fault_user: "), c("pgfault"), "{sc}");
    }
}

#[test]
fn trace_lines_follow_trace_cmd_report() {
    let d = tmpdir();
    let t = d.path().join("layout.trace");
    ok(&["run", "scenarios/munmap-storm.toml", "--trace", t.to_str().unwrap(), "--only", "summary"]);
    let trace = std::fs::read_to_string(&t).unwrap();
    assert!(trace.starts_with("cpus=4\n"));
    let line = trace.lines().find(|l| l.contains("reason=remote shootdown")).unwrap();
    // "      mmsim-1002 [001]      0.000123: tlb_flush:            pages=-1 reason=remote shootdown (1)"
    let (task, rest) = line.trim_start().split_once(' ').unwrap();
    assert!(task.starts_with("mmsim-"), "{line}");
    assert!(rest.trim_start().starts_with('[') && rest.contains("]"), "{line}");
    let ts = rest.split(']').nth(1).unwrap().trim_start().split(':').next().unwrap();
    let (s, us) = ts.split_once('.').unwrap();
    assert!(s.parse::<u64>().is_ok() && us.len() == 6 && us.parse::<u64>().is_ok(), "{line}");
    assert!(line.contains(": tlb_flush: ") && line.contains("pages="), "{line}");
}

#[test]
fn trace_filters_by_event_cpu_and_window() {
    let d = tmpdir();
    let t = d.path().join("filter.trace");
    ok(&["run", "scenarios/munmap-storm.toml", "--trace", t.to_str().unwrap(), "--events", "tlb:*", "--trace-cpus", "1-2", "--trace-window", "1ms:5ms", "--only", "summary"]);
    let trace = std::fs::read_to_string(&t).unwrap();
    let body: Vec<&str> = trace.lines().skip(1).collect();
    assert!(body.len() > 10, "some events pass the filter");
    for l in &body {
        assert!(l.contains(" tlb_flush: "), "{l}");
        assert!(l.contains("[001]") || l.contains("[002]"), "{l}");
        let ts: f64 = l.split(']').nth(1).unwrap().trim_start().split(": ").next().unwrap().parse().unwrap();
        assert!((0.001..0.005).contains(&ts), "{l}");
    }
    let o = mmsim(&["run", "scenarios/munmap-storm.toml", "--trace", t.to_str().unwrap(), "--events", "tlb:no_such_event"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no event matches 'tlb:no_such_event'"));
    let o = mmsim(&["run", "scenarios/munmap-storm.toml", "--timeline", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--timeline: 'soon' is not a duration"));
}

/// A writer that counts bytes and remembers the largest single write.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<(u64, usize, u64)>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let mut s = self.0.lock().unwrap();
        s.0 += b.len() as u64;
        s.1 = s.1.max(b.len());
        s.2 += 1;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log streams: it leaves through writes no larger than the fixed buffer, many times during
/// the run, so a trace of any size (10 GB) needs the same host memory as a small one.
#[test]
fn trace_streams_through_a_fixed_size_buffer() {
    use mmsim::report::trace_log::{Filter, Tracer, TRACE_BUF_BYTES};
    let cfg = mmsim::config::load(&root().join("scenarios/munmap-storm.toml"), &[]).unwrap();
    let sink = Sink::default();
    let mut sim = mmsim::sim::Sim::build_with(&cfg, |s| s.tracer = Some(Box::new(Tracer::new(Box::new(sink.clone()), Filter::default(), 4)))).unwrap();
    sim.run(|_| {});
    let written_during_run = sink.0.lock().unwrap().0;
    let mut t = sim.tracer.take().unwrap();
    assert_eq!(t.buffer_capacity(), TRACE_BUF_BYTES);
    t.finish().unwrap();
    let (bytes, largest, writes) = *sink.0.lock().unwrap();
    assert_eq!(bytes, t.bytes);
    assert!(bytes > 50 * TRACE_BUF_BYTES as u64, "the trace ({bytes} B) is many buffers long");
    assert!(largest <= TRACE_BUF_BYTES, "no write larger than the buffer ({largest} B)");
    assert!(writes >= bytes / TRACE_BUF_BYTES as u64, "{writes} writes");
    assert!(written_during_run + TRACE_BUF_BYTES as u64 >= bytes, "all but the last buffer left during the run");
}

#[test]
fn timeline_intervals_add_up_to_the_totals_and_runs_repeat() {
    let d = tmpdir();
    let (j, csv, t) = (d.path().join("tl.json"), d.path().join("tl.csv"), d.path().join("tl.trace"));
    let args = ["run", "scenarios/munmap-storm.toml", "--timeline", "1ms", "--json", j.to_str().unwrap(), "--timeline-csv", csv.to_str().unwrap(), "--trace", t.to_str().unwrap(), "--only", "summary"];
    ok(&args);
    let v = json(&j);
    let tl = &v["timeline"];
    assert_eq!(tl["interval_ns"].as_u64(), Some(1_000_000));
    let t_ns: Vec<u64> = tl["t_ns"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert!(t_ns.len() >= 10, "{} intervals", t_ns.len());
    for (i, w) in t_ns.windows(2).enumerate() {
        if i + 2 < t_ns.len() {
            assert_eq!(w[1] - w[0], 1_000_000, "intervals are 1 ms apart");
        }
    }
    assert_eq!(*t_ns.last().unwrap(), v["time"]["elapsed_ns"].as_u64().unwrap(), "the last sample is the run's end");
    for (k, col) in tl["counters"].as_object().unwrap() {
        if let Some(total) = v["counters"][k.as_str()].as_u64() {
            let sum: u64 = col.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
            assert_eq!(sum, total, "{k}");
        }
    }
    for (cpu, col) in tl["tlb_shootdowns"].as_array().unwrap().iter().enumerate() {
        let sum: u64 = col.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
        assert_eq!(sum, v["per_cpu"]["tlb_shootdowns"][cpu].as_u64().unwrap(), "CPU{cpu}");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), t_ns.len() + 1);
    assert!(text.starts_with("t_s,") && text.lines().next().unwrap().contains(",cpu0_TLB,"));
    // Same scenario and seed: byte-identical trace, JSON and CSV.
    let (a, b, c) = (std::fs::read(&t).unwrap(), std::fs::read(&j).unwrap(), std::fs::read(&csv).unwrap());
    ok(&args);
    assert!(a == std::fs::read(&t).unwrap() && b == std::fs::read(&j).unwrap() && c == std::fs::read(&csv).unwrap());
}

fn find_chromium() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.exists() {
        return Some(fixed);
    }
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("chromium")).find(|c| c.exists()))
}

/// Render `html` in headless Chromium; returns (DOM, console lines).
fn render(chromium: &Path, html: &Path) -> (String, Vec<String>) {
    let profile = html.with_file_name(format!("profile-{}", html.file_stem().unwrap().to_string_lossy()));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    let o = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", &url])
        .output()
        .expect("chromium runs");
    let console = String::from_utf8_lossy(&o.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    (String::from_utf8_lossy(&o.stdout).to_string(), console)
}

/// Every plot's figure holds a rendered <svg>.
fn plots_present(dom: &str, ids: &[String]) -> Result<(), String> {
    for id in ids {
        let at = dom.find(&format!("id=\"{id}\"")).ok_or(format!("no element {id}"))?;
        let fig = &dom[at..dom[at..].find("</figure>").map(|e| at + e).unwrap_or(dom.len())];
        if !fig.contains("<svg") || !fig.contains("</svg>") {
            return Err(format!("{id} has no <svg>"));
        }
    }
    Ok(())
}

#[test]
fn html_reports_render_in_headless_chromium() {
    let d = tmpdir();
    let (run_html, rep_html, rep_json) = (d.path().join("run.html"), d.path().join("hvo.html"), d.path().join("hvo.json"));
    ok(&["run", "scenarios/munmap-storm.toml", "--report", run_html.to_str().unwrap(), "--only", "summary"]);
    ok(&["reproduce", "hvo", "--scale", "100", "--json", rep_json.to_str().unwrap(), "--report", rep_html.to_str().unwrap()]);
    let run_text = std::fs::read_to_string(&run_html).unwrap();
    let rep_text = std::fs::read_to_string(&rep_html).unwrap();
    // Self-contained: no scripts, nothing fetched.
    for t in [&run_text, &rep_text] {
        let t = t.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!t.contains("<script") && !t.contains("http://") && !t.contains("https://") && !t.contains(" src=") && !t.contains("<link"));
    }
    let run_ids: Vec<String> = mmsim::report::html::RUN_PLOTS.iter().map(|s| s.to_string()).collect();
    assert!(run_text.contains("==&gt; /proc/interrupts") || run_text.contains("<h2>/proc/interrupts</h2>"));
    let rows = json(&rep_json)["rows"].as_array().unwrap().len();
    let rep_ids: Vec<String> = (0..rows).map(|i| format!("plot-row-{i}")).filter(|id| rep_text.contains(&format!("id=\"{id}\""))).collect();
    assert!(rep_ids.len() >= 10, "published-vs-simulated bars for the numeric rows ({})", rep_ids.len());
    plots_present(&run_text, &run_ids).unwrap();
    let Some(chromium) = find_chromium() else {
        eprintln!("SKIPPED: no chromium in /usr/bin or PATH (apt-get install chromium); the reports were written but not rendered");
        return;
    };
    for (html, ids) in [(&run_html, &run_ids), (&rep_html, &rep_ids)] {
        let (dom, console) = render(&chromium, html);
        plots_present(&dom, ids).unwrap_or_else(|e| panic!("{}: {e}", html.display()));
        assert!(console.is_empty(), "{}: console output: {console:?}", html.display());
    }
    // The check can fail: a page with a script error is caught.
    let bad = d.path().join("bad.html");
    std::fs::write(&bad, run_text.replace("</body>", "<script>notAFunction();</script></body>")).unwrap();
    let (_, console) = render(&chromium, &bad);
    assert!(console.iter().any(|l| l.contains("notAFunction")), "a script error shows on the console: {console:?}");
}

#[test]
fn compare_two_runs_and_two_reproductions() {
    let d = tmpdir();
    let (a1, a2, b) = (d.path().join("cmp-a1.json"), d.path().join("cmp-a2.json"), d.path().join("cmp-b.json"));
    ok(&["run", "scenarios/munmap-storm.toml", "--json", a1.to_str().unwrap(), "--only", "summary"]);
    ok(&["run", "scenarios/munmap-storm.toml", "--set", "workload.start_jitter_us=50", "--set", "run.seed=3", "--json", a2.to_str().unwrap(), "--only", "summary"]);
    ok(&["run", "scenarios/munmap-storm.toml", "--set", "kernel.preset=linux-4.2", "--json", b.to_str().unwrap(), "--only", "summary"]);
    let out = ok(&["compare", &format!("{},{}", a1.display(), a2.display()), b.to_str().unwrap()]);
    let row = out.lines().find(|l| l.starts_with("nr_tlb_remote_flush_received")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains('↓') && row.contains('±') && row.contains("(  base )") && row.contains('%'), "{row}");
    // Lower is better for IRQs (↓): a negative change is marked a gain (+), a positive one a
    // loss (-), whichever way the model's figures go.
    let last = row.trim_end().rsplit('(').next().unwrap().trim();
    let pct: f64 = last.split('%').next().unwrap().trim().parse().unwrap_or_else(|_| panic!("{row}"));
    let mark = if pct < 0.0 { "%+)" } else { "%-)" };
    assert!(pct != 0.0 && row.trim_end().ends_with(mark), "{row}");
    let (r1, r2) = (d.path().join("cmp-r1.json"), d.path().join("cmp-r2.json"));
    ok(&["reproduce", "hvo", "--scale", "100", "--json", r1.to_str().unwrap()]);
    std::fs::copy(&r1, &r2).unwrap();
    let out = ok(&["compare", r1.to_str().unwrap(), r2.to_str().unwrap(), "--all"]);
    assert!(out.contains("2 reproductions") && out.contains("vmemmap_pages_freed_per_2m"), "{out}");
    let o = mmsim(&["compare", r1.to_str().unwrap(), a1.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a run among reproductions is refused");
}

/// `run.profile_delay_ms` / `run.profile_duration_ms` keep the profile of a window of the run,
/// as lkp-tests' perf-profile monitor records (`perf record -a -D delay` for a duration): two
/// adjacent windows add up, symbol by symbol, to the window that spans both (their shared edge
/// is the same moment of the same deterministic run), and a window's busy time is at most its
/// CPUs times its length.
#[test]
fn profile_windows_add_up_and_cover_only_their_time() {
    let d = tmpdir();
    let window = |name: &str, delay: u32, duration: u32| -> (Value, std::collections::BTreeMap<String, u64>) {
        let j = d.path().join(format!("{name}.json"));
        let delay = format!("run.profile_delay_ms={delay}");
        let duration = format!("run.profile_duration_ms={duration}");
        ok(&["run", "scenarios/lru-file-mmap-read.toml", "--set", &delay, "--set", &duration, "--json", j.to_str().unwrap(), "--only", "summary"]);
        let v = json(&j);
        let rows = v["profile"].as_array().unwrap().iter().map(|r| (r["symbol"].as_str().unwrap().to_string(), r["children_ns"].as_u64().unwrap())).collect();
        (v["profile_window_ns"].clone(), rows)
    };
    let (wa, a) = window("a", 10, 10);
    let (wb, b) = window("b", 20, 10);
    let (wc, c) = window("c", 10, 20);
    assert_eq!(wa[1], wb[0], "a ends where b starts: {wa} {wb}");
    assert_eq!((wc[0].clone(), wc[1].clone()), (wa[0].clone(), wb[1].clone()));
    assert!(c.contains_key("shrink_inactive_list") && c["user"] > 0, "{c:?}");
    for (sym, &ns) in &c {
        assert_eq!(ns, a.get(sym).copied().unwrap_or(0) + b.get(sym).copied().unwrap_or(0), "{sym}");
    }
    // Busy time (user plus every kernel function's self time) of 8 CPUs over 20 ms.
    let j = d.path().join("c.json");
    let v = json(&j);
    let busy: u64 = v["profile"].as_array().unwrap().iter().map(|r| if r["symbol"] == "user" { r["children_ns"].as_u64().unwrap() } else { r["self_ns"].as_u64().unwrap() }).sum();
    let span = wc[1].as_u64().unwrap() - wc[0].as_u64().unwrap();
    assert!(busy > 0 && busy <= 8 * span + 8 * 1_000_000, "busy {busy} ns over {span} ns on 8 CPUs");
    // Without a window the JSON has no window field; a window after the end has no samples.
    let j = d.path().join("none.json");
    ok(&["run", "scenarios/lru-file-mmap-read.toml", "--json", j.to_str().unwrap(), "--only", "summary"]);
    assert!(json(&j).get("profile_window_ns").is_none());
    let text = ok(&["run", "scenarios/lru-file-mmap-read.toml", "--set", "run.profile_delay_ms=1e9", "--only", "profile"]);
    assert!(text.contains("the run ended before run.profile_delay_ms"), "{text}");
}
