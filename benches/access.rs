//! Criterion benchmarks of the simulator's hot paths: a TLB-hit-heavy stream, a miss-heavy
//! stream, and a shootdown-heavy op program. `mmsim bench` reports the same streams against a
//! speed-of-light loop.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mmsim::config::{Config, Origin, ThreadSpec};
use mmsim::sim::Sim;

fn synthetic(ws_mib: f64, accesses: u64) -> Config {
    Config::defaults(&[
        "machine.cpus=1".into(),
        "machine.mem_per_node_mib=2048".into(),
        "workload.kind=synthetic".into(),
        format!("workload.working_set_mib={ws_mib}"),
        format!("workload.accesses_per_thread={accesses}"),
        "workload.text_pages=0".into(),
    ])
    .unwrap()
}

fn streams(c: &mut Criterion) {
    let mut g = c.benchmark_group("stream");
    for (name, ws, n) in [("hit_heavy", 0.125, 1_000_000u64), ("miss_heavy", 1024.0, 200_000)] {
        let cfg = synthetic(ws, n);
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut sim = Sim::build(&cfg).unwrap();
                sim.run(|_| {});
                sim.cpus[0].stats.dtlb_loads
            })
        });
    }
    g.finish();
}

fn shootdowns(c: &mut Criterion) {
    let origin = Origin { file: "<bench>".into(), line: 1 };
    let t = |cpu, ops: &str| ThreadSpec { process: 0, cpu: Some(cpu), ops: ops.into(), ops_origin: origin.clone() };
    let cfg = Config::with_threads(
        &["machine.cpus=4".into()],
        vec![t(0, "loop 200\nmmap a 64\ntouch a write\nmunmap a\nend\n"), t(1, "spin forever"), t(2, "spin forever"), t(3, "sleep forever")],
    )
    .unwrap();
    c.bench_function("munmap_storm_4cpu", |b| {
        b.iter(|| {
            let mut sim = Sim::build(&cfg).unwrap();
            sim.run(|_| {});
            sim.cpus[1].stats.irq_tlb_count
        })
    });
}

/// The reclaim path with the lock model on: seed 002's reader workload on a 2-CPU, 1 GiB
/// machine (1/16 of it simulated), one kernel each (issue 13: the lock calendars' cost).
fn reclaim(c: &mut Criterion) {
    use mmsim::reproduce::batched_flush::{run_one, Machine};
    let m = Machine { name: "bench", title: "bench", cpus: 2, nodes: 1, sockets: 1, mem_gib: 1 };
    let mut g = c.benchmark_group("reclaim");
    for (name, after) in [("lru_file_mmap_read_4_2", false), ("lru_file_mmap_read_4_3", true)] {
        g.bench_function(name, |b| b.iter(|| run_one(&m, after, 1, &[], 16, None).elapsed_s));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = streams, shootdowns, reclaim
}
criterion_main!(benches);
