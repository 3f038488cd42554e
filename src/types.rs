//! Typed quantities (ChampSim-style): a frame number can never be passed as an address.

use std::fmt;

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
pub const PMD_SHIFT: u32 = 21;
pub const PMD_SIZE: u64 = 1 << PMD_SHIFT;
pub const PTRS_PER_TABLE: usize = 512;

macro_rules! newtype {
    ($(#[$m:meta])* $name:ident($t:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $t);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

newtype!(
    /// Physical frame number (4 KiB frames).
    Pfn(u32)
);
newtype!(
    /// Virtual page number (virtual address >> PAGE_SHIFT).
    Vpn(u64)
);
newtype!(
    /// CPU number.
    CpuId(u32)
);
newtype!(
    /// NUMA node number.
    NodeId(u32)
);
newtype!(
    /// Hardware address-space identifier (x86 PCID); 0..TLB_NR_DYN_ASIDS.
    Asid(u16)
);
newtype!(
    /// Index of an mm_struct in the simulator's mm table.
    MmId(u32)
);
newtype!(
    /// Task (thread) id.
    Tid(u32)
);
newtype!(
    /// Index of a file (inode) in the simulator's file table.
    FileId(u32)
);

/// A user virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl VirtAddr {
    pub fn vpn(self) -> Vpn {
        Vpn(self.0 >> PAGE_SHIFT)
    }
}

impl Vpn {
    pub fn addr(self) -> VirtAddr {
        VirtAddr(self.0 << PAGE_SHIFT)
    }
}

impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Simulated time in nanoseconds.
pub type Ns = u64;
