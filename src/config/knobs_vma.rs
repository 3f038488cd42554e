//! Knobs of the VMA-lookup work (find_vma structures and caches, their workloads, trace replay).

use super::knobs::{float, int, knob, Kind, Knob};

pub const VMA_CACHES: &[&str] = &["auto", "none", "mm", "per-thread"];
pub const VMA_TREES: &[&str] = &["auto", "rbtree", "maple"];

pub static VMA_KNOBS: &[Knob] = &[
    // ---- kernel ----
    knob!("kernel.vma_cache", Kind::Enum(VMA_CACHES), "\"auto\"", "", "Cache in front of find_vma(): 'mm' = one mm->mmap_cache per mm (before 3.15), 'per-thread' = the 4-slot task vmacache (3.15-6.0), 'none' (6.1+); auto = the preset's.", "mm/mmap.c find_vma(); mm/vmacache.c (615d6e8756c8, removed in 6.1)"),
    knob!("kernel.vma_tree", Kind::Enum(VMA_TREES), "\"auto\"", "", "Structure find_vma() walks on a cache miss: the augmented rbtree (until 6.0) or the maple tree (6.1+); auto = the preset's.", "mm/mmap.c; lib/maple_tree.c mt_find()"),
    // ---- cost ----
    knob!("cost.find_vma_call_cycles", float(0.0, 1e6), "20", "cycles", "find_vma() call, mmap_lock assertion and return, outside cache probes and tree nodes.", "a non-inlined call with a few branches: ~10-30 cycles"),
    knob!("cost.vmacache_probe_cycles", float(0.0, 1e6), "4", "cycles", "Checking one cache slot (a VMA pointer in the task or mm struct, then vm_start/vm_end of a recently used VMA, L1-resident).", "2 dependent L1 loads + compare: 4-5 cycles each (Intel optimisation manual)"),
    knob!("cost.rbtree_node_cycles", float(0.0, 1e6), "40", "cycles", "One rbtree node visited by find_vma(): a dependent load of a vm_area_struct line (vm_rb, vm_start, vm_end) that usually misses L1/L2.", "pointer chase through VMAs: L2 ~14, LLC ~40-60 cycles (Intel optimisation manual; Westmere-EX LLC ~45)"),
    knob!("cost.maple_node_cycles", float(0.0, 1e6), "70", "cycles", "One maple node visited by mt_find(): a 256-byte node (4 lines), of which the pivot scan touches ~1-2 lines at LLC latency plus the slot compare loop.", "lib/maple_tree.c node layout (maple_range_64: 16 pivots); mechanisms.md sec. 4: each node ~1-4 cache lines"),
    knob!("cost.find_vma_ghz", float(0.01, 100.0), "2.4", "GHz", "Clock that turns find_vma cycles into simulated time.", "the seed's 80-core 8-socket Xeon E7 (Westmere-EX) class machine: 2.4 GHz"),
    // ---- workload: VMA-lookup workloads (kind = boot | kbuild | database | ebizzy | trace) ----
    knob!("workload.vma.scale", float(0.001, 1000.0), "1", "", "Multiplies the amount of work of the boot/kbuild/database workloads (processes or operations), not their shape.", "-"),
    knob!("workload.boot.processes", int(1, 1 << 20), "240", "", "boot: short-lived processes (systemd units, udev helpers, shell scripts), spawned by vfork+exec.", "a desktop boot runs a few hundred processes (systemd-analyze, ps accounting)"),
    knob!("workload.boot.parallel", int(1, 4096), "8", "", "boot: processes starting at once (units started in parallel).", "systemd's parallel unit start"),
    knob!("workload.kbuild.jobs", int(1, 4096), "8", "", "kbuild: make -j N (compiler processes at once).", "make -j N"),
    knob!("workload.kbuild.files", int(1, 1 << 20), "48", "", "kbuild: translation units compiled (one cc1 and one as process each).", "-"),
    knob!("workload.database.processes", int(1, 4096), "16", "", "database: server processes attached to the shared segment (Oracle dedicated servers are single-threaded processes).", "Oracle 11g process architecture"),
    knob!("workload.database.sga_mib", int(1, 1 << 24), "256", "MiB", "database: the shared segment (SGA), mapped shared with 4 KiB pages.", "the seed's run used 4 KiB pages (no hugetlb SGA)"),
    knob!("workload.database.ops", int(1, 1 << 40), "6000", "", "database: operations per server process (each runs code, reads/writes SGA buffers, grows its private heap).", "-"),
    knob!("workload.ebizzy.threads", int(1, 1 << 16), "80", "", "ebizzy -t: threads (the seed's run: 80 on 80 cores).", "ebizzy -t; seed 003"),
    knob!("workload.ebizzy.chunks", int(1, 1 << 20), "10", "", "ebizzy -n: chunks of memory to search.", "ebizzy default 10"),
    knob!("workload.ebizzy.chunk_kib", int(1, 1 << 24), "512", "KiB", "ebizzy -s: chunk size.", "ebizzy default 512 KiB (record_size * 64 * 1024)"),
    knob!("workload.ebizzy.iterations", int(1, 1 << 40), "12", "", "Searches per thread (ebizzy runs for -S seconds; the model runs a fixed count instead).", "-"),
    knob!("workload.ebizzy.mmap", Kind::Enum(&["malloc", "always", "never"]), "\"malloc\"", "", "ebizzy's allocator: 'malloc' = glibc malloc (mmap above the dynamic threshold, then per-thread arenas), 'always' = -m (mmap/munmap every copy), 'never' = -M (mallopt(M_MMAP_MAX, 0)).", "ebizzy.c alloc_mem(); glibc malloc.c"),
    knob!("workload.ebizzy.random_size", Kind::Bool, "false", "", "ebizzy -R: random copy sizes (a non-zero multiple of the record size up to the chunk size).", "ebizzy -R"),
    knob!("workload.ebizzy.prevent_merge", Kind::Enum(&["none", "permissions", "holes"]), "\"none\"", "", "ebizzy -p (alternate chunk permissions) or -P (holes between chunks): keep the chunks separate VMAs.", "ebizzy -p / -P"),
    knob!("workload.trace.file", Kind::Str, "\"\"", "", "trace: the recorded trace to replay (from `mmsim trace record`), relative to the scenario file.", "-"),
];
