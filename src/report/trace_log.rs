//! `mmsim run --trace F`: tracepoint events in `trace-cmd report`'s text layout, streamed.
//!
//! Each event is formatted and written the moment the model fires it, through a `BufWriter` of
//! fixed capacity ([`TRACE_BUF_BYTES`]): the log is never held in memory, so a run whose trace is
//! many gigabytes needs no more host memory than one without.
//!
//! Events and fields follow the kernel's tracepoints (include/trace/events/tlb.h, migrate.h,
//! vmscan.h, ipi.h, arch/x86/include/asm/trace/exceptions.h), as trace-cmd's plugins print them:
//!
//! ```text
//!            mmsim-1001  [003]     0.001234: tlb_flush:            pages=1 reason=remote shootdown (1)
//! ```
//!
//! Departures, said here and in docs/report.md: `comm` is `mmsim` for workload threads and
//! `kswapdN` for kswapd, the pid is 1000 + mmsim's task id; the timestamp is the simulated clock
//! of the CPU that fires the event, in seconds since the start of the run. Lines are in the order
//! the model fires them: a remote CPU's handler runs (and is stamped) on that CPU's clock, which
//! may be a little behind the initiator's, so the file is not globally sorted by time the way
//! trace-cmd sorts its per-CPU buffers. page_fault_user's `ip` is 0 (the model has no
//! instruction pointers); mm_vmscan_lru_shrink_inactive's counters that the model does not
//! keep (nr_dirty, nr_writeback, nr_congested, nr_immediate, nr_activate_*, nr_ref_keep,
//! nr_unmap_fail) print 0.

use std::fmt;
use std::io::{self, BufWriter, Write};

use crate::arch::x86::mm::tlb::FlushReason;
use crate::sim::Sim;
use crate::types::*;

/// The writer's buffer: the most trace text ever held in memory.
pub const TRACE_BUF_BYTES: usize = 64 * 1024;

/// One tracepoint hit, with the kernel's field names.
#[derive(Clone, Copy, Debug)]
pub enum TraceEvent {
    /// tlb:tlb_flush. `pages` is -1 for TLB_FLUSH_ALL, as the kernel prints it (%ld).
    TlbFlush { reason: FlushReason, pages: i64 },
    /// ipi:ipi_send_cpu: a TLB-shootdown IPI from flush_tlb_multi() to `cpu`.
    IpiSendCpu { cpu: u32 },
    /// exceptions:page_fault_user (x86 error code: 2 write, 4 user, 16 instruction fetch).
    PageFaultUser { address: u64, error_code: u64 },
    /// migrate:mm_migrate_pages for one migrate_pages() call.
    /// `numa`: migrate_misplaced_folio() (MIGRATE_ASYNC, MR_NUMA_MISPLACED), else a move_pages()
    /// range (MIGRATE_SYNC, MR_SYSCALL).
    MmMigratePages { succeeded: u64, failed: u64, numa: bool },
    /// vmscan:mm_vmscan_lru_shrink_inactive for one batch of an inactive list.
    LruShrinkInactive { nid: u32, nr_scanned: u64, nr_reclaimed: u64, priority: u32, file: bool },
    /// vmscan:mm_vmscan_direct_reclaim_begin: `try_to_free_pages()` starts (order-0 user and
    /// page-cache allocations, GFP_HIGHUSER_MOVABLE).
    DirectReclaimBegin,
    /// vmscan:mm_vmscan_direct_reclaim_end: what it reclaimed.
    DirectReclaimEnd { nr_reclaimed: u64 },
}

impl TraceEvent {
    /// `system:name` of the tracepoint.
    pub fn full_name(&self) -> &'static str {
        match self {
            TraceEvent::TlbFlush { .. } => "tlb:tlb_flush",
            TraceEvent::IpiSendCpu { .. } => "ipi:ipi_send_cpu",
            TraceEvent::PageFaultUser { .. } => "exceptions:page_fault_user",
            TraceEvent::MmMigratePages { .. } => "migrate:mm_migrate_pages",
            TraceEvent::LruShrinkInactive { .. } => "vmscan:mm_vmscan_lru_shrink_inactive",
            TraceEvent::DirectReclaimBegin => "vmscan:mm_vmscan_direct_reclaim_begin",
            TraceEvent::DirectReclaimEnd { .. } => "vmscan:mm_vmscan_direct_reclaim_end",
        }
    }

    fn name(&self) -> &'static str {
        let n = self.full_name();
        &n[n.find(':').unwrap() + 1..]
    }
}

impl crate::arch::x86::mm::tlb::FlushInfo {
    /// Pages as native_flush_tlb_multi() traces them; -1 (TLB_FLUSH_ALL) for a full flush.
    pub fn nr_pages(&self) -> i64 {
        if self.end == crate::arch::x86::mm::tlb::FLUSH_ALL { -1 } else { ((self.end - self.start) << PAGE_SHIFT >> self.stride_shift) as i64 }
    }
}

/// `enum tlb_flush_reason`'s strings (include/trace/events/tlb.h) and values.
pub fn reason_str(r: FlushReason) -> (&'static str, u32) {
    match r {
        FlushReason::OnTaskSwitch => ("flush on task switch", 0),
        FlushReason::RemoteShootdown => ("remote shootdown", 1),
        FlushReason::LocalShootdown => ("local shootdown", 2),
        FlushReason::LocalMmShootdown => ("local mm shootdown", 3),
        FlushReason::RemoteSendIpi => ("remote ipi send", 4),
        FlushReason::RemoteWrongCpu => ("remote wrong CPU", 5),
    }
}

impl fmt::Display for TraceEvent {
    /// The fields as trace-cmd prints them (its tlb plugin writes `pages=`/`reason=`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TraceEvent::TlbFlush { reason, pages } => {
                let (s, v) = reason_str(reason);
                write!(f, "pages={pages} reason={s} ({v})")
            }
            TraceEvent::IpiSendCpu { cpu } => write!(f, "cpu={cpu} callsite=flush_tlb_multi callback=flush_tlb_func"),
            TraceEvent::PageFaultUser { address, error_code } => write!(f, "address=0x{address:x} ip=0x0 error_code=0x{error_code:x}"),
            TraceEvent::MmMigratePages { succeeded, failed, numa } => write!(
                f,
                "nr_succeeded={succeeded} nr_failed={failed} nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 mode={} reason={}",
                if numa { "MIGRATE_ASYNC" } else { "MIGRATE_SYNC" },
                if numa { "numa_misplaced" } else { "syscall_or_cpuset" }
            ),
            TraceEvent::LruShrinkInactive { nid, nr_scanned, nr_reclaimed, priority, file } => write!(
                f,
                "nid={nid} nr_scanned={nr_scanned} nr_reclaimed={nr_reclaimed} nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=0 nr_unmap_fail=0 priority={priority} flags={}",
                if file { "RECLAIM_WB_FILE|RECLAIM_WB_ASYNC" } else { "RECLAIM_WB_ANON|RECLAIM_WB_ASYNC" }
            ),
            TraceEvent::DirectReclaimBegin => write!(f, "order=0 gfp_flags=GFP_HIGHUSER_MOVABLE"),
            TraceEvent::DirectReclaimEnd { nr_reclaimed } => write!(f, "nr_reclaimed={nr_reclaimed}"),
        }
    }
}

/// Which events get written: `--events`, `--trace-cpus`, `--trace-window`.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// `system:name` or `system:*` patterns; empty = every event.
    pub events: Vec<String>,
    /// CPUs to keep; empty = all.
    pub cpus: Vec<u32>,
    /// [from, to) in simulated ns.
    pub window: Option<(Ns, Ns)>,
}

impl Filter {
    fn wants(&self, ev: &TraceEvent, cpu: u32, t: Ns) -> bool {
        if let Some((a, b)) = self.window {
            if t < a || t >= b {
                return false;
            }
        }
        if !self.cpus.is_empty() && !self.cpus.contains(&cpu) {
            return false;
        }
        self.events.is_empty() || self.events.iter().any(|p| event_matches(p, ev.full_name()))
    }
}

fn event_matches(pattern: &str, full: &str) -> bool {
    if pattern == "*" || pattern == full {
        return true;
    }
    let (sys, name) = full.split_once(':').unwrap();
    match pattern.split_once(':') {
        Some((ps, "*")) => ps == sys,
        Some(_) => false,
        None => pattern == name || pattern == sys,
    }
}

/// The events `--events` accepts, for its error message.
pub const EVENTS: &[&str] = &["tlb:tlb_flush", "ipi:ipi_send_cpu", "exceptions:page_fault_user", "migrate:mm_migrate_pages", "vmscan:mm_vmscan_lru_shrink_inactive"];

/// Parse `--events a,b:*,...`; an unknown event is an error naming it.
pub fn parse_events(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for p in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !EVENTS.iter().any(|e| event_matches(p, e)) {
            return Err(format!("--events: no event matches '{p}'; events: {}", EVENTS.join(", ")));
        }
        out.push(p.to_string());
    }
    Ok(out)
}

/// Parse a CPU list: `0,2-5`.
pub fn parse_cpus(list: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for p in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || format!("--trace-cpus: '{p}' is not a CPU number or range (e.g. 0,2-5)");
        match p.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(p.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

/// Parse a simulated duration: `250us`, `1ms`, `2s`, `500ns` (a bare number is ns).
pub fn parse_duration(s: &str) -> Result<Ns, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else {
        (s, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok((v * mult).round() as Ns),
        _ => Err(format!("'{s}' is not a duration (e.g. 500ns, 250us, 1ms, 2s)")),
    }
}

/// Parse `--trace-window FROM:TO` (durations; either side may be empty).
pub fn parse_window(s: &str) -> Result<(Ns, Ns), String> {
    let Some((a, b)) = s.split_once(':') else {
        return Err(format!("--trace-window: '{s}' is not FROM:TO (e.g. 1ms:2ms, :500us)"));
    };
    let a = if a.trim().is_empty() { 0 } else { parse_duration(a).map_err(|e| format!("--trace-window: {e}"))? };
    let b = if b.trim().is_empty() { Ns::MAX } else { parse_duration(b).map_err(|e| format!("--trace-window: {e}"))? };
    if a >= b {
        return Err(format!("--trace-window: '{s}': FROM must be before TO"));
    }
    Ok((a, b))
}

/// The tracepoint sink of a run (`Sim::tracer`).
pub struct Tracer {
    out: BufWriter<Box<dyn Write + Send>>,
    filter: Filter,
    /// Events written, and bytes written, so far.
    pub written: u64,
    pub bytes: u64,
    /// The first write error; later events are dropped and the run reports it at the end.
    pub error: Option<io::Error>,
}

impl Tracer {
    /// A tracer writing to `out`, with trace-cmd's header line.
    pub fn new(out: Box<dyn Write + Send>, filter: Filter, ncpus: usize) -> Tracer {
        let mut t = Tracer { out: BufWriter::with_capacity(TRACE_BUF_BYTES, out), filter, written: 0, bytes: 0, error: None };
        t.put(format_args!("cpus={ncpus}\n"));
        t
    }

    fn put(&mut self, args: fmt::Arguments<'_>) {
        if self.error.is_some() {
            return;
        }
        let mut counter = Counting { inner: &mut self.out, n: 0 };
        if let Err(e) = counter.write_fmt(args) {
            self.error = Some(e);
        }
        self.bytes += counter.n;
    }

    /// The capacity of the writer's buffer (for the bounded-memory test).
    pub fn buffer_capacity(&self) -> usize {
        self.out.capacity()
    }

    /// Flush the buffer; returns the first error met while tracing.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }

    fn record(&mut self, comm: &str, pid: u32, cpu: u32, t: Ns, ev: &TraceEvent) {
        if !self.filter.wants(ev, cpu, t) {
            return;
        }
        self.written += 1;
        let task = format!("{comm}-{pid}");
        let name = format!("{}:", ev.name());
        self.put(format_args!("{task:>16} [{cpu:03}] {:6}.{:06}: {name:<21} {ev}\n", t / 1_000_000_000, (t % 1_000_000_000) / 1000));
    }
}

struct Counting<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Sim {
    /// Fire a tracepoint on `cpu`. The model calls this in one line at the kernel's trace
    /// site; with no tracer it is one branch and `ev` is never built.
    #[inline]
    pub fn trace(&mut self, cpu: CpuId, ev: impl FnOnce() -> TraceEvent) {
        if self.tracer.is_some() {
            self.trace_slow(cpu, ev());
        }
    }

    #[cold]
    fn trace_slow(&mut self, cpu: CpuId, ev: TraceEvent) {
        let ci = cpu.0 as usize;
        let t = self.cpus[ci].clock;
        let (comm, pid) = match self.cpus[ci].current {
            Some(tid) => {
                let task = &self.tasks[tid.0 as usize];
                if task.mm.is_none() && task.tgid > u32::MAX - 1024 {
                    // start_kswapds() gives kswapd of node n the tgid u32::MAX - n.
                    (format!("kswapd{}", u32::MAX - task.tgid), 1000 + tid.0)
                } else if task.mm.is_none() {
                    ("kthread".to_string(), 1000 + tid.0)
                } else {
                    ("mmsim".to_string(), 1000 + tid.0)
                }
            }
            None => ("<idle>".to_string(), 0),
        };
        if let Some(tr) = self.tracer.as_mut() {
            tr.record(&comm, pid, cpu.0, t, &ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_patterns() {
        assert!(event_matches("tlb:tlb_flush", "tlb:tlb_flush"));
        assert!(event_matches("vmscan:*", "vmscan:mm_vmscan_lru_shrink_inactive"));
        assert!(!event_matches("vmscan:*", "tlb:tlb_flush"));
        assert!(event_matches("tlb_flush", "tlb:tlb_flush"));
        assert!(parse_events("tlb:tlb_flush,migrate:*").is_ok());
        assert!(parse_events("tlb:flush_everything").unwrap_err().contains("no event matches"));
    }

    #[test]
    fn durations_cpus_windows() {
        assert_eq!(parse_duration("250us").unwrap(), 250_000);
        assert_eq!(parse_duration("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration("2s").unwrap(), 2_000_000_000);
        assert_eq!(parse_duration("7").unwrap(), 7);
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_cpus("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpus("3-1").is_err());
        assert_eq!(parse_window(":1ms").unwrap(), (0, 1_000_000));
        assert!(parse_window("2ms:1ms").is_err());
    }

    #[test]
    fn line_layout_is_trace_cmd_report() {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut t = Tracer::new(Box::new(Shared(buf.clone())), Filter::default(), 4);
        t.record("mmsim", 1001, 3, 1_234_567_890, &TraceEvent::TlbFlush { reason: FlushReason::RemoteShootdown, pages: 1 });
        t.finish().unwrap();
        let s = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(s, "cpus=4\n      mmsim-1001 [003]      1.234567: tlb_flush:            pages=1 reason=remote shootdown (1)\n");
        assert_eq!(t.bytes as usize, s.len());
    }
}
