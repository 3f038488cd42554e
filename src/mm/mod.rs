//! The core memory-management code, one file per kernel file under mm/.
pub mod filemap;
pub mod hugetlb;
pub mod hugetlb_vmemmap;
pub mod madvise;
pub mod memory;
pub mod migrate;
pub mod mmap;
pub mod mmu_gather;
pub mod mprotect;
pub mod page_alloc;
pub mod pgtable;
pub mod rmap;
pub mod swapfile;
pub mod vmacache;
pub mod vmscan;
pub mod vmstat;
