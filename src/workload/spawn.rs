//! Spawning a generated workload's processes and threads (the synthetic generator and the LLM
//! workload): one place for the placement and start rule both follow.

use crate::config::Config;
use crate::sim::Sim;
use crate::types::*;
use crate::workload::{Body, Program};

impl Sim {
    /// `procs` processes of `threads` threads each. Threads are placed round robin over the CPUs
    /// in creation order (the n-th thread overall on CPU n mod nr_cpus, no affinity), a process's
    /// mm (with `text_pages` of text) is created on the CPU of its first thread, and every thread
    /// starts once all exist (at time 0, or spread by `workload.start_jitter_us`: `start_tasks`). `setup(sim, cpu, process, mm)` maps the process's
    /// memory and returns what its threads share; `thread(sim, &shared, i, n)` gives the
    /// process's thread `i` (the n-th overall) its body.
    pub(crate) fn spawn_workload<S>(
        &mut self,
        cfg: &Config,
        procs: u32,
        threads: u64,
        text_pages: u64,
        mut setup: impl FnMut(&mut Sim, CpuId, u32, MmId) -> S,
        mut thread: impl FnMut(&mut Sim, &S, u64, u32) -> Body,
    ) {
        let ncpus = self.cpus.len() as u32;
        let mut tids = Vec::new();
        let mut n = 0u32;
        for p in 0..procs {
            let cpu = CpuId(n % ncpus);
            let mm = self.new_process_mm(cpu, p, text_pages);
            let shared = setup(self, cpu, p, mm);
            for i in 0..threads {
                let body = thread(self, &shared, i, n);
                let cpu = CpuId(n % ncpus);
                let prog = Program { body, file: cfg.name.clone(), released: false };
                tids.push((self.new_task(p, Some(mm), cpu, None, prog), cpu));
                n += 1;
            }
        }
        self.start_tasks(cfg, tids);
    }
}
