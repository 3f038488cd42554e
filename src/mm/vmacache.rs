//! VMA lookup: find_vma over the VMA tree with the pre-3.15 mm->mmap_cache, the 3.15-6.0
//! per-thread vmacache, or the 6.1+ maple tree. (Being written: the VMA-lookup issue.)

/// Per-mm lookup state (mm->mmap_cache, mm->vmacache_seqnum).
#[derive(Clone, Debug, Default)]
pub struct MmVmaLookup {}

/// Per-task cache (task_struct.vmacache).
#[derive(Clone, Debug, Default)]
pub struct TaskVmaCache {}
