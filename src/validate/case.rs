//! The validation cases: one op sequence, defined once, run on the host and in the simulator.
//!
//! Each case is `(op, pages, iters, remote)`. The *same* definition drives the C microbenchmark
//! (`hostbench.c`) and the simulated op program (`sim.rs`), so the two sides cannot drift.
//! One "op" is one iteration of the loop below; the figure compared is TLB shootdown
//! interrupts (the `TLB:` line of /proc/interrupts, summed over CPUs) per op.
//!
//! | op            | setup (not measured)                      | one iteration                                             |
//! |---------------|-------------------------------------------|-----------------------------------------------------------|
//! | mmap-anon     | -                                         | mmap N anon private RW; write-touch N; munmap             |
//! | mmap-file     | N-page file on disk                       | mmap N MAP_SHARED RW; read-touch N; munmap                |
//! | mprotect      | mmap N anon RW, write-touch N             | mprotect(PROT_READ); mprotect(PROT_READ|PROT_WRITE); write-touch N |
//! | madv-dontneed | mmap N anon RW                            | write-touch N; madvise(MADV_DONTNEED)                     |
//! | madv-pageout  | N-page file, mmap MAP_SHARED RW           | read-touch N; madvise(MADV_PAGEOUT)                       |
//! | fork-cow      | mmap N anon RW, write-touch N             | fork (child waits on a pipe); write-touch N (COW); release child; waitpid |
//! | msync         | N-page file, mmap MAP_SHARED RW           | write-touch N; msync(MS_SYNC) (each dirty page cleaned with one flush) |
//!
//! `remote`: `none` = only the measuring thread (pinned to CPU 0); `spin` = a second thread of the
//! same process pinned to CPU 1 busy-looping without touching the pages; `sleep` = that thread
//! ran once on CPU 1 and is blocked (futex) for the whole measurement.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    MmapAnon,
    MmapFile,
    Mprotect,
    MadvDontneed,
    MadvPageout,
    ForkCow,
    Msync,
}

impl Op {
    pub const ALL: [Op; 7] = [
        Op::MmapAnon,
        Op::MmapFile,
        Op::Mprotect,
        Op::MadvDontneed,
        Op::MadvPageout,
        Op::ForkCow,
        Op::Msync,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Op::MmapAnon => "mmap-anon",
            Op::MmapFile => "mmap-file",
            Op::Mprotect => "mprotect",
            Op::MadvDontneed => "madv-dontneed",
            Op::MadvPageout => "madv-pageout",
            Op::ForkCow => "fork-cow",
            Op::Msync => "msync",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Op::ALL.into_iter().find(|o| o.name() == s).ok_or_else(|| {
            let names: Vec<_> = Op::ALL.iter().map(|o| o.name()).collect();
            format!("unknown op '{s}' (expected one of: {})", names.join(", "))
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Remote {
    None,
    Spin,
    Sleep,
}

impl Remote {
    pub const ALL: [Remote; 3] = [Remote::None, Remote::Spin, Remote::Sleep];
    pub fn name(self) -> &'static str {
        match self {
            Remote::None => "none",
            Remote::Spin => "spin",
            Remote::Sleep => "sleep",
        }
    }
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Remote {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Remote::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| format!("unknown remote '{s}' (expected none, spin or sleep)"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub op: Op,
    pub pages: u32,
    pub iters: u32,
    pub remote: Remote,
}
