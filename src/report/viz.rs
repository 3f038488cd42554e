//! The `mmsim run` options for seeing a run (`--trace`, `--timeline`, `--report`) and
//! `mmsim reproduce NAME --report`: set up before the run, written after it.

use std::path::{Path, PathBuf};

use super::timeline::Timeline;
use super::trace_log::{self, Filter, Tracer};
use super::Report;
use crate::config::Config;
use crate::sim::Sim;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct VizArgs {
    /// Write tracepoint events in `trace-cmd report` text format to this file, streamed
    /// (docs/report.md).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// With --trace: events to keep, e.g. tlb:tlb_flush,migrate:*,vmscan:*,exceptions:page_fault_user,ipi:*
    /// (default: all).
    #[arg(long, value_name = "LIST", requires = "trace")]
    pub events: Option<String>,
    /// With --trace: CPUs to keep, e.g. 0,2-5.
    #[arg(long, value_name = "LIST", requires = "trace")]
    pub trace_cpus: Option<String>,
    /// With --trace: simulated-time window FROM:TO, e.g. 1ms:2ms or :500us.
    #[arg(long, value_name = "FROM:TO", requires = "trace")]
    pub trace_window: Option<String>,
    /// Sample every counter per INTERVAL of simulated time (e.g. 100us, 1ms) into the JSON's
    /// "timeline".
    #[arg(long, value_name = "INTERVAL")]
    pub timeline: Option<String>,
    /// Also write the timeline as CSV (one row per interval); implies a timeline.
    #[arg(long, value_name = "FILE")]
    pub timeline_csv: Option<PathBuf>,
    /// Write a self-contained HTML report with plots (docs/report.md).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// The tracer and sampler of a run, ready to attach.
#[derive(Default)]
pub struct Prepared {
    tracer: Option<Box<Tracer>>,
    timeline: Option<Box<Timeline>>,
}

impl Prepared {
    pub fn attach(self, sim: &mut Sim) {
        sim.tracer = self.tracer;
        sim.timeline = self.timeline;
    }
}

/// An existing path that is not a regular file (a device, a FIFO): written in place.
fn direct(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// Where a trace file is written before it is renamed into place.
fn tmp_path(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    dir.join(format!(".{name}.tmp.{}", std::process::id()))
}

impl VizArgs {
    /// Check the options and open the trace file; `Prepared::attach` then hooks them to the
    /// machine (through `Sim::build_with`). Err(exit code, message).
    pub fn prepare(&self, ncpus: usize) -> Result<Prepared, (u8, String)> {
        let mut p = Prepared::default();
        let usage = |m: String| (2u8, m);
        let interval = match &self.timeline {
            Some(s) => Some(trace_log::parse_duration(s).map_err(|e| usage(format!("--timeline: {e}")))?),
            None => None,
        };
        if interval == Some(0) {
            return Err(usage("--timeline: the interval must be above 0".into()));
        }
        match interval {
            Some(i) => p.timeline = Some(Box::new(Timeline::new(i))),
            None if self.report.is_some() || self.timeline_csv.is_some() => p.timeline = Some(Box::new(Timeline::auto())),
            None => {}
        }
        if let Some(path) = &self.trace {
            let filter = Filter {
                events: match &self.events {
                    Some(l) => trace_log::parse_events(l).map_err(usage)?,
                    None => Vec::new(),
                },
                cpus: match &self.trace_cpus {
                    Some(l) => trace_log::parse_cpus(l).map_err(usage)?,
                    None => Vec::new(),
                },
                window: match &self.trace_window {
                    Some(w) => Some(trace_log::parse_window(w).map_err(usage)?),
                    None => None,
                },
            };
            // A regular file is written beside and renamed into place at the end (atomic); a
            // device or pipe (/dev/null, a FIFO) is written directly.
            let target = if direct(path) { path.clone() } else { tmp_path(path) };
            let f = std::fs::File::create(&target).map_err(|e| (1, format!("{}: {e}", path.display())))?;
            p.tracer = Some(Box::new(Tracer::new(Box::new(f), filter, ncpus)));
        }
        Ok(p)
    }

    /// After the run: close the trace (renamed into place), write the CSV and the report.
    pub fn finish(&self, sim: &mut Sim, report: &Report, cfg: &Config, sets: &[String]) -> Result<(), (u8, String)> {
        let io = |p: &Path, e: &dyn std::fmt::Display| (1u8, format!("{}: {e}", p.display()));
        if let (Some(path), Some(mut t)) = (&self.trace, sim.tracer.take()) {
            let tmp = tmp_path(path);
            t.finish().map_err(|e| io(path, &e))?;
            drop(t);
            if !direct(path) {
                std::fs::rename(&tmp, path).map_err(|e| io(path, &e))?;
            }
        }
        if let (Some(path), Some(tl)) = (&self.timeline_csv, &report.timeline) {
            crate::output::write_atomic(path, tl.to_csv().as_bytes()).map_err(|e| io(path, &e))?;
        }
        if let Some(path) = &self.report {
            let mut conf = String::new();
            for s in sets {
                conf += &format!("# --set {s}\n");
            }
            for (k, v) in cfg.effective() {
                conf += &format!("{k} = {v}\n");
            }
            let html = super::html::run_report(report, &conf).map_err(|e| io(path, &e))?;
            crate::output::write_atomic(path, html.as_bytes()).map_err(|e| io(path, &e))?;
        }
        Ok(())
    }
}

/// `mmsim reproduce NAME --report F`: the HTML report from the reproduction's JSON.
pub fn reproduce_report_file(json: &Path, out: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    let (html, n) = super::html::reproduce_report(&v)?;
    crate::output::write_atomic(out, html.as_bytes()).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(n)
}
