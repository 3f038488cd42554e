//! Independent runs of a reproduction run in parallel (rayon, `reproduce::run_jobs`); the
//! results must be the same bytes as a sequential run, in the same order (issue 13, item 4).

use mmsim::reproduce::{batched_flush, vmacache};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool")
}

#[test]
fn parallel_vmacache_table_is_byte_identical_to_a_sequential_one() {
    let seq = pool(1).install(|| vmacache::table(&[], &[]).expect("table"));
    let par = pool(3).install(|| vmacache::table(&[], &[]).expect("table"));
    let (a, b) = (serde_json::to_string(&seq).unwrap(), serde_json::to_string(&par).unwrap());
    assert!(!seq.rows.is_empty());
    assert_eq!(a, b);
}

#[test]
fn parallel_batched_flush_runs_come_back_in_job_order_and_identical() {
    // A small machine so that the test takes seconds: two kernels x two seeds, each run a
    // different result, so an order mix-up shows.
    let m = [batched_flush::Machine { name: "test", title: "test", cpus: 2, nodes: 1, sockets: 1, mem_gib: 1 }];
    let seq = pool(1).install(|| batched_flush::run_all(&m, 2, &[], 16));
    let par = pool(3).install(|| batched_flush::run_all(&m, 2, &[], 16));
    let show = |r: &Vec<[Vec<batched_flush::RunResult>; 2]>| format!("{r:?}");
    assert_eq!(show(&seq), show(&par));
    let [b, a] = &seq[0];
    assert_eq!((b.len(), a.len()), (2, 2));
    assert!(b[0].elapsed_s != b[1].elapsed_s || b[0].elapsed_s != a[0].elapsed_s, "runs differ from each other");
}
