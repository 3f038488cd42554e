//! A swap device (mm/swapfile.c, mm/swap_state.c, Linux 6.18, much simplified): slots with a
//! use count per slot (`swap_map`), allocated by reclaim (`folio_alloc_swap`), taken by every
//! PTE that points at the slot (a swap entry), freed when the last one goes (`swap_free`).
//! Off unless `machine.swap_mib` > 0.
//!
//! Departures: no swap cache: a page is written and freed in the same reclaim step, and each
//! swap-in allocates its own copy (a slot shared after fork is read once per mm); no readahead,
//! no clusters, no zswap, no swap-out of shmem.

use crate::mm::vmstat::VmEvent;
use crate::sim::Sim;
use crate::types::*;

#[derive(Clone, Debug, Default)]
pub struct Swap {
    /// swap_map: PTEs pointing at each slot (0 = free).
    pub map: Vec<u16>,
    /// Free slots (LIFO; lowest first).
    pub free: Vec<u32>,
}

impl Swap {
    pub fn new(pages: u64) -> Self {
        Swap { map: vec![0; pages as usize], free: (0..pages as u32).rev().collect() }
    }
    pub fn total(&self) -> u64 {
        self.map.len() as u64
    }
    pub fn nr_free(&self) -> u64 {
        self.free.len() as u64
    }
}

impl Sim {
    /// `folio_alloc_swap()`: a free slot, or None when the device is full or absent.
    pub fn swap_alloc(&mut self) -> Option<u32> {
        self.swap.free.pop()
    }

    /// `swap_duplicate()`: one more PTE points at the slot.
    pub fn swap_dup(&mut self, slot: u32) {
        self.swap.map[slot as usize] += 1;
    }

    /// `swap_free()`: one PTE fewer; the slot is free at zero.
    pub fn swap_free(&mut self, slot: u32) {
        let c = &mut self.swap.map[slot as usize];
        assert!(*c > 0, "simulator bug: swap_free of an unused slot {slot}");
        *c -= 1;
        if *c == 0 {
            self.swap.free.push(slot);
        }
    }

    /// `swap_writepage()`: the write of one page to the device.
    pub fn swap_writepage(&mut self, cpu: CpuId) {
        self.mark("swap out");
        self.vmstat.count(VmEvent::PSWPOUT);
        // The swap device's bio (the model does not book the device for swap writes).
        self.vmstat.count(VmEvent::PGPGOUT);
        self.charge_sys(cpu, self.p.block_write_ns);
    }
}
