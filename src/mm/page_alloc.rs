//! Frame allocation (mm/page_alloc.c, order 0 only for now): per-node free lists.
//!
//! Departure from Linux: no buddy orders, pcp lists, watermarks or reclaim yet (the
//! memory-pressure work adds them); an empty node falls back to the next node in id order, and
//! an empty machine is an OOM event (counted, the faulting task is killed), never a crash.
//! Invariant: page_alloc never touches page tables or TLBs.

use crate::sim::{pg, Frame, Sim};
use crate::types::*;

impl Sim {
    /// `alloc_pages(GFP_KERNEL, 0)` preferring `nid`. Returns None only when every node is empty.
    pub fn alloc_page(&mut self, nid: NodeId) -> Option<Pfn> {
        let n = self.nodes.len();
        for i in 0..n {
            let node = (nid.0 as usize + i) % n;
            if let Some(pfn) = self.nodes[node].free.pop() {
                let f = &mut self.frames[pfn.0 as usize];
                debug_assert!(f.flags & pg::FREE != 0, "simulator bug: allocating a busy frame {pfn}");
                *f = Frame { flags: 0, node: f.node, refcount: 1, mapcount: 0, mapping: 0, index: 0 };
                self.vmstat.count(crate::mm::vmstat::VmEvent::PGALLOC);
                return Some(pfn);
            }
        }
        None
    }

    /// `free_unref_page()`: the frame returns to its node's free list.
    pub fn free_page(&mut self, pfn: Pfn) {
        let f = &mut self.frames[pfn.0 as usize];
        assert!(f.flags & pg::FREE == 0, "simulator bug: double free of {pfn}");
        assert!(f.flags & pg::ZERO == 0, "simulator bug: freeing the zero page");
        debug_assert_eq!(f.mapcount, 0, "simulator bug: freeing mapped frame {pfn}");
        let node = f.node as usize;
        *f = Frame { flags: pg::FREE, node: f.node, ..Default::default() };
        self.nodes[node].free.push(pfn);
        self.vmstat.count(crate::mm::vmstat::VmEvent::PGFREE);
    }

    /// `folio_put()`: drop a reference, freeing the frame at zero.
    pub fn put_page(&mut self, pfn: Pfn) {
        let f = &mut self.frames[pfn.0 as usize];
        if f.flags & pg::ZERO != 0 {
            return;
        }
        assert!(f.refcount > 0, "simulator bug: refcount underflow on {pfn}");
        f.refcount -= 1;
        if f.refcount == 0 {
            self.free_page(pfn);
        }
    }

    pub fn get_page(&mut self, pfn: Pfn) {
        let f = &mut self.frames[pfn.0 as usize];
        if f.flags & pg::ZERO == 0 {
            f.refcount += 1;
        }
    }

    pub fn nr_free_pages(&self) -> u64 {
        self.nodes.iter().map(|n| n.free.len() as u64).sum()
    }
}
