//! Progress of a long run on stderr (issue 13, item 6): shown only when stderr is a terminal and
//! only once the run has taken more than a second; nothing at all otherwise. It reads the wall
//! clock, as the front end may; the simulation never sees it and its output does not change.
//!
//! Shown: simulated time, engine steps per second (a step is one user access run, one fault or
//! one syscall — the engine's events), and, when the planned work is known (synthetic
//! workloads: accesses per thread x threads), the share done and an ETA. Op programs have no
//! known total (loops, faults, reclaim), so they show no ETA rather than a wrong one.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::sim::Sim;
use crate::workload::Body;

/// Steps between two calls of the [`Sim::run_observed`] callback.
pub const STEPS_PER_CALL: u64 = 1 << 20;

/// Accesses still to run by synthetic-workload tasks, or None when some task runs an op
/// program (no known total).
pub fn synth_remaining(sim: &Sim) -> Option<u64> {
    let mut left = 0;
    let mut any = false;
    for t in &sim.tasks {
        match t.prog.as_deref().map(|p| &p.body) {
            Some(Body::Synth(st)) => {
                left += st.remaining;
                any = true;
            }
            Some(Body::Ops { .. }) | Some(Body::Vma(_)) => return None,
            _ => {}
        }
    }
    any.then_some(left)
}

pub struct RunProgress {
    bar: Option<ProgressBar>,
    start: Instant,
    planned: Option<u64>,
    calls: u64,
}

impl RunProgress {
    /// Before the run: `sim` is built, nothing has run.
    pub fn new(sim: &Sim) -> RunProgress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
            b
        });
        RunProgress { bar, start: Instant::now(), planned: synth_remaining(sim), calls: 0 }
    }

    /// Every [`STEPS_PER_CALL`] steps.
    pub fn update(&mut self, sim: &Sim) {
        self.calls += 1;
        let Some(bar) = &self.bar else { return };
        let wall = self.start.elapsed();
        if wall < Duration::from_secs(1) {
            return;
        }
        if bar.is_hidden() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        let sim_ms = sim.running_cpu.map_or(0, |c| sim.cpus[c.0 as usize].clock) as f64 / 1e6;
        let rate = (self.calls * STEPS_PER_CALL) as f64 / wall.as_secs_f64();
        let mut msg = format!("simulated {sim_ms:.1} ms, {:.1} M steps/s", rate / 1e6);
        if let (Some(total), Some(left)) = (self.planned, synth_remaining(sim)) {
            let done = total.saturating_sub(left);
            if total > 0 && done > 0 {
                let f = done as f64 / total as f64;
                let eta = wall.as_secs_f64() * (1.0 - f) / f;
                msg.push_str(&format!(", {:.1}% of {total} accesses, ETA {eta:.0} s", 100.0 * f));
            }
        }
        bar.set_message(msg);
        bar.tick();
    }

    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
