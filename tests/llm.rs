//! The LLM-inference workload (`workload.kind = "llm"`, src/workload/llm.rs): seed 000's
//! llama.cpp runs, the workload LUF is measured on.

mod common;

use mmsim::report::Report;

fn run(sets: &[&str]) -> Report {
    common::report_completed(&common::scenario("scenarios/llm-inference.toml", sets))
}

/// Every pass stores once per weight page (the output activations), thread 0 appends the
/// pass's K/V pages per layer, and each thread adds to the barrier's counter after each matrix:
/// the count follows from the shapes alone, however the rows are
/// split among threads. With the models in memory, each model page and text page is read from
/// the device once.
#[test]
fn each_pass_streams_every_weight_page_once() {
    let (procs, model_pages, passes, layers, ctx, text) = (2u64, 64 * 256u64, 1 + 3u64, 8u64, 4 + 3u64, 64u64);
    for threads in ["1", "4", "7"] {
        let r = run(&["workload.llm.model_mib=64", &format!("workload.llm.threads={threads}")]);
        // With more than one thread, each thread also enters ggml_barrier() after each of its
        // matrices (7 a layer): one atomic add on the barrier's counter.
        let t: u64 = threads.parse().unwrap();
        let barrier = if t > 1 { t * passes * layers * 7 } else { 0 };
        assert_eq!(r.counters["dTLB-stores"], procs * (passes * model_pages + layers * ctx + barrier), "threads={threads}");
        assert_eq!(r.counters["pgpgin"], 4 * procs * (model_pages + text), "threads={threads}: each page read once (readahead stops at i_size)");
        // No reclaim: the only remote flushes are the zero-page COW faults of activation and
        // KV pages read before they are first written (do_wp_page -> ptep_clear_flush), at most
        // one per such page, plus exit_mmap()'s full flushes (two per process here, to CPUs
        // that still hold the mm lazily, as page tables are freed; seen with --trace).
        assert_eq!(r.counters["pgsteal_kswapd"] + r.counters["pgsteal_direct"], 0);
        assert!(r.counters["nr_tlb_remote_flush"] <= r.counters["cow_fault"] + 2 * procs, "threads={threads}: {} remote flushes, {} COW faults", r.counters["nr_tlb_remote_flush"], r.counters["cow_fault"]);
    }
}

/// More weights than memory: every pass reads most of its model again, reclaim unmaps clean
/// file pages mapped by the process's other threads (remote shootdowns), and the flushes cost
/// the hot set and the text their TLB entries (dTLB store and iTLB misses). The store-miss
/// factor was 20 when a read's wait kept its CPU busy; since readers sleep (block/mod.rs), CPUs
/// whose threads wait are lazy and skip shootdowns, and wake-ups add cold misses to the fitting
/// run too: measured 14x, so the test asks for 10x.
#[test]
fn weights_larger_than_memory_are_reclaimed_with_shootdowns() {
    let fits = run(&["workload.llm.model_mib=64"]);
    let big = run(&[]); // 2 x 192 MiB on 256 MiB
    let (model_pages, passes) = (192 * 256u64, 4u64);
    assert!(big.counters["pgpgin"] / 4 > 2 * (passes - 1) * model_pages / 2, "re-reads: {}", big.counters["pgpgin"]);
    assert!(big.counters["pgsteal_kswapd"] + big.counters["pgsteal_direct"] > 2 * (passes - 1) * model_pages / 2);
    assert!(big.counters["nr_tlb_remote_flush"] > 1000, "{}", big.counters["nr_tlb_remote_flush"]);
    let rate = |r: &Report, k: &str| r.counters[k] as f64 / r.counters["dTLB-stores"] as f64;
    assert!(rate(&big, "dTLB-store-misses") > 10.0 * rate(&fits, "dTLB-store-misses"), "store misses per store: {} vs {}", rate(&big, "dTLB-store-misses"), rate(&fits, "dTLB-store-misses"));
    assert!(big.counters["iTLB-load-misses"] > 50 * fits.counters["iTLB-load-misses"].max(1));
}

#[test]
fn llm_runs_are_deterministic() {
    let a = serde_json::to_string(&run(&["workload.llm.gen_tokens=1"])).unwrap();
    let b = serde_json::to_string(&run(&["workload.llm.gen_tokens=1"])).unwrap();
    assert_eq!(a, b);
}

/// The workload draws no random numbers, so without `workload.start_jitter_us` every seed gives
/// the same run; with it each thread starts at its own time drawn from the seed, and two seeds
/// give two different runs (the reproduction's spread over seeds rests on this), each
/// deterministic.
#[test]
fn start_jitter_makes_seeds_differ() {
    // The counters and the time (the report also names its seed, which differs by design).
    let json = |sets: &[&str]| {
        let r = run(sets);
        format!("{} {}", serde_json::to_string(&r.counters).unwrap(), r.time.elapsed_ns)
    };
    let g = "workload.llm.gen_tokens=1";
    assert_eq!(json(&[g, "run.seed=1"]), json(&[g, "run.seed=2"]), "no jitter: the seed changes nothing");
    let j = "workload.start_jitter_us=1000";
    let (a, b) = (json(&[g, j, "run.seed=1"]), json(&[g, j, "run.seed=2"]));
    assert_ne!(a, b, "jitter: two seeds, two runs");
    assert_eq!(a, json(&[g, j, "run.seed=1"]), "jitter: one seed, one run");
}

/// ggml's barrier (`workload.llm.barrier`): no thread of a process starts a matrix before all
/// finished the last, so the threads finish the last pass inside the last matrix: none before
/// the barrier that let them into it. Without the barrier a thread that waited for reads falls
/// behind by more than a matrix. The waiting threads spin, so their CPUs stay in the mm and
/// receive the shootdowns of reclaim; without the barrier they run ahead and their CPUs go idle
/// (lazy) when they finish or wait.
///
/// Until 2026-11-29 the first assertion asked for the threads to end within one average
/// matrix's time (`end / 224`) of each other; the barrier does not bound that (a thread whose
/// slice of the last matrix waits for reads or reclaim ends later), and with reclaim's putback
/// after its flush (docs/reclaim.md, session 35) the scenario's process 0 ended 3.0 ms apart
/// against a 2.4 ms average matrix (0.9 ms before), inside its last matrix.
#[test]
fn barrier_keeps_threads_together_and_their_cpus_in_the_mm() {
    use mmsim::workload::Body;
    let spread = |barrier: &str| {
        let cfg = common::scenario("scenarios/llm-inference.toml", &[&format!("workload.llm.barrier={barrier}")]);
        let (sim, _) = common::run_cfg(&cfg, false);
        // Per process: the earliest and latest last token, and when its threads were let into
        // the last matrix.
        let mut last: std::collections::BTreeMap<u32, (u64, u64, u64)> = Default::default();
        for t in &sim.tasks {
            if let Some(Body::Llm(st)) = t.prog.as_deref().map(|p| &p.body) {
                let ns = st.last_token_ns.expect("every thread finished");
                let entered = sim.llm_barriers.get(st.proc_idx()).map_or(0, |b| b.prev_released_ns);
                let e = last.entry(t.tgid).or_insert((u64::MAX, 0, entered));
                *e = (e.0.min(ns), e.1.max(ns), entered);
            }
        }
        let worst = last.values().map(|(lo, hi, _)| hi - lo).max().unwrap();
        let inside = last.values().all(|&(lo, _, entered)| lo >= entered && entered > 0);
        let irqs: u64 = sim.cpus.iter().map(|c| c.stats.irq_tlb_count).sum();
        // Shootdowns per remote flush request: how many CPUs a flush finds in the mm.
        let per_flush = irqs as f64 / sim.vmstat.get(mmsim::mm::vmstat::VmEvent::NR_TLB_REMOTE_FLUSH) as f64;
        (worst, inside, sim.end_ns, per_flush)
    };
    let (with, inside, end, irqs_with) = spread("true");
    let (without, _, _, irqs_without) = spread("false");
    // 8 layers x 7 matrices per pass, 4 passes: a matrix takes ~1/224 of the run.
    let matrix = end / 224;
    assert!(inside, "with the barrier every thread ends inside the last matrix (spread {with} ns)");
    assert!(without > matrix, "without it they drift apart by more than a matrix: {without} ns vs {matrix} ns");
    // Each flush finds more CPUs in the mm with the barrier. Measured per remote flush request
    // (the number of flushes moves with reclaim's timing; this isolates whom they reach): 1.09
    // against 0.84 shootdowns (1.29x) since pcp pages stopped counting as free (2026-11-27),
    // 1.20 against 0.84 (1.43x) before. (Until then the test compared total shootdowns, 1.3x
    // asked: 17,111 against 10,400 when written, 22,162 against 16,184 before that change,
    // 21,057 against 16,257 after it, where the flush counts differ by 0.2%.)
    assert!(irqs_with > 1.2 * irqs_without, "spinning CPUs receive the shootdowns: {irqs_with:.3} vs {irqs_without:.3} per flush");
}

/// A thread the OOM killer takes never reaches the next barrier: its siblings stop waiting for
/// it instead of spinning to the end of the run (run.max_sim_ms, 60 s here; measured 60 s
/// before this rule, 0.5 s after).
#[test]
fn an_oom_killed_thread_does_not_leave_its_siblings_spinning() {
    let cfg = common::scenario("scenarios/llm-inference.toml", &["machine.mem_per_node_mib=16", "workload.llm.prompt_tokens=20000", "workload.llm.layers=8"]);
    let mut sim = mmsim::sim::Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    assert!(sim.workload_errors.iter().any(|e| e.to_string().contains("OOM")), "the case needs an OOM kill: {:?}", sim.workload_errors);
    assert!(sim.end_ns < 10_000_000_000, "the run lasted {} ns", sim.end_ns);
}
