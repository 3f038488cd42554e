//! The VMA-lookup workloads modelled on seed 003's four (system boot, kernel build, an Oracle-like
//! database, ebizzy) and the replay of recorded traces (`workload.kind = "trace"`).
//!
//! Every workload is a set of processes whose tasks make real user accesses through the MMU and
//! real mm syscalls; `find_vma` is only ever called by the kernel paths that call it in Linux
//! (page faults, mmap with a fixed address, munmap, mprotect, madvise, brk, exec's argument copy).
//! Hit rates and cycles therefore follow from the order in which a task's faults and syscalls
//! touch its VMAs, never from a rate given to the model.
//!
//! - **Processes** ([`ProcSpec`]): an executable and its shared libraries, each with text
//!   (r-x, file), rodata (r--, file), data (rw-, private file) and bss (rw-, anon) VMAs placed as
//!   ld.so places them (top-down below mmap_base), a brk heap and a stack. Each *operation* of
//!   the program fetches code from one module (the executable or a library, Zipf-weighted), reads
//!   that module's rodata, writes its data or bss now and then, allocates from the heap (brk
//!   grows it by glibc's 128 KiB top pad), uses a few stack pages, and for the database reads
//!   and writes the shared segment. Only first touches fault.
//! - **Spawners** (boot: init's parallel unit starts; kbuild: make's job slots): vfork+exec a
//!   child, copy its arguments into the new mm (`get_user_pages_remote` → `find_extend_vma` on a
//!   foreign mm: the vmacache is bypassed there), and wait for it.
//! - **ebizzy** (`ebizzy.c` 0.3): the main thread allocates and fills `-n` chunks, then `-t`
//!   threads each repeat: allocate a copy buffer, memcpy a random chunk into it, binary-search
//!   it, free it. The allocator follows glibc: `malloc` mmaps a chunk above the mmap threshold
//!   (128 KiB) until the first free of an mmapped chunk raises the threshold, after which each
//!   thread allocates from its own arena heap (64 MiB PROT_NONE reservation, mprotect'ed RW as
//!   it grows), and a free trims the arena's top with MADV_DONTNEED (glibc's `heap_trim` →
//!   `shrink_heap`, before per-arena trim thresholds were honoured) — so the copy is refaulted
//!   every iteration without any VMA being unlinked. `-m` mmaps and munmaps every copy; `-M`
//!   never mmaps.
//!
//! Departures: no exec of a forked copy (vfork+exec: the child starts with its new mm); no
//! stack growth (33-page stacks); the model never merges VMAs, so ebizzy's chunks stay separate
//! VMAs even without -p/-P, and an arena's RW part grows as new VMAs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::config::{Config, ConfigError};
use crate::engine::prng::Prng;
use crate::mm::madvise::Advice;
use crate::mm::mmap::Prot;
use crate::sim::{vm, Backing, Sim, Vma};
use crate::types::*;
use super::{Body, Program, StepResult};

/// Sizes (pages) of one module's VMAs: text, rodata, data, bss.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    pub name: &'static str,
    pub text: u64,
    pub ro: u64,
    pub data: u64,
    pub bss: u64,
}

const fn module(name: &'static str, text: u64, ro: u64, data: u64, bss: u64) -> Module {
    Module { name, text, ro, data, bss }
}

// Library sizes (pages) from /proc/PID/maps of common x86-64 distributions (glibc 2.3x).
const LD_SO: Module = module("ld-linux-x86-64.so.2", 40, 10, 2, 1);
const LIBC: Module = module("libc.so.6", 400, 100, 4, 4);
const LIBPTHREAD: Module = module("libpthread.so.0", 20, 4, 1, 1);
const LIBDL: Module = module("libdl.so.2", 2, 1, 1, 0);
const LIBM: Module = module("libm.so.6", 130, 50, 1, 0);
const LIBZ: Module = module("libz.so.1", 20, 6, 1, 0);
const LIBSELINUX: Module = module("libselinux.so.1", 40, 8, 1, 1);
const LIBPCRE: Module = module("libpcre2-8.so.0", 130, 10, 1, 0);
const LIBSYSTEMD: Module = module("libsystemd-shared.so", 500, 150, 10, 1);
const LIBGMP: Module = module("libgmp.so.10", 110, 10, 1, 0);
const LIBMPFR: Module = module("libmpfr.so.6", 100, 10, 1, 0);
const LIBMPC: Module = module("libmpc.so.3", 20, 4, 1, 0);
const LIBAIO: Module = module("libaio.so.1", 1, 1, 1, 0);
const LIBNSL: Module = module("libnsl.so.1", 20, 4, 1, 1);
const LIBCLNTSH: Module = module("libclntsh.so.11.1", 12000, 3000, 150, 20);
const LIBNNZ: Module = module("libnnz11.so", 1100, 200, 40, 2);
const LIBSTDCXX: Module = module("libstdc++.so.6", 450, 120, 10, 2);

/// What a process does: its modules and its per-operation behaviour.
#[derive(Clone, Debug)]
pub struct ProcSpec {
    pub exe: Module,
    pub libs: Vec<Module>,
    pub ops: u64,
    /// Share of operations whose code runs in the executable (the rest in libraries, Zipf).
    pub exe_pct: u64,
    /// Pages of each text that are ever executed (the hot fraction, in %).
    pub text_hot_pct: u64,
    /// Bytes malloc'ed per operation (brk heap growth).
    pub heap_bytes_per_op: u64,
    /// Stack pages used.
    pub stack_pages: u64,
    /// Database: the shared segment's accesses per operation.
    pub shared_per_op: u64,
}

/// The four process kinds of the modelled workloads.
pub fn boot_programs() -> Vec<ProcSpec> {
    let base = |exe: Module, libs: Vec<Module>, ops: u64| ProcSpec {
        exe,
        libs,
        ops,
        exe_pct: 50,
        text_hot_pct: 25,
        heap_bytes_per_op: 48,
        stack_pages: 8,
        shared_per_op: 0,
    };
    vec![
        base(module("sh", 30, 8, 2, 2), vec![LD_SO, LIBC], 1500),
        base(module("udevadm", 120, 30, 2, 1), vec![LD_SO, LIBC, LIBSYSTEMD, LIBSELINUX, LIBPCRE], 2500),
        base(module("sed", 30, 8, 1, 1), vec![LD_SO, LIBC, LIBSELINUX, LIBPCRE], 1000),
        base(module("systemd-unit", 80, 20, 2, 1), vec![LD_SO, LIBC, LIBSYSTEMD, LIBPTHREAD, LIBDL], 3000),
        base(module("mount", 20, 6, 1, 1), vec![LD_SO, LIBC, LIBSELINUX, LIBPCRE, LIBDL], 800),
    ]
}

pub fn kbuild_programs() -> Vec<ProcSpec> {
    vec![
        // cc1: a large compiler binary, a heap that grows with the translation unit.
        ProcSpec {
            exe: module("cc1", 6000, 1500, 40, 30),
            libs: vec![LD_SO, LIBC, LIBM, LIBZ, LIBGMP, LIBMPFR, LIBMPC],
            ops: 12000,
            exe_pct: 85,
            text_hot_pct: 15,
            heap_bytes_per_op: 400,
            stack_pages: 16,
            shared_per_op: 0,
        },
        // as: the assembler.
        ProcSpec {
            exe: module("as", 300, 60, 4, 2),
            libs: vec![LD_SO, LIBC, LIBZ],
            ops: 2500,
            exe_pct: 80,
            text_hot_pct: 30,
            heap_bytes_per_op: 160,
            stack_pages: 8,
            shared_per_op: 0,
        },
    ]
}

pub fn database_program(ops: u64) -> ProcSpec {
    ProcSpec {
        exe: module("oracle", 25000, 5000, 300, 100),
        libs: vec![LD_SO, LIBC, LIBM, LIBDL, LIBPTHREAD, LIBAIO, LIBNSL, LIBCLNTSH, LIBNNZ, LIBSTDCXX],
        ops,
        exe_pct: 80,
        text_hot_pct: 4,
        heap_bytes_per_op: 96,
        stack_pages: 16,
        shared_per_op: 2,
    }
}

/// One mapped module of a process: VMA starts of text, rodata, data, bss and their sizes.
#[derive(Clone, Copy, Debug, Default)]
struct Mapped {
    text: (u64, u64),
    ro: (u64, u64),
    data: (u64, u64),
    bss: (u64, u64),
}

#[derive(Debug)]
struct ProcState {
    spec: Arc<ProcSpec>,
    prng: Prng,
    started: bool,
    done: u64,
    mods: Vec<Mapped>,
    stack: (u64, u64),
    /// brk heap: start, current brk (vpns) and the malloc cursor (bytes above start).
    start_brk: u64,
    brk: u64,
    heap_used: u64,
    shared: Option<(u64, u64)>,
    /// Database: the SGA file to attach at exec.
    sga: Option<(FileId, u64)>,
}

#[derive(Debug)]
struct Spawner {
    /// Programs to start, in order (indices into `specs`).
    queue: Vec<usize>,
    /// This slot's share of the queue: every `stride`-th entry from `next`.
    next: usize,
    stride: usize,
    specs: Arc<Vec<Arc<ProcSpec>>>,
    sga: Option<(FileId, u64)>,
    prng: Prng,
}

/// glibc malloc state shared by the threads of the ebizzy process.
#[derive(Debug, Default)]
struct Glibc {
    /// mp_.mmap_threshold raised by the first free of an mmapped chunk.
    threshold_raised: AtomicBool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EbizzyAlloc {
    Malloc,
    Always,
    Never,
}

#[derive(Debug)]
struct EbizzyThread {
    prng: Prng,
    chunks: Arc<Vec<(u64, u64)>>,
    chunk_pages: u64,
    random_size: bool,
    iterations: u64,
    done: u64,
    alloc: EbizzyAlloc,
    glibc: Arc<Glibc>,
    /// This thread's arena heap: start, reserved pages, pages made RW so far.
    arena: Option<(u64, u64, u64)>,
    pending: Option<Pending>,
}

/// The copy buffer of the iteration in progress.
#[derive(Clone, Copy, Debug)]
struct Pending {
    copy: u64,
    pages: u64,
    mmapped: bool,
    src: u64,
    next: u64,
}

#[derive(Debug)]
struct EbizzyMain {
    /// The main thread's exec (layout) comes first.
    proc: ProcState,
    threads: Vec<EbizzyThread>,
    nchunks: u64,
    chunk_pages: u64,
    prevent_merge: String,
    alloc: EbizzyAlloc,
}

#[derive(Debug)]
enum Kind {
    Proc(ProcState),
    Spawner(Spawner),
    EbizzyMain(EbizzyMain),
    Ebizzy(EbizzyThread),
    Trace(crate::trace::ReplayTask),
}

/// Per-task state of a VMA-lookup workload.
#[derive(Debug)]
pub struct VmaState {
    kind: Kind,
}

/// glibc's default M_TOP_PAD (128 KiB): brk and arena growth add this much.
const TOP_PAD_PAGES: u64 = 32;
/// HEAP_MAX_SIZE on 64-bit (2 * DEFAULT_MMAP_THRESHOLD_MAX): an arena heap's reservation.
const ARENA_PAGES: u64 = 64 * 256;
const STACK_PAGES: u64 = 33;
const STACK_TOP: u64 = 0x7fff_ffff_f000 >> PAGE_SHIFT;

/// The program of a replayed trace task (src/trace.rs).
pub(crate) fn trace_prog(r: crate::trace::ReplayTask, file: &str) -> Program {
    vma_prog(Kind::Trace(r), file)
}

fn vma_prog(kind: Kind, file: &str) -> Program {
    Program { body: Body::Vma(Box::new(VmaState { kind })), file: file.to_string(), released: false }
}

impl Sim {
    /// Build the tasks of workload `kind` (one of knobs::WORKLOADS other than ops/synthetic).
    pub fn build_vma_workload(&mut self, cfg: &Config, kind: &str) -> Result<(), ConfigError> {
        let scale = cfg.float("workload.vma.scale");
        let scaled = |n: i64| ((n as f64 * scale).round() as u64).max(1);
        let ncpus = self.cpus.len();
        let name = cfg.name.clone();
        match kind {
            "boot" => {
                let specs: Vec<Arc<ProcSpec>> = boot_programs().into_iter().map(Arc::new).collect();
                let n = scaled(cfg.int("workload.boot.processes"));
                let mut prng = self.prng.fork(1);
                let queue: Vec<usize> = (0..n).map(|_| prng.below(specs.len() as u64) as usize).collect();
                let slots = cfg.int("workload.boot.parallel") as usize;
                self.build_spawners(&name, specs, queue, slots, None, module("systemd", 300, 80, 10, 4), vec![LD_SO, LIBC, LIBSYSTEMD]);
            }
            "kbuild" => {
                let specs: Vec<Arc<ProcSpec>> = kbuild_programs().into_iter().map(Arc::new).collect();
                let files = scaled(cfg.int("workload.kbuild.files"));
                let queue: Vec<usize> = (0..files).flat_map(|_| [0usize, 1]).collect();
                let slots = cfg.int("workload.kbuild.jobs") as usize;
                self.build_spawners(&name, specs, queue, slots, None, module("make", 60, 15, 2, 2), vec![LD_SO, LIBC, LIBDL]);
            }
            "database" => {
                let ops = scaled(cfg.int("workload.database.ops"));
                let specs = vec![Arc::new(database_program(ops))];
                let procs = cfg.int("workload.database.processes") as usize;
                let sga_pages = cfg.int("workload.database.sga_mib") as u64 * 256;
                let sga = self.file_get_or_create_sparse("SYSV-sga (deleted)", sga_pages, true);
                // Every server process is started by the listener, one per slot, at once.
                self.build_spawners(&name, specs, vec![0; procs], procs, Some((sga, sga_pages)), module("tnslsnr", 200, 40, 4, 2), vec![LD_SO, LIBC, LIBCLNTSH]);
            }
            "ebizzy" => {
                let alloc = match cfg.str("workload.ebizzy.mmap").as_str() {
                    "always" => EbizzyAlloc::Always,
                    "never" => EbizzyAlloc::Never,
                    _ => EbizzyAlloc::Malloc,
                };
                let chunk_pages = (cfg.int("workload.ebizzy.chunk_kib") as u64).div_ceil(4);
                let nthreads = cfg.int("workload.ebizzy.threads") as u64;
                let glibc = Arc::new(Glibc::default());
                let _ = ncpus;
                let mut threads = Vec::new();
                for i in 0..nthreads {
                    threads.push(EbizzyThread {
                        prng: self.prng.fork(100 + i),
                        chunks: Arc::new(Vec::new()),
                        chunk_pages,
                        random_size: cfg.bool("workload.ebizzy.random_size"),
                        iterations: cfg.int("workload.ebizzy.iterations") as u64,
                        done: 0,
                        alloc,
                        glibc: glibc.clone(),
                        arena: None,
                        pending: None,
                    });
                }
                let mm = self.mm_alloc(CpuId(0));
                let spec = ProcSpec { exe: module("ebizzy", 8, 2, 1, 1), libs: vec![LD_SO, LIBC, LIBPTHREAD], ops: 0, exe_pct: 100, text_hot_pct: 100, heap_bytes_per_op: 0, stack_pages: 4, shared_per_op: 0 };
                let proc = ProcState::new(Arc::new(spec), self.prng.fork(99), None);
                let main = EbizzyMain {
                    proc,
                    threads,
                    nchunks: cfg.int("workload.ebizzy.chunks") as u64,
                    chunk_pages,
                    prevent_merge: cfg.str("workload.ebizzy.prevent_merge"),
                    alloc,
                };
                let t = self.new_task(0, Some(mm), CpuId(0), None, vma_prog(Kind::EbizzyMain(main), &name));
                self.enqueue(CpuId(0), t, 0);
            }
            "trace" => self.build_trace(cfg)?,
            other => {
                return Err(ConfigError::key(&cfg.origin("workload.kind"), "workload.kind", format!("workload '{other}' is not a VMA-lookup workload")));
            }
        }
        Ok(())
    }
}

impl ProcState {
    fn new(spec: Arc<ProcSpec>, prng: Prng, sga: Option<(FileId, u64)>) -> ProcState {
        ProcState { spec, prng, started: false, done: 0, mods: Vec::new(), stack: (0, 0), start_brk: 0, brk: 0, heap_used: 0, shared: None, sga }
    }
}

/// The library a post-startup operation runs in: Zipf(1) over the libraries after ld.so.
fn pick_lib(prng: &mut Prng, nlibs: usize) -> usize {
    if nlibs <= 1 {
        return 0;
    }
    let h: f64 = (1..nlibs).map(|k| 1.0 / k as f64).sum();
    let mut x = prng.unit() * h;
    for k in 1..nlibs {
        x -= 1.0 / k as f64;
        if x <= 0.0 {
            return k;
        }
    }
    nlibs - 1
}

/// Operations at a process's start spent in ld.so (loading and relocating the libraries).
const STARTUP_OPS: u64 = 150;

impl Sim {
    #[allow(clippy::too_many_arguments)]
    fn build_spawners(&mut self, name: &str, specs: Vec<Arc<ProcSpec>>, queue: Vec<usize>, slots: usize, sga: Option<(FileId, u64)>, exe: Module, libs: Vec<Module>) {
        let _ = (exe, libs);
        let mm = self.mm_alloc(CpuId(0));
        let specs = Arc::new(specs);
        let ncpus = self.cpus.len();
        let slots = slots.max(1);
        for s in 0..slots {
            let sp = Spawner { queue: queue.clone(), next: s, stride: slots, specs: specs.clone(), sga, prng: self.prng.fork(1000 + s as u64) };
            let cpu = CpuId((s % ncpus) as u32);
            let t = self.new_task(0, Some(mm), cpu, None, vma_prog(Kind::Spawner(sp), name));
            self.enqueue(cpu, t, 0);
        }
    }

    /// Map a module as ld.so does: reserve the whole image top-down with the text's protection
    /// (one mmap), then map the data segment MAP_FIXED over its part (which unmaps that part of
    /// the reservation first) and the bss anonymously after it.
    fn map_module(&mut self, cpu: CpuId, mm: MmId, md: &Module, at: Option<u64>) -> Result<Mapped, String> {
        let total = md.text + md.ro + md.data + md.bss;
        let file = self.file_get_or_create(md.name, md.text + md.ro + md.data);
        let base = self.do_mmap(cpu, mm, total, Prot::Read, false, Backing::File { file, pgoff: 0 }, at)?;
        if md.data + md.bss > 0 {
            // MAP_FIXED over the reservation: mmap_region() unmaps that part first.
            self.do_munmap(cpu, mm, base + md.text + md.ro, md.data + md.bss);
        }
        let text = (base, md.text);
        if md.ro > 0 {
            self.split_vma_at(mm, base + md.text);
        }
        if let Some(v) = self.mm_mut(mm).vmas.get_mut(&base) {
            v.flags |= vm::EXEC;
        }
        let data_at = base + md.text + md.ro;
        let data = if md.data > 0 {
            (self.do_mmap(cpu, mm, md.data, Prot::ReadWrite, false, Backing::File { file, pgoff: md.text + md.ro }, Some(data_at))?, md.data)
        } else {
            (data_at, 0)
        };
        let bss_at = data_at + md.data;
        let bss = if md.bss > 0 { (self.do_mmap(cpu, mm, md.bss, Prot::ReadWrite, false, Backing::Anon, Some(bss_at))?, md.bss) } else { (bss_at, 0) };
        Ok(Mapped { text, ro: (base + md.text, md.ro), data, bss })
    }

    /// What exec (load_elf_binary + ld.so) leaves: the executable at 0x400000, the brk start
    /// after its bss, the libraries top-down, the stack (if bprm_mm_init did not already make
    /// it), and the shared segment for a database server (shmat).
    fn exec_layout(&mut self, cpu: CpuId, mm: MmId, st: &mut ProcState) -> Result<(), String> {
        let spec = st.spec.clone();
        let exe = self.map_module(cpu, mm, &spec.exe, Some(0x400))?;
        st.mods.push(exe);
        st.start_brk = exe.bss.0 + exe.bss.1 + 16;
        st.brk = st.start_brk;
        if self.mm(mm).vmas.range(STACK_TOP - STACK_PAGES..).next().is_none() {
            self.do_mmap(cpu, mm, STACK_PAGES, Prot::ReadWrite, false, Backing::Anon, Some(STACK_TOP - STACK_PAGES))?;
        }
        st.stack = (STACK_TOP - STACK_PAGES, STACK_PAGES);
        for lib in &spec.libs {
            let m = self.map_module(cpu, mm, lib, None)?;
            st.mods.push(m);
        }
        if let Some((f, pages)) = st.sga {
            let s = self.do_mmap(cpu, mm, pages, Prot::ReadWrite, true, Backing::File { file: f, pgoff: 0 }, None)?;
            st.shared = Some((s, pages));
        }
        Ok(())
    }

    /// The brk() syscall (mm/mmap.c, 3.x-6.0): growing checks the range with
    /// `find_vma_intersection` and expands the heap VMA in place (vma_merge with the previous
    /// heap: no unlink); shrinking is a `do_munmap`. Returns the new brk.
    pub fn sys_brk(&mut self, cpu: CpuId, mm: MmId, start_brk: u64, old: u64, new: u64) -> u64 {
        self.enter_syscall(cpu, self.p.vma_op_ns);
        if new < start_brk {
            return old;
        }
        if new <= old {
            if new < old {
                self.do_munmap(cpu, mm, new, old - new);
            }
            return new;
        }
        if self.find_vma_intersection(cpu, mm, old, new + 1).is_some() {
            return old; // the heap would run into a mapping
        }
        let heap = self.mm(mm).vmas.range(..old).next_back().filter(|(_, v)| v.end == old && v.start >= start_brk && v.backing == Backing::Anon).map(|(&s, _)| s);
        match heap {
            Some(s) => self.mm_mut(mm).vmas.get_mut(&s).expect("heap").end = new,
            None => {
                let vma = Vma { start: old, end: new, flags: vm::READ | vm::WRITE, backing: Backing::Anon, anon_vma: None };
                self.mm_mut(mm).vmas.insert(old, vma);
                self.vma_linked(mm, old);
            }
        }
        new
    }

    /// One step of a VMA-lookup workload task.
    pub fn step_vma(&mut self, cpu: CpuId, t: Tid, prog: &mut Program) -> StepResult {
        let mm = self.task(t).mm.expect("user task");
        let Body::Vma(st) = &mut prog.body else { unreachable!() };
        let r: Result<StepResult, String> = match &mut st.kind {
            Kind::Proc(p) => self.step_proc(cpu, mm, p),
            Kind::Spawner(s) => Ok(self.step_spawner(cpu, t, s)),
            Kind::EbizzyMain(m) => self.step_ebizzy_main(cpu, t, mm, m, &prog.file),
            Kind::Ebizzy(e) => self.step_ebizzy(cpu, mm, e),
            Kind::Trace(r) => self.step_trace(cpu, t, mm, r),
        };
        match r {
            Ok(r) => r,
            Err(msg) => {
                self.workload_errors.push(format!("{}: task {}: {msg}", prog.file, t.0));
                StepResult::Exit
            }
        }
    }

    fn step_proc(&mut self, cpu: CpuId, mm: MmId, st: &mut ProcState) -> Result<StepResult, String> {
        if !st.started {
            st.started = true;
            self.exec_layout(cpu, mm, st)?;
            return Ok(StepResult::Continue);
        }
        if st.done >= st.spec.ops {
            return Ok(StepResult::Exit);
        }
        st.done += 1;
        self.proc_op(cpu, mm, st).map_err(|e| format!("{e:?}"))?;
        Ok(StepResult::Continue)
    }

    /// One operation of a process (see the module doc).
    fn proc_op(&mut self, cpu: CpuId, mm: MmId, st: &mut ProcState) -> Result<(), crate::mm::memory::FaultError> {
        let spec = st.spec.clone();
        let nmods = st.mods.len();
        let startup = st.done <= STARTUP_OPS && nmods > 1;
        // Module whose code runs: ld.so while it loads and relocates, then exe or a library.
        let m = if startup && st.prng.below(2) == 0 {
            1
        } else if nmods == 1 || st.prng.below(100) < spec.exe_pct {
            0
        } else {
            1 + pick_lib(&mut st.prng, nmods - 1)
        };
        let md = st.mods[m];
        let hot = (md.text.1 * spec.text_hot_pct / 100).max(1);
        self.access_or_drop(cpu, mm, md.text.0 + st.prng.below(hot), false, true)?;
        if startup {
            // Relocation: ld.so writes the GOT in each library's data segment.
            let target = st.mods[(st.done as usize) % nmods];
            if target.data.1 > 0 {
                self.access_or_drop(cpu, mm, target.data.0 + st.prng.below(target.data.1), true, false)?;
            }
        }
        if md.ro.1 > 0 && st.prng.below(2) == 0 {
            self.access_or_drop(cpu, mm, md.ro.0 + st.prng.below(md.ro.1), false, false)?;
        }
        if md.data.1 > 0 && st.prng.below(10) == 0 {
            self.access_or_drop(cpu, mm, md.data.0 + st.prng.below(md.data.1), true, false)?;
        }
        if md.bss.1 > 0 && st.prng.below(10) == 0 {
            self.access_or_drop(cpu, mm, md.bss.0 + st.prng.below(md.bss.1), true, false)?;
        }
        if spec.heap_bytes_per_op > 0 {
            st.heap_used += spec.heap_bytes_per_op;
            let pages = st.heap_used.div_ceil(PAGE_SIZE);
            if st.start_brk + pages > st.brk {
                let want = st.start_brk + pages + TOP_PAD_PAGES;
                st.brk = self.sys_brk(cpu, mm, st.start_brk, st.brk, want);
            }
            self.access_or_drop(cpu, mm, st.start_brk + pages - 1, true, false)?;
            self.access_or_drop(cpu, mm, st.start_brk + st.prng.below(pages), false, false)?;
        }
        if st.stack.1 > 0 {
            let depth = st.prng.below(spec.stack_pages.clamp(1, st.stack.1));
            self.access_or_drop(cpu, mm, st.stack.0 + st.stack.1 - 1 - depth, true, false)?;
        }
        if let Some((s, n)) = st.shared {
            for _ in 0..spec.shared_per_op {
                let write = st.prng.below(10) < 3;
                self.access_or_drop(cpu, mm, s + st.prng.below(n), write, false)?;
            }
        }
        Ok(())
    }

    /// vfork+exec of the next program, then wait for it.
    fn step_spawner(&mut self, cpu: CpuId, t: Tid, sp: &mut Spawner) -> StepResult {
        if sp.next >= sp.queue.len() {
            return StepResult::Exit;
        }
        let spec = sp.specs[sp.queue[sp.next]].clone();
        sp.next += sp.stride;
        self.enter_syscall(cpu, self.p.fork_ns);
        // bprm_mm_init(): the new mm and its stack VMA; copy_strings(): get_user_pages_remote()
        // on the new mm for the argument and environment pages (find_extend_vma on a foreign mm).
        let Some(mm) = self.try_mm_alloc(cpu) else {
            self.workload_errors.push(format!("task {}: exec: out of memory for a new mm", t.0));
            return StepResult::Exit;
        };
        if self.do_mmap(cpu, mm, STACK_PAGES, Prot::ReadWrite, false, Backing::Anon, Some(STACK_TOP - STACK_PAGES)).is_err() {
            return StepResult::Exit;
        }
        for page in 0..2 {
            self.find_vma(cpu, mm, STACK_TOP - 1 - page);
        }
        let st = ProcState::new(spec, sp.prng.fork(sp.next as u64), sp.sga);
        let file = self.task(t).prog.as_ref().map(|p| p.file.clone()).unwrap_or_default();
        let tgid = self.tasks.len() as u32 + 1_000_000;
        let child = self.new_task(tgid, Some(mm), cpu, None, vma_prog(Kind::Proc(st), &file));
        self.task_mut(child).parent = Some(t);
        self.task_mut(t).children.push(child);
        let target = self.select_task_rq(child);
        self.task_mut(child).cpu = target;
        let now = self.now(cpu);
        self.enqueue(target, child, now);
        self.task_mut(t).waiting_for_children = true;
        StepResult::Block(None)
    }

    /// ebizzy's main(): exec, allocate and fill the chunks, start the threads.
    fn step_ebizzy_main(&mut self, cpu: CpuId, t: Tid, mm: MmId, m: &mut EbizzyMain, file: &str) -> Result<StepResult, String> {
        if !m.proc.started {
            m.proc.started = true;
            self.exec_layout(cpu, mm, &mut m.proc)?;
            return Ok(StepResult::Continue);
        }
        let mut chunks = Vec::new();
        let holes = m.prevent_merge == "holes";
        for i in 0..m.nchunks {
            let start = if m.alloc == EbizzyAlloc::Never {
                // The main arena: brk.
                let old = m.proc.brk;
                m.proc.brk = self.sys_brk(cpu, mm, m.proc.start_brk, old, old + m.chunk_pages + holes as u64);
                old
            } else {
                self.do_mmap(cpu, mm, m.chunk_pages + holes as u64, Prot::ReadWrite, false, Backing::Anon, None)?
            };
            if holes && m.alloc != EbizzyAlloc::Never {
                self.enter_syscall(cpu, 0.0);
                self.do_munmap(cpu, mm, start + m.chunk_pages, 1);
            }
            for p in 0..m.chunk_pages {
                self.access_or_drop(cpu, mm, start + p, true, false).map_err(|e| format!("{e:?}"))?;
            }
            if m.prevent_merge == "permissions" && i % 2 == 1 {
                self.enter_syscall(cpu, 0.0);
                self.do_mprotect(cpu, mm, start, m.chunk_pages, Prot::Read);
            }
            chunks.push((start, m.chunk_pages));
        }
        let chunks = Arc::new(chunks);
        let ncpus = self.cpus.len();
        let now = self.now(cpu);
        for (i, mut th) in std::mem::take(&mut m.threads).into_iter().enumerate() {
            th.chunks = chunks.clone();
            // clone(CLONE_VM|CLONE_THREAD): copy_process() flushes the new task's vmacache.
            let c = CpuId(((i + 1) % ncpus) as u32);
            let tid = self.new_task(0, Some(mm), c, None, vma_prog(Kind::Ebizzy(th), file));
            self.enqueue(c, tid, now);
        }
        let _ = t;
        Ok(StepResult::Exit)
    }

    fn ebizzy_alloc(&mut self, cpu: CpuId, mm: MmId, e: &mut EbizzyThread, pages: u64) -> Result<(u64, bool), String> {
        let arena = match e.alloc {
            EbizzyAlloc::Always => false,
            EbizzyAlloc::Never => true,
            EbizzyAlloc::Malloc => e.glibc.threshold_raised.load(Ordering::Relaxed),
        };
        self.enter_syscall(cpu, 0.0);
        if !arena {
            return Ok((self.do_mmap(cpu, mm, pages, Prot::ReadWrite, false, Backing::Anon, None)?, true));
        }
        // _int_malloc from this thread's arena: new_heap() reserves HEAP_MAX_SIZE PROT_NONE and
        // grow_heap() mprotects what is needed (one header page, the chunk, the top pad).
        let (start, reserved, rw) = match e.arena {
            Some(a) => a,
            None => (self.do_mmap(cpu, mm, ARENA_PAGES, Prot::None, false, Backing::Anon, None)?, ARENA_PAGES, 0),
        };
        let need = 1 + pages + TOP_PAD_PAGES;
        let rw = if need > rw {
            self.do_mprotect(cpu, mm, start + rw, need.min(reserved) - rw, Prot::ReadWrite);
            need.min(reserved)
        } else {
            rw
        };
        e.arena = Some((start, reserved, rw));
        Ok((start + 1, false))
    }

    fn ebizzy_free(&mut self, cpu: CpuId, mm: MmId, e: &mut EbizzyThread, start: u64, pages: u64, mmapped: bool) {
        self.enter_syscall(cpu, 0.0);
        if mmapped {
            self.do_munmap(cpu, mm, start, pages);
            if e.alloc == EbizzyAlloc::Malloc {
                // free() of an mmapped chunk raises mp_.mmap_threshold to its size.
                e.glibc.threshold_raised.store(true, Ordering::Relaxed);
            }
            return;
        }
        // The chunk merges into the top; heap_trim() → shrink_heap(): MADV_DONTNEED of the top
        // beyond the top pad.
        let (a, _, rw) = e.arena.expect("arena chunk");
        let top = rw - 1;
        if top > TOP_PAD_PAGES {
            self.do_madvise(cpu, mm, a + 1 + TOP_PAD_PAGES, top - TOP_PAD_PAGES, Advice::DontNeed);
        }
    }

    /// ebizzy search_mem(), one page of work per step so that the threads interleave as on
    /// real CPUs: alloc_mem(), memcpy() page by page (faulting the copy), bsearch(), free_mem().
    fn step_ebizzy(&mut self, cpu: CpuId, mm: MmId, e: &mut EbizzyThread) -> Result<StepResult, String> {
        let fault = |e: crate::mm::memory::FaultError| format!("{e:?}");
        let Some(mut p) = e.pending else {
            if e.done >= e.iterations {
                return Ok(StepResult::Exit);
            }
            e.done += 1;
            let pages = if e.random_size { 1 + e.prng.below(e.chunk_pages) } else { e.chunk_pages };
            let (copy, mmapped) = self.ebizzy_alloc(cpu, mm, e, pages)?;
            let src = e.chunks[e.prng.below(e.chunks.len() as u64) as usize];
            e.pending = Some(Pending { copy, pages, mmapped, src: src.0, next: 0 });
            return Ok(StepResult::Continue);
        };
        if p.next < p.pages {
            self.access_or_drop(cpu, mm, p.src + p.next, false, false).map_err(fault)?;
            self.access_or_drop(cpu, mm, p.copy + p.next, true, false).map_err(fault)?;
            p.next += 1;
            e.pending = Some(p);
            return Ok(StepResult::Continue);
        }
        // bsearch() over the copy's records (8 bytes each).
        let records = p.pages * PAGE_SIZE / 8;
        let probes = 64 - records.leading_zeros() as u64;
        for _ in 0..probes {
            self.access_or_drop(cpu, mm, p.copy + e.prng.below(p.pages), false, false).map_err(fault)?;
        }
        e.pending = None;
        self.ebizzy_free(cpu, mm, e, p.copy, p.pages, p.mmapped);
        Ok(StepResult::Continue)
    }
}
