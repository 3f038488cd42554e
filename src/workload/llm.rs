//! LLM inference on mmapped weights (`workload.kind = "llm"`): seed 000's llama.cpp runs
//! (mechanisms.md §6), the workload LUF was measured on.
//!
//! Each process maps its own model file read-only (page cache; a miss is a major fault read
//! from the device) and evaluates `1 + gen_tokens` passes (the prompt in one pass, then one per
//! generated token). A pass walks the layers in order; a layer's weights are its 7 matrices (q,
//! k, v, o, gate, up, down) in the Llama 2 70B proportions, and each thread takes its share of
//! every matrix's rows, as ggml splits a matmul's rows among the threads. For every 4 KiB of
//! weights a thread:
//! - fetches the matmul kernel's text page (the iTLB),
//! - loads the weight page (the dTLB; a read-only file mapping: what LUF can defer),
//! - loads a page of the matrix's input activations and stores to the output page its rows
//!   fall in (the hot, written anonymous set: dTLB stores),
//! - spends `workload.llm.ns_per_weight_page` of user time.
//!
//! At the start of each matrix it fetches the rest of the text footprint (the graph code between
//! matmuls); after v, thread 0 appends this pass's K/V pages to the layer's KV cache, and before o
//! every thread reads its share of the KV cache so far (attention).
//!
//! After each matrix the process's threads meet at a barrier, as ggml does after every node of
//! the graph (`ggml_barrier()` in ggml-cpu.c: a thread that arrives early **spins** on the
//! barrier's counter with `ggml_thread_cpu_relax()`, it does not sleep). A spinning thread is
//! user time and keeps its CPU in the mm (not lazy), so while one thread waits for a read, the
//! others' CPUs still receive every shootdown of the mm. With `workload.llm.barrier = false`
//! threads run on independently (the model before this barrier).
//!
//! Departures: one load and one store per weight page stand for the many cache-line accesses to
//! the same pages (a TLB sees the same translations); between tokens the threads do not sleep on
//! the thread pool's condition variable (the main thread's sampling is not modelled); the
//! activation shapes are Llama 2 70B's whatever `model_mib` is; readahead as src/mm/readahead.rs
//! models it; llama.cpp's load-time POSIX_MADV_WILLNEED prefetch of the model is not modelled.

use crate::config::Config;
use crate::mm::memory::FaultError;
use crate::mm::mmap::Prot;
use crate::sim::{Backing, Sim};
use crate::types::*;
use crate::workload::{Body, Program, StepResult};

/// The 7 matrices of a layer, in units of d²/8 (d = 8192, ffn 28672, 8 of 64 heads for K/V):
/// q, k, v, o, gate, up, down.
const MAT_UNITS: [u64; 7] = [8, 1, 1, 8, 28, 28, 28];
const UNITS: u64 = 102;
/// Activation buffer layout (pages of fp32): x, attention output, ffn hidden, gate output, q,
/// k, v. A row of d (8192) fp32 values is 8 pages; the ffn hidden row (28672) is 28.
const X: (u64, u64) = (0, 8);
const ATTN: (u64, u64) = (8, 8);
const HIDDEN: (u64, u64) = (16, 28);
const GATE: (u64, u64) = (44, 28);
const Q: (u64, u64) = (72, 8);
const K: (u64, u64) = (80, 1);
const V: (u64, u64) = (81, 1);
/// The page of ggml's shared compute state (the barrier's counters, `n_barrier` and
/// `n_barrier_passed`), which a thread spinning in `ggml_barrier()` loads in its loop.
const BARRIER_STATE: u64 = 82;
const WORK_PAGES: u64 = 83;
/// The text page of `ggml_barrier()`'s spin loop: one of the graph-code pages (page 0 is the
/// matmul kernel, another function).
const BARRIER_TEXT_PAGE: u64 = 1;
/// (input, output) activation pages of each matrix.
const MAT_IO: [((u64, u64), (u64, u64)); 7] = [(X, Q), (X, K), (X, V), (ATTN, X), (X, GATE), (X, HIDDEN), (HIDDEN, X)];

/// A process's ggml barrier: the matrices its threads have all finished, and the one they are
/// meeting at.
#[derive(Clone, Debug, Default)]
pub struct Barrier {
    /// Matrices (in order: pass, layer, matrix) every thread has finished.
    pub passed: u64,
    /// When the last thread reached barrier `passed - 1` (its release time).
    pub released_ns: Ns,
    /// The release before that one (barrier `passed - 2`): after the last barrier, when the
    /// threads were let into the last matrix.
    pub prev_released_ns: Ns,
    /// Threads that have reached barrier `passed` so far, and the latest of their clocks.
    pub arrived: u64,
    pub last_arrival_ns: Ns,
    /// The threads spinning at barrier `passed`.
    pub spinners: Vec<Tid>,
}

#[derive(Clone, Debug)]
pub struct LlmState {
    model: (u64, u64),
    work: u64,
    kv: u64,
    text: (u64, u64),
    thread: u64,
    nthreads: u64,
    layers: u64,
    prompt: u64,
    passes: u64,
    ctx: u64,
    ns_per_page: f64,
    /// Position: pass, layer, matrix, page within this thread's slice of the matrix.
    pass: u64,
    layer: u64,
    mat: usize,
    page: u64,
    /// Simulated accesses this thread has made (text fetches, loads and stores), for throughput
    /// figures (`mmsim reproduce luf`).
    pub accesses: u64,
    /// When this thread finished its last pass (its last token), if it has.
    pub last_token_ns: Option<Ns>,
    /// The process (index into `Sim::llm_barriers`), whether threads meet at barriers, and the
    /// barrier this thread has reached and waits at (matrices finished), if any.
    proc_idx: usize,
    barrier: bool,
    waiting: Option<u64>,
}

impl LlmState {
    /// The thread's process, as an index into `Sim::llm_barriers`.
    pub fn proc_idx(&self) -> usize {
        self.proc_idx
    }

    /// First page (in the model) and length of matrix `mat` of `layer`.
    fn matrix(&self, layer: u64, mat: usize) -> (u64, u64) {
        let per_layer = self.model.1 / self.layers;
        let before: u64 = MAT_UNITS[..mat].iter().sum();
        let start = per_layer * before / UNITS;
        let end = if mat == 6 { per_layer } else { per_layer * (before + MAT_UNITS[mat]) / UNITS };
        (layer * per_layer + start, end - start)
    }

    /// This thread's rows of a matrix of `pages` pages: [start, end) within it.
    fn slice(&self, pages: u64) -> (u64, u64) {
        (pages * self.thread / self.nthreads, pages * (self.thread + 1) / self.nthreads)
    }

    /// The pages `ggml_barrier()` touches: its loop's code and the shared counter.
    fn barrier_pages(&self) -> (u64, u64) {
        (self.text.0 + BARRIER_TEXT_PAGE.min(self.text.1.saturating_sub(1)), self.work + BARRIER_STATE)
    }

    /// Tokens whose K/V the current pass has written (the context so far, this pass included).
    fn tokens_so_far(&self) -> u64 {
        self.prompt + self.pass
    }

    /// Weight pages this thread has processed so far and will process in all (for progress).
    pub fn progress(&self) -> (u64, u64) {
        let mut mine = 0;
        let mut done_in_layer = 0;
        for mat in 0..7 {
            let (_, pages) = self.matrix(0, mat);
            let (s, e) = self.slice(pages);
            mine += e - s;
            if mat < self.mat {
                done_in_layer += e - s;
            }
        }
        let per_pass = mine * self.layers;
        let done = self.pass * per_pass + self.layer * mine + done_in_layer + self.page;
        (done.min(per_pass * self.passes), per_pass * self.passes)
    }
}

impl Sim {
    /// `workload.kind = "llm"`: the processes, their model files and buffers, and their threads.
    pub(crate) fn build_llm(&mut self, cfg: &Config) {
        let procs = cfg.int("workload.llm.processes") as u32;
        let threads = cfg.int("workload.llm.threads") as u64;
        let layers = cfg.int("workload.llm.layers") as u64;
        let model_pages = ((cfg.int("workload.llm.model_mib") as u64) << 8).max(layers);
        let prompt = cfg.int("workload.llm.prompt_tokens") as u64;
        let generated = cfg.int("workload.llm.gen_tokens") as u64;
        let ctx = prompt + generated;
        let text_pages = cfg.int("workload.llm.text_pages") as u64;
        let ns_per_page = cfg.float("workload.llm.ns_per_weight_page");
        let barrier = cfg.bool("workload.llm.barrier");
        self.llm_barriers = vec![Barrier::default(); procs as usize];
        let setup = |sim: &mut Sim, cpu: CpuId, p: u32, mm: MmId| {
            let file = sim.file_get_or_create_sparse(&format!("llm-model-{p}"), model_pages, false);
            let model = sim.do_mmap(cpu, mm, model_pages, Prot::Read, false, Backing::File { file, pgoff: 0 }, None).expect("the model fits the address space");
            let work = sim.do_mmap(cpu, mm, WORK_PAGES, Prot::ReadWrite, false, Backing::Anon, None).expect("activations");
            let kv = sim.do_mmap(cpu, mm, layers * ctx, Prot::ReadWrite, false, Backing::Anon, None).expect("KV cache");
            let text = sim.mm(mm).regions[".text"];
            (model, work, kv, text)
        };
        let thread = |_: &mut Sim, &(model, work, kv, text): &(u64, u64, u64, (u64, u64)), i: u64, n: u32| {
            Body::Llm(Box::new(LlmState {
                model: (model, model_pages),
                work,
                kv,
                text,
                thread: i,
                nthreads: threads,
                layers,
                prompt,
                passes: 1 + generated,
                ctx,
                ns_per_page,
                pass: 0,
                layer: 0,
                mat: 0,
                page: 0,
                accesses: 0,
                last_token_ns: None,
                proc_idx: (n as u64 / threads) as usize,
                barrier,
                waiting: None,
            }))
        };
        self.spawn_workload(cfg, procs, threads, text_pages, setup, thread);
    }

    /// Weight pages until the clock passes `horizon` (the next event of another CPU) or the
    /// slice ends: user accesses touch no shared state unless they fault, as in `step_synth`.
    pub(crate) fn step_llm(&mut self, cpu: CpuId, t: Tid, prog: &mut Program, horizon: Ns) -> StepResult {
        let mm = self.tasks[t.0 as usize].mm.expect("user task");
        let ci = cpu.0 as usize;
        let stop = horizon.min(self.task(t).slice_end.saturating_sub(1));
        for _ in 0..4096 {
            let Body::Llm(st) = &mut prog.body else { unreachable!() };
            if let Some(k) = st.waiting {
                // ggml_barrier(): spin until every thread of the process has finished matrix k.
                // The spin needs no steps (TaskState::Spinning): one tick at a time, so that the
                // tick can hand the CPU to a task that woke there; the last thread to arrive
                // ends the spins at its arrival (`llm_barrier_release`).
                let now = self.cpus[ci].clock;
                let b = &self.llm_barriers[st.proc_idx];
                let release = if b.passed > k {
                    b.released_ns
                } else {
                    // A sibling killed (an OOM kill) never arrives: stop waiting for it.
                    let tgid = self.tasks[t.0 as usize].tgid;
                    if !self.tasks.iter().any(|x| x.tgid == tgid && x.state == crate::sim::TaskState::Dead) {
                        let b = &mut self.llm_barriers[st.proc_idx];
                        if !b.spinners.contains(&t) {
                            b.spinners.push(t);
                        }
                        return StepResult::Spin(now + self.p.slice_ns);
                    }
                    now
                };
                st.waiting = None;
                if release > now {
                    self.charge_user_ns(cpu, release - now);
                }
                let Body::Llm(st) = &prog.body else { unreachable!() };
                if st.pass == st.passes {
                    return StepResult::Exit;
                }
                continue;
            }
            if st.pass == st.passes {
                return StepResult::Exit;
            }
            let (mstart, mpages) = st.matrix(st.layer, st.mat);
            let (s, e) = st.slice(mpages);
            let n = match self.llm_weight_page(cpu, mm, st, mstart, mpages, s, e) {
                Ok(n) => n,
                Err(err) => return self.fault_kill(t, prog, 0, err),
            };
            let Body::Llm(st) = &mut prog.body else { unreachable!() };
            st.accesses += n;
            st.page += 1;
            if s + st.page >= e {
                if st.barrier && st.nthreads > 1 {
                    // Arrive at the barrier after this matrix (its sequence number = matrices
                    // finished before it).
                    let k = (st.pass * st.layers + st.layer) * 7 + st.mat as u64;
                    let now = self.cpus[ci].clock;
                    let b = &mut self.llm_barriers[st.proc_idx];
                    debug_assert_eq!(b.passed, k, "a thread reached a barrier its process is not at");
                    b.arrived += 1;
                    b.last_arrival_ns = b.last_arrival_ns.max(now);
                    if b.arrived == st.nthreads {
                        b.passed = k + 1;
                        b.prev_released_ns = b.released_ns;
                        b.released_ns = b.last_arrival_ns;
                        b.arrived = 0;
                        b.last_arrival_ns = 0;
                        let spinners = std::mem::take(&mut b.spinners);
                        let release = b.released_ns;
                        self.llm_barrier_release(&spinners, release);
                    } else {
                        st.waiting = Some(k);
                    }
                }
                st.page = 0;
                st.mat += 1;
                if st.mat == 7 {
                    st.mat = 0;
                    st.layer += 1;
                    if st.layer == st.layers {
                        st.layer = 0;
                        st.pass += 1;
                        if st.pass == st.passes {
                            st.last_token_ns = Some(self.cpus[ci].clock);
                        }
                    }
                }
            }
            if self.step_ends(ci, stop) {
                break;
            }
        }
        StepResult::Continue
    }

    /// After an IPI's `flush_tlb_func()` on `cpu`: a thread spinning there in `ggml_barrier()`
    /// runs its loop and loads the barrier's counter all the time, so translations the flush
    /// dropped are walked again at once: the loop's text page (an iTLB miss) and the counter's
    /// page (a dTLB load miss). The walks take no time of their own (the spin is user time until
    /// its release anyway); the TLBs and the counters change. A page that is not present (never
    /// for these hot pages here) is left to the thread's next step instead of faulting inside
    /// the interrupt (a departure: the spin would take the fault at once).
    pub(crate) fn llm_spinner_refill(&mut self, cpu: CpuId) {
        let ci = cpu.0 as usize;
        let Some(t) = self.cpus[ci].current else { return };
        let task = &self.tasks[t.0 as usize];
        let (crate::sim::TaskState::Spinning(_), Some(mm)) = (task.state, task.mm) else { return };
        let Some(Body::Llm(st)) = task.prog.as_deref().map(|p| &p.body) else { return };
        if st.waiting.is_none() || self.cpus[ci].tlbstate.loaded_mm != Some(mm) {
            return;
        }
        let (text, counter) = st.barrier_pages();
        self.spin_refill(cpu, mm, text, true);
        self.spin_refill(cpu, mm, counter, false);
    }

    /// One access of a spin loop after a flush: look the TLB up and, on a miss, walk and fill
    /// (setting the accessed bit), counting it as the hardware would; no time is charged.
    fn spin_refill(&mut self, cpu: CpuId, mm: MmId, vpn: u64, instr: bool) {
        let ci = cpu.0 as usize;
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        if !instr {
            self.cpus[ci].stats.dtlb_loads += 1;
        }
        if self.cpus[ci].tlb.lookup(asid, vpn, instr).is_some() {
            return;
        }
        let pte = self.mm(mm).pgtable.get(vpn);
        if !pte.present() {
            return;
        }
        self.count_tlb_miss(cpu, false, instr);
        self.cpus[ci].stats.page_walks += 1;
        let pte = pte.with(crate::mm::pgtable::Pte::ACCESSED, 0);
        self.mm_mut(mm).pgtable.set(vpn, pte);
        self.tlb_fill_pte(cpu, mm, vpn, pte, false, instr);
    }

    /// The barrier is complete: the threads spinning at it stop spinning at `release` (or now,
    /// if their CPU is already past it); a thread between two ticks of its spin sees the
    /// barrier passed at its next step.
    fn llm_barrier_release(&mut self, spinners: &[Tid], release: Ns) {
        for &w in spinners {
            if let crate::sim::TaskState::Spinning(until) = self.tasks[w.0 as usize].state {
                let at = release.max(self.cpus[self.tasks[w.0 as usize].cpu.0 as usize].clock);
                if at < until {
                    self.tasks[w.0 as usize].state = crate::sim::TaskState::Spinning(at);
                    self.events.push(at, crate::engine::EventKind::SpinEnd, w.0);
                }
            }
        }
    }

    /// One weight page of this thread's slice `[s, e)` of a matrix (with the matrix-boundary
    /// work at its first page); returns the accesses made.
    #[allow(clippy::too_many_arguments)]
    fn llm_weight_page(&mut self, cpu: CpuId, mm: MmId, st: &LlmState, mstart: u64, mpages: u64, s: u64, e: u64) -> Result<u64, FaultError> {
        if s >= e {
            return Ok(0); // more threads than pages: this thread has no rows here
        }
        let mut n = 4;
        let i = s + st.page;
        let (input, output) = MAT_IO[st.mat];
        if st.page == 0 {
            // The graph code between matmuls (norms, rope, softmax, adds): the text footprint.
            for p in 1..st.text.1 {
                self.access(cpu, mm, st.text.0 + p, false, true)?;
            }
            n += st.text.1.saturating_sub(1);
            let kv_layer = st.kv + st.layer * st.ctx;
            if st.mat == 3 {
                // Attention before o: this thread's heads read the layer's K/V so far.
                let mut j = st.thread;
                while j < st.tokens_so_far() {
                    self.access(cpu, mm, kv_layer + j, false, false)?;
                    j += st.nthreads;
                    n += 1;
                }
            }
        }
        self.access(cpu, mm, st.text.0, false, true)?;
        self.access(cpu, mm, st.model.0 + mstart + i, false, false)?;
        self.access(cpu, mm, st.work + input.0 + i % input.1, false, false)?;
        self.access(cpu, mm, st.work + output.0 + i * output.1 / mpages, true, false)?;
        self.charge_user(cpu, st.ns_per_page);
        if st.mat == 2 && i + 1 == e && st.thread == 0 {
            // After v: this pass's tokens' K and V rows (8 KV heads x 128 x fp16 x 2 = 4 KiB
            // per token per layer) are appended to the layer's cache.
            let kv_layer = st.kv + st.layer * st.ctx;
            let (first, kvn) = if st.pass == 0 { (0, st.prompt) } else { (st.prompt + st.pass - 1, 1) };
            for j in first..(first + kvn).min(st.ctx) {
                self.access(cpu, mm, kv_layer + j, true, false)?;
                n += 1;
            }
        }
        if st.barrier && st.nthreads > 1 && i + 1 == e {
            // ggml_barrier() after the thread's last rows: its code, and atomic_fetch_add() on
            // the shared counter (a store); a thread that is not the last then spins on it.
            let (text, counter) = st.barrier_pages();
            self.access(cpu, mm, text, false, true)?;
            self.access(cpu, mm, counter, true, false)?;
            n += 2;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TaskState;

    /// A flush IPI that reaches a thread spinning in ggml_barrier() costs it one iTLB miss (the
    /// loop's code) and one dTLB load miss (the counter), once per flush: the loop refills them
    /// at once, and without a flush they stay cached.
    #[test]
    fn a_flush_costs_a_spinning_thread_its_loop_and_counter_translations() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/llm-inference.toml");
        // Stop the run early (the liveness bound) at the first of these times that leaves a
        // thread spinning at a barrier, its pages present and its mm loaded.
        for ms in [5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
            let cfg = crate::config::load(&path, &[format!("run.max_sim_ms={ms}")]).unwrap();
            let mut sim = Sim::build(&cfg).unwrap();
            sim.run(|_| {});
            let found = (0..sim.cpus.len()).find_map(|c| {
                let t = sim.cpus[c].current?;
                let task = &sim.tasks[t.0 as usize];
                let Some(Body::Llm(st)) = task.prog.as_deref().map(|p| &p.body) else { return None };
                let mm = task.mm?;
                let (text, counter) = st.barrier_pages();
                let pages = [text, counter];
                let ok = matches!(task.state, TaskState::Spinning(_)) && st.waiting.is_some() && sim.cpus[c].tlbstate.loaded_mm == Some(mm) && pages.iter().all(|&v| sim.mm(mm).pgtable.get(v).present());
                ok.then_some((CpuId(c as u32), mm))
            });
            let Some((spin_cpu, mm)) = found else { continue };
            let other = CpuId(if spin_cpu.0 == 0 { 1 } else { 0 });
            let misses = |s: &Sim| (s.cpus[spin_cpu.0 as usize].stats.itlb_misses, s.cpus[spin_cpu.0 as usize].stats.dtlb_load_misses);
            sim.running_cpu = Some(other);
            for _ in 0..2 {
                let (i0, d0) = misses(&sim);
                sim.flush_tlb_mm(other, mm);
                assert_eq!(misses(&sim), (i0 + 1, d0 + 1), "one refill of each per flush");
            }
            // No flush, no miss: the spin's translations stay cached.
            let (i0, d0) = misses(&sim);
            sim.llm_spinner_refill(spin_cpu);
            assert_eq!(misses(&sim), (i0, d0));
            return;
        }
        panic!("no stop time left a thread spinning at a barrier");
    }
}
