//! mm/readahead.rs: read-around on a page-cache miss, async readahead at PG_readahead markers,
//! fault-around leaving markers and pages under I/O to a fault.

mod common;

use mmsim::config;
use mmsim::report::Report;

fn run(backing: &str, pages: u64, sets: &[&str]) -> Report {
    let text = format!("[machine]\ncpus = 2\nmem_per_node_mib = 256\n[[workload.thread]]\ncpu = 0\nops = \"\"\"\nmmap f {pages} {backing} shared prot=r\ntouch f read\n\"\"\"\n");
    let cfg = config::load_str("ra.toml", &text, &common::sets(sets)).unwrap();
    common::report_completed(&cfg)
}

/// Without readahead every page of a cold file is its own major fault and 4 KiB read.
#[test]
fn without_readahead_each_page_is_a_read() {
    let r = run("file:data", 4096, &["vm.read_ahead_kb=0"]);
    assert_eq!(r.counters["pgmajfault"], 4096);
    // pgpgin is in kB, as /proc/vmstat prints it.
    assert_eq!(r.counters["pgpgin"], 4096 * 4);
    assert_eq!(r.counters["pgfault"], 4096);
}

/// A sequential read of a cold file: one major fault (the first read-around), then async
/// windows started at each marker keep ahead of the reader; every page is read once, and
/// fault-around maps 16 pages per fault except at markers, which it leaves to a fault.
#[test]
fn a_sequential_read_is_one_major_fault_then_async_windows() {
    let n = 4096;
    let r = run("file:data", n, &[]);
    assert_eq!(r.counters["pgmajfault"], 1);
    // Every page read once; no window reaches past i_size.
    assert_eq!(r.counters["pgpgin"], n * 4);
    let faults = r.counters["pgfault"];
    assert!(faults >= n / 16 && faults <= n / 16 + n / 32 + 2, "pgfault {faults}: fault-around plus one fault per marker");
    // Waiting for in-flight windows is part of the reader's time; it is still far quicker than
    // a read per page.
    let none = run("file:data", n, &["vm.read_ahead_kb=0"]);
    assert!(r.time.elapsed_ns * 4 < none.time.elapsed_ns, "{} vs {}", r.time.elapsed_ns, none.time.elapsed_ns);
}

/// Holes of a sparse file are zero-filled by readahead without I/O.
#[test]
fn sparse_files_read_ahead_without_io() {
    let r = run("file:data sparse", 4096, &[]);
    assert_eq!(r.counters["pgpgin"], 0);
    assert_eq!(r.counters["pgmajfault"], 0);
    assert!(r.counters["pgfault"] < 4096 / 8, "pgfault {}", r.counters["pgfault"]);
}

/// A bigger window (read_ahead_kb) means fewer, larger I/Os; the window ramps up from the
/// read-around size.
#[test]
fn read_ahead_kb_sets_the_window() {
    let small = run("file:data", 4096, &["vm.read_ahead_kb=16"]);
    let big = run("file:data", 4096, &["vm.read_ahead_kb=512"]);
    assert!(big.time.elapsed_ns < small.time.elapsed_ns, "{} vs {}", big.time.elapsed_ns, small.time.elapsed_ns);
    assert!(big.counters["pgfault"] <= small.counters["pgfault"]);
}
