//! Intel Remote Action Request (RAR) TLB flushing as in the 2025 RFC (Rik van Riel, after
//! Yu-cheng Yu's earlier patches; "x86/mm: Intel RAR TLB invalidation", not merged): **RFC, not
//! in any released kernel.**
//!
//! The initiator fills a payload in its RAR payload table (type: invalidate pages or a PCID;
//! the PCID; the range), writes RAR_PENDING into each target CPU's action vector slot for that
//! payload, and signals the targets (`smp_call_rar_many()`). A target's hardware runs the action
//! without entering an interrupt handler, also while interrupts are disabled or a long
//! instruction runs, and writes RAR_SUCCESS; the initiator polls until every target has. The RFC
//! uses RAR only for mms with a global ASID (one PCID everywhere, so one payload fits every
//! target), assigned by the same rules as INVLPGB's (`consider_global_asid()`); other mms keep
//! IPIs. Modelled: that path of `flush_tlb_mm_range()` (`rar_tlb_flush()`), the payload and
//! action accounting, completion polling, and batched unmaps of global-ASID mms (their pages
//! are collected at `arch_tlbbatch_add_pending()` and sent as one action to every other CPU at
//! the batch's flush, reusing invlpgb.rs's queue). Left out: RAR for kernel-range flushes (they
//! stay IPIs), the payload-slot allocation and its locking.
//!
//! | state               | meaning                                           | who changes it        |
//! |---------------------|---------------------------------------------------|-----------------------|
//! | payload (transient) | (PCID, start, end) of one flush                   | rar_tlb_flush         |
//! | action per target   | RAR_PENDING → RAR_SUCCESS when its hardware is done | rar_tlb_flush (here: done time) |

use crate::sim::{round_ns, Sim};
use crate::types::*;

use super::tlb::{FlushInfo, FLUSH_ALL};

impl Sim {
    /// `rar_tlb_flush()`: every other CPU in mm_cpumask runs the payload as a RAR action; the
    /// local TLB is flushed directly. A global ASID is the same PCID on every CPU, so the
    /// targets' entries are dropped whether or not they run the mm now (lazy or switched away).
    pub fn rar_tlb_flush(&mut self, cpu: CpuId, info: &FlushInfo, asid: u16) {
        let mm = info.mm.expect("RAR flushes are per mm");
        self.bcast.stats.rar_flushes += 1;
        self.mark("rar flush");
        let pages = if info.end == FLUSH_ALL { None } else { Some((info.start, info.end, 1u64 << (info.stride_shift - PAGE_SHIFT))) };
        let per_target = match pages {
            None => self.p.flush_full_ns,
            Some((s, e, step)) => self.p.invlpg_ns * ((e - s).div_ceil(step)) as f64,
        };
        let targets: Vec<CpuId> = self.mm(mm).cpumask.iter().filter(|&c| c != cpu).collect();
        let t0 = self.now(cpu);
        let mut done = t0;
        for (k, &c) in targets.iter().enumerate() {
            self.bcast.stats.rar_actions += 1;
            let hop = if self.cpus[cpu.0 as usize].socket != self.cpus[c.0 as usize].socket { self.p.ipi_cross_socket_ns } else { 0.0 };
            // No interrupt: interrupts-off sections do not delay the action (white paper 341431).
            let arrive = t0 + round_ns(self.bcast.rar_send_ns * (k + 1) as f64 + self.bcast.rar_complete_ns + hop);
            let ci = c.0 as usize;
            self.rar_invalidate(ci, asid, pages);
            // The invalidation itself occupies the target's core; no handler entry or exit.
            let cost = round_ns(per_target);
            self.steal_irq_time(c, arrive, cost);
            done = done.max(arrive + cost);
        }
        self.charge_sys(cpu, self.bcast.rar_send_ns * targets.len() as f64);
        self.bcast.stats.tlbsync_ns += self.bcast.rar_send_ns * targets.len() as f64;
        // The local part, as the RFC's rar_tlb_flush(): if this CPU is in mm_cpumask,
        // flush_tlb_func(). Running the mm, it drops the range. Running another mm (kswapd on a
        // borrowed mm, say), flush_tlb_func() only clears this CPU from mm_cpumask: the global
        // PCID's entries stay, and it is the RFC's choose_new_asid(.., new_cpu) that flushes them
        // when this CPU loads the mm again. Seed 301 of `mmsim check --set machine.rar=true --set
        // kernel.global_asid_eager=true` found the model doing neither (docs/flush-alternatives.md).
        let ci = cpu.0 as usize;
        if self.mm(mm).cpumask.test(cpu) {
            if self.cpus[ci].tlbstate.loaded_mm == Some(mm) {
                self.rar_invalidate(ci, asid, pages);
                self.charge_sys(cpu, per_target);
            } else {
                self.mark("rar flush from a cpu not running the mm");
                self.mm_mut(mm).cpumask.clear(cpu);
            }
        }
        // Poll the action vector until every target wrote RAR_SUCCESS.
        let now = self.now(cpu);
        if done > now {
            self.charge_sys_ns(cpu, done - now);
            self.bcast.stats.tlbsync_ns += (done - now) as f64;
        }
    }

    /// A RAR action on CPU `ci`: drop the PCID (`pages` None) or each page of the range.
    fn rar_invalidate(&mut self, ci: usize, asid: u16, pages: Option<(u64, u64, u64)>) {
        match pages {
            None => {
                self.cpus[ci].tlb.flush_asid(asid);
            }
            Some((s, e, step)) => {
                let mut v = s;
                while v < e {
                    self.cpus[ci].tlb.flush_one(asid, v);
                    v += step;
                }
            }
        }
    }
}
