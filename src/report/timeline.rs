//! `mmsim run --timeline INTERVAL`: every counter sampled per interval of simulated time, like
//! `vmstat 1` and `sar -I`, into the JSON (`"timeline"`) and as CSV (`--timeline-csv`).
//!
//! A sample is taken in the event loop when the earliest pending event (the earliest CPU's
//! clock) crosses the next interval boundary, so samples are deterministic. A sample holds the
//! cumulative counters at that moment; rates are differences of neighbours. With `--report` and
//! no `--timeline`, the interval starts at [`AUTO_START_NS`] and doubles (dropping every other
//! sample) whenever more than [`AUTO_MAX_SAMPLES`] are held, so any run length gives a bounded,
//! plot-sized timeline.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

use crate::mm::vmstat::VmEvent;
use crate::sim::Sim;
use crate::types::Ns;

pub const AUTO_START_NS: Ns = 10_000;
pub const AUTO_MAX_SAMPLES: usize = 400;

/// Counters at one instant (cumulative since the start of the run).
#[derive(Clone, Debug)]
pub struct Sample {
    pub t_ns: Ns,
    /// VmEvent::ALL order.
    pub vmstat: Vec<u64>,
    /// Per CPU: TLB shootdown IRQs received (the TLB: line of /proc/interrupts).
    pub tlb_irqs: Vec<u64>,
    /// Per CPU: function-call IPIs (the CAL: line).
    pub cal_irqs: Vec<u64>,
    /// Per node: pages in use (not free).
    pub node_used: Vec<u64>,
    pub dtlb_misses: u64,
}

/// The sampler kept in `Sim::timeline`.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub interval_ns: Ns,
    /// Adaptive interval (doubles to keep at most AUTO_MAX_SAMPLES).
    pub auto: bool,
    pub next_ns: Ns,
    pub samples: Vec<Sample>,
}

impl Timeline {
    pub fn new(interval_ns: Ns) -> Timeline {
        let i = interval_ns.max(1);
        Timeline { interval_ns: i, auto: false, next_ns: i, samples: Vec::new() }
    }
    pub fn auto() -> Timeline {
        Timeline { auto: true, ..Timeline::new(AUTO_START_NS) }
    }
}

pub fn sample(sim: &Sim, t_ns: Ns) -> Sample {
    Sample {
        t_ns,
        vmstat: VmEvent::ALL.iter().map(|&e| sim.vmstat.get(e)).collect(),
        tlb_irqs: sim.cpus.iter().map(|c| c.stats.irq_tlb_count).collect(),
        cal_irqs: sim.cpus.iter().map(|c| c.stats.irq_call_count).collect(),
        node_used: sim.nodes.iter().map(|n| (n.nr_pages as u64).saturating_sub(n.nr_free)).collect(),
        dtlb_misses: sim.cpus.iter().map(|c| c.stats.dtlb_load_misses + c.stats.dtlb_store_misses).sum(),
    }
}

impl Sim {
    /// Called by the event loop with the time of the event it is about to handle (the earliest
    /// in the machine): take every sample whose boundary that time has crossed.
    #[inline]
    pub fn timeline_tick(&mut self, now: Ns) {
        if let Some(tl) = &self.timeline {
            if now >= tl.next_ns {
                self.timeline_take(now);
            }
        }
    }

    #[cold]
    fn timeline_take(&mut self, now: Ns) {
        let Some(mut tl) = self.timeline.take() else { return };
        // Counters only change when events run, so every boundary passed since the last event
        // sees the same values: one sample per boundary, stamped at the boundary.
        let s = sample(self, 0);
        while now >= tl.next_ns {
            tl.samples.push(Sample { t_ns: tl.next_ns, ..s.clone() });
            tl.next_ns += tl.interval_ns;
            if tl.auto && tl.samples.len() > AUTO_MAX_SAMPLES {
                // Keep the samples at multiples of the doubled interval.
                tl.interval_ns *= 2;
                let i = tl.interval_ns;
                tl.samples.retain(|x| x.t_ns % i == 0);
                tl.next_ns = (tl.samples.last().map(|x| x.t_ns).unwrap_or(0) / i + 1) * i;
            }
        }
        self.timeline = Some(tl);
    }
}

/// The timeline as written in the run's JSON: per-interval columns.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineReport {
    pub interval_ns: Ns,
    /// End of each interval (the last one ends with the run and may be shorter).
    pub t_ns: Vec<Ns>,
    /// Counter name → events in each interval (vmstat names, "dTLB-misses").
    pub counters: BTreeMap<String, Vec<u64>>,
    /// [cpu][interval] TLB shootdown IRQs received in the interval.
    pub tlb_shootdowns: Vec<Vec<u64>>,
    /// [cpu][interval] function-call IPIs (CAL) in the interval.
    pub call_ipis: Vec<Vec<u64>>,
    /// [node][interval] memory in use at the end of the interval, kB.
    pub node_used_kb: Vec<Vec<u64>>,
    /// Per node: 0 for nodes with CPUs (DRAM), 1 for CPU-less nodes (CXL-like far tier).
    pub node_tier: Vec<u32>,
}

impl TimelineReport {
    /// Build from a finished run: the held samples plus one at the run's end.
    pub fn from_sim(sim: &Sim) -> Option<TimelineReport> {
        let tl = sim.timeline.as_ref()?;
        let mut samples: Vec<Sample> = tl.samples.iter().filter(|s| s.t_ns < sim.end_ns).cloned().collect();
        samples.push(sample(sim, sim.end_ns));
        let ncpu = sim.cpus.len();
        let nnode = sim.nodes.len();
        let zero = Sample { t_ns: 0, vmstat: vec![0; VmEvent::ALL.len()], tlb_irqs: vec![0; ncpu], cal_irqs: vec![0; ncpu], node_used: vec![0; nnode], dtlb_misses: 0 };
        let mut r = TimelineReport {
            interval_ns: tl.interval_ns,
            t_ns: samples.iter().map(|s| s.t_ns).collect(),
            counters: BTreeMap::new(),
            tlb_shootdowns: vec![Vec::new(); ncpu],
            call_ipis: vec![Vec::new(); ncpu],
            node_used_kb: vec![Vec::new(); nnode],
            node_tier: sim.nodes.iter().map(|n| if n.has_cpus { 0 } else { 1 }).collect(),
        };
        let tiered = sim.nodes.iter().any(|n| !n.has_cpus);
        for (i, &e) in VmEvent::ALL.iter().enumerate().filter(|(_, e)| tiered || !e.is_tiering()) {
            let mut prev = &zero;
            let col = samples.iter().map(|s| {
                let d = s.vmstat[i].saturating_sub(prev.vmstat[i]);
                prev = s;
                e.kernel_value(d)
            });
            r.counters.insert(e.kernel_name().to_string(), col.collect());
        }
        let mut prev = &zero;
        let mut dtlb = Vec::new();
        for s in &samples {
            for c in 0..ncpu {
                r.tlb_shootdowns[c].push(s.tlb_irqs[c].saturating_sub(prev.tlb_irqs[c]));
                r.call_ipis[c].push(s.cal_irqs[c].saturating_sub(prev.cal_irqs[c]));
            }
            for n in 0..nnode {
                r.node_used_kb[n].push(s.node_used[n] * 4);
            }
            dtlb.push(s.dtlb_misses.saturating_sub(prev.dtlb_misses));
            prev = s;
        }
        r.counters.insert("dTLB-misses".into(), dtlb);
        Some(r)
    }

    /// Interval lengths in ns (the first starts at 0).
    pub fn durations(&self) -> Vec<Ns> {
        let mut prev = 0;
        self.t_ns.iter().map(|&t| {
            let d = t - prev;
            prev = t;
            d.max(1)
        }).collect()
    }

    /// CSV, one row per interval: time, every counter's events in the interval, per-CPU TLB and
    /// CAL IRQs in the interval, per-node memory in use (kB) at its end.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("t_s");
        for k in self.counters.keys() {
            let _ = write!(s, ",{k}");
        }
        for c in 0..self.tlb_shootdowns.len() {
            let _ = write!(s, ",cpu{c}_TLB");
        }
        for c in 0..self.call_ipis.len() {
            let _ = write!(s, ",cpu{c}_CAL");
        }
        for n in 0..self.node_used_kb.len() {
            let _ = write!(s, ",node{n}_used_kB");
        }
        s.push('\n');
        for (i, t) in self.t_ns.iter().enumerate() {
            let _ = write!(s, "{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
            for v in self.counters.values() {
                let _ = write!(s, ",{}", v[i]);
            }
            for v in self.tlb_shootdowns.iter().chain(&self.call_ipis).chain(&self.node_used_kb) {
                let _ = write!(s, ",{}", v[i]);
            }
            s.push('\n');
        }
        s
    }
}
