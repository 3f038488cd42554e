//! The op language for microbenchmarks: one program per thread (see docs/ops.md).
//!
//! ```text
//! mmap NAME PAGES [anon | file:FNAME [sparse]] [private | shared] [prot=none|r|rw] [at=0xADDR]
//! touch NAME read|write [words=N] # touch every page once, in order; N loads/stores per page
//! munmap NAME
//! mprotect NAME none|r|rw
//! madvise NAME dontneed|pageout
//! msync NAME                     # msync(MS_SYNC): write the shared file pages, wait
//! migrate NAME NODE              # move_pages(2) of the region's pages to NODE
//! fork                           # child shares nothing but a COW copy; it waits for `reap`
//! reap                           # release the children and wait for them to exit
//! sleep DURATION | forever       # 10us, 5ms, 100ns, 1s
//! spin DURATION | forever        # user-mode busy loop; `forever` ends with the run
//! loop N ... end
//! ```
//! Regions are per process: any thread of the process may use a name another thread mapped.

use crate::config::{ConfigError, Origin};
use crate::mm::madvise::Advice;
use crate::mm::mmap::Prot;
use crate::types::*;

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Mmap { region: String, pages: u64, file: Option<String>, shared: bool, prot: Prot, at: Option<u64>, sparse: bool },
    /// `words`: loads (or stores) per page, 1..=512 (8-byte words of a 4 KiB page). The first
    /// goes through the MMU (it may fault); the other `words - 1` are L1 dTLB hits on the same
    /// page, charged in the same step (usemem's loop reads every word, `--step` 8).
    Touch { region: String, write: bool, words: u32 },
    Munmap { region: String },
    Mprotect { region: String, prot: Prot },
    Madvise { region: String, advice: Advice },
    Migrate { region: String, node: u32 },
    /// msync(MS_SYNC) of the region: a shared file mapping's dirty pages are written and waited
    /// for (mm/page_writeback.rs `msync_range()`).
    Msync { region: String },
    /// write(2) of the first PAGES pages of file FILE through the page cache.
    Fwrite { file: String, pages: u64 },
    /// PAGES pages allocated by the kernel for itself (a growing slab cache), kept to the end.
    Kalloc { pages: u64 },
    Fork,
    Reap,
    Sleep(Option<Ns>),
    Spin(Option<Ns>),
    Loop { count: u64, end: usize },
    End { start: usize },
    /// Internal: a forked child waits here until its parent reaps it.
    WaitReap,
}

#[derive(Clone, Debug)]
pub struct OpLine {
    pub op: Op,
    pub line: usize,
}

fn parse_duration(s: &str) -> Option<Ns> {
    let (num, mul) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        return None;
    };
    num.parse::<f64>().ok().filter(|x| *x >= 0.0 && x.is_finite()).map(|x| (x * mul as f64).round() as Ns)
}

fn parse_prot(s: &str) -> Option<Prot> {
    match s {
        "none" => Some(Prot::None),
        "r" | "ro" | "read" => Some(Prot::Read),
        "rw" | "write" => Some(Prot::ReadWrite),
        _ => None,
    }
}

/// Parse an op program. `origin` is the location of its first line.
pub fn parse(text: &str, origin: &Origin) -> Result<Vec<OpLine>, ConfigError> {
    let key = "workload.thread.ops";
    let mut out: Vec<OpLine> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = origin.line + i;
        let here = Origin { file: origin.file.clone(), line };
        let err = |m: String| ConfigError::key(&here, key, m);
        let code = raw.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        let w: Vec<&str> = code.split_whitespace().collect();
        let want = |n: usize, usage: &str| -> Result<(), ConfigError> {
            if w.len() < n { Err(ConfigError::key(&here, key, format!("'{code}': expected `{usage}`"))) } else { Ok(()) }
        };
        let op = match w[0] {
            "mmap" => {
                want(3, "mmap NAME PAGES [anon|file:F] [private|shared] [prot=..] [at=0x..]")?;
                let pages: u64 = match w[2].parse::<u64>() {
                    Ok(p) if p > 0 && p < (1 << 36) => p,
                    // 2^36 pages = 256 TiB: more than x86-64's 128 TiB user address space.
                    Ok(p) if p > 0 => return Err(err(format!("'{p}': PAGES must be below 2^36 (256 TiB, beyond the 128 TiB user address space)"))),
                    _ => return Err(err(format!("'{}': PAGES must be a positive integer", w[2]))),
                };
                let (mut file, mut shared, mut prot, mut at, mut sparse) = (None, false, Prot::ReadWrite, None, false);
                for opt in &w[3..] {
                    if *opt == "anon" {
                        file = None;
                    } else if let Some(f) = opt.strip_prefix("file:") {
                        file = Some(f.to_string());
                    } else if *opt == "sparse" {
                        sparse = true;
                    } else if *opt == "shared" {
                        shared = true;
                    } else if *opt == "private" {
                        shared = false;
                    } else if let Some(p) = opt.strip_prefix("prot=") {
                        prot = parse_prot(p).ok_or_else(|| err(format!("'{p}': prot must be none, r or rw")))?;
                    } else if let Some(a) = opt.strip_prefix("at=") {
                        let v = u64::from_str_radix(a.trim_start_matches("0x"), 16).map_err(|_| err(format!("'{a}': at= takes a hex address")))?;
                        if v % PAGE_SIZE != 0 || v >= 1 << 47 {
                            return Err(err(format!("'{a}': at= must be page-aligned and below 128 TiB")));
                        }
                        at = Some(v >> PAGE_SHIFT);
                    } else {
                        return Err(err(format!("unknown mmap option '{opt}'")));
                    }
                }
                if sparse && file.is_none() {
                    return Err(err("'sparse' applies to a file mapping (file:NAME)".into()));
                }
                Op::Mmap { region: w[1].to_string(), pages, file, shared, prot, at, sparse }
            }
            "touch" => {
                want(3, "touch NAME read|write [words=N]")?;
                let write = match w[2] {
                    "read" | "r" => false,
                    "write" | "w" => true,
                    x => return Err(err(format!("'{x}': touch takes read or write"))),
                };
                let mut words = 1;
                for opt in &w[3..] {
                    let Some(n) = opt.strip_prefix("words=") else {
                        return Err(err(format!("unknown touch option '{opt}' (words=N)")));
                    };
                    words = n.parse().ok().filter(|n| (1..=512).contains(n)).ok_or_else(|| err(format!("'{n}': words= takes 1 to 512 (8-byte words of a 4 KiB page)")))?;
                }
                Op::Touch { region: w[1].to_string(), write, words }
            }
            "munmap" => {
                want(2, "munmap NAME")?;
                Op::Munmap { region: w[1].to_string() }
            }
            "mprotect" => {
                want(3, "mprotect NAME none|r|rw")?;
                Op::Mprotect { region: w[1].to_string(), prot: parse_prot(w[2]).ok_or_else(|| err(format!("'{}': prot must be none, r or rw", w[2])))? }
            }
            "madvise" => {
                want(3, "madvise NAME dontneed|pageout")?;
                let advice = match w[2] {
                    "dontneed" => Advice::DontNeed,
                    "pageout" => Advice::PageOut,
                    x => return Err(err(format!("'{x}': advice must be dontneed or pageout"))),
                };
                Op::Madvise { region: w[1].to_string(), advice }
            }
            "msync" => {
                want(2, "msync NAME")?;
                Op::Msync { region: w[1].to_string() }
            }
            "migrate" => {
                want(3, "migrate NAME NODE")?;
                let node = w[2].parse().map_err(|_| err(format!("'{}': NODE must be a node number", w[2])))?;
                Op::Migrate { region: w[1].to_string(), node }
            }
            "fwrite" => {
                want(3, "fwrite FILE PAGES")?;
                let pages = w[2].parse::<u64>().ok().filter(|&p| p > 0 && p < 1 << 36).ok_or_else(|| err(format!("'{}': PAGES must be a positive integer below 2^36", w[2])))?;
                Op::Fwrite { file: w[1].to_string(), pages }
            }
            "kalloc" => {
                want(2, "kalloc PAGES")?;
                let pages = w[1].parse::<u64>().ok().filter(|&p| p > 0 && p < 1 << 36).ok_or_else(|| err(format!("'{}': PAGES must be a positive integer below 2^36", w[1])))?;
                Op::Kalloc { pages }
            }
            "fork" => Op::Fork,
            "reap" => Op::Reap,
            "sleep" | "spin" => {
                want(2, &format!("{} DURATION|forever", w[0]))?;
                let d = if w[1] == "forever" { None } else { Some(parse_duration(w[1]).ok_or_else(|| err(format!("'{}': a duration is a number with ns, us, ms or s", w[1])))?) };
                if w[0] == "sleep" { Op::Sleep(d) } else { Op::Spin(d) }
            }
            "loop" => {
                want(2, "loop N")?;
                let count = w[1].parse().ok().filter(|&n: &u64| n > 0).ok_or_else(|| err(format!("'{}': loop count must be a positive integer", w[1])))?;
                open.push(out.len());
                Op::Loop { count, end: 0 }
            }
            "end" => {
                let start = open.pop().ok_or_else(|| err("'end' without 'loop'".into()))?;
                let end = out.len();
                if let Op::Loop { end: e, .. } = &mut out[start].op {
                    *e = end;
                }
                Op::End { start }
            }
            x => return Err(err(format!("unknown op '{x}' (mmap, touch, munmap, mprotect, madvise, migrate, fork, reap, sleep, spin, loop, end)"))),
        };
        out.push(OpLine { op, line });
    }
    if let Some(&s) = open.last() {
        return Err(ConfigError::key(&Origin { file: origin.file.clone(), line: out[s].line }, key, "'loop' without 'end'"));
    }
    if out.is_empty() {
        return Err(ConfigError::key(origin, key, "empty program"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o() -> Origin {
        Origin { file: "s.toml".into(), line: 10 }
    }

    #[test]
    fn parses_a_program_with_a_loop() {
        let p = parse("mmap a 16 file:f shared prot=r at=0x7f0000000000\nloop 3\n touch a read # hi\nend\nspin forever\n", &o()).unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p[1].op, Op::Loop { count: 3, end: 3 });
        assert_eq!(p[3].op, Op::End { start: 1 });
        assert_eq!(p[4].op, Op::Spin(None));
        assert!(matches!(&p[0].op, Op::Mmap { shared: true, prot: Prot::Read, at: Some(0x7f0000000), .. }));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("mmap a 16\ntuch a read\n", &o()).unwrap_err().to_string();
        assert!(e.starts_with("s.toml:11: workload.thread.ops: unknown op 'tuch'"), "{e}");
        let e = parse("loop 2\ntouch a read\n", &o()).unwrap_err().to_string();
        assert!(e.starts_with("s.toml:10: "), "{e}");
        let e = parse("sleep 10 parsecs\n", &o()).unwrap_err().to_string();
        assert!(e.contains("duration"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10us"), Some(10_000));
        assert_eq!(parse_duration("1.5ms"), Some(1_500_000));
        assert_eq!(parse_duration("2s"), Some(2_000_000_000));
        assert_eq!(parse_duration("-1s"), None);
    }
}
