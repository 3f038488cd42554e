//! Real page-fault traces: `mmsim trace record` (tracefs) writes them, `workload.kind = "trace"`
//! replays them. The format is documented in docs/vma.md ("Trace format, version 1").
//!
//! ```text
//! # mmsim-trace 1
//! # command: gcc -c hello.c
//! <t_ns> <tid> fork <child_tid> process|thread|vfork
//! <t_ns> <tid> exec <path>
//! <t_ns> <tid> map <start>-<end> <perms> <offset> [<path>]     (/proc/PID/maps after exec)
//! <t_ns> <tid> fault <addr> <error_code>
//! <t_ns> <tid> mmap <addr> <len> <prot> <flags> <fd> <off> = <ret>
//! <t_ns> <tid> munmap <addr> <len> = <ret>
//! <t_ns> <tid> mprotect <addr> <len> <prot> = <ret>
//! <t_ns> <tid> brk <addr> = <ret>
//! <t_ns> <tid> madvise <addr> <len> <advice> = <ret>
//! <t_ns> <tid> exit
//! ```
//! Numbers after the event name are hexadecimal (with or without 0x), as tracefs prints them;
//! times are decimal ns since the first event. Lines starting with '#' are comments.
//!
//! Replay: each traced task becomes a simulated task that performs its events in order (the
//! recorded times are not used: the model decides how long things take). A fault becomes a user
//! access of the same kind at the same address (the model decides whether it faults), a syscall
//! becomes the model's syscall. The layout a process had at exec is the maps snapshot minus the
//! ranges its recorded syscalls created before the snapshot was taken.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::{Config, ConfigError, Origin};
use crate::mm::madvise::Advice;
use crate::mm::mmap::Prot;
use crate::sim::{vm, Backing, Sim, Vma};
use crate::types::*;
use crate::workload::StepResult;

pub const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkKind {
    Process,
    Thread,
    Vfork,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Ev {
    Fork { child: u32, kind: ForkKind },
    Exec { path: String, layout: Vec<MapLine> },
    Fault { addr: u64, err: u64 },
    Mmap { addr: u64, len: u64, prot: u64, flags: u64, fd: u64, off: u64, ret: u64 },
    Munmap { addr: u64, len: u64, ret: u64 },
    Mprotect { addr: u64, len: u64, prot: u64, ret: u64 },
    Brk { addr: u64, ret: u64 },
    Madvise { addr: u64, len: u64, advice: u64, ret: u64 },
    Exit,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MapLine {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub path: String,
}

/// A parsed trace: every task's events in order, and the first task.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub command: String,
    pub root: u32,
    pub tasks: BTreeMap<u32, Vec<Ev>>,
}

fn hex(s: &str) -> Option<u64> {
    let s = s.trim_end_matches(',');
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

fn is_err(ret: u64) -> bool {
    (ret as i64) < 0 && (ret as i64) > -4096
}

/// Parse a trace; errors name the line.
pub fn parse(file: &str, text: &str) -> Result<Trace, ConfigError> {
    let key = "workload.trace.file";
    let mut lines = text.lines().enumerate();
    let first = lines.next().map(|(_, l)| l.trim()).unwrap_or("");
    if first != format!("# mmsim-trace {FORMAT_VERSION}") {
        return Err(ConfigError::key(&Origin { file: file.into(), line: 1 }, key, format!("not an mmsim trace version {FORMAT_VERSION} (the first line must be '# mmsim-trace {FORMAT_VERSION}')")));
    }
    let mut tr = Trace::default();
    let mut root = None;
    // Map lines of a task's pending exec: (tid, time of exec).
    for (i, raw) in lines {
        let line = i + 1;
        let err = |m: String| ConfigError::key(&Origin { file: file.into(), line }, key, m);
        let l = raw.trim();
        if let Some(c) = l.strip_prefix("# command:") {
            tr.command = c.trim().to_string();
            continue;
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            return Err(err(format!("expected '<time> <tid> <event> ...', found '{l}'")));
        }
        let _t: u64 = f[0].parse().map_err(|_| err(format!("bad time '{}'", f[0])))?;
        let tid: u32 = f[1].parse().map_err(|_| err(format!("bad task id '{}'", f[1])))?;
        root.get_or_insert(tid);
        let args = &f[3..];
        let num = |k: usize| -> Result<u64, ConfigError> {
            args.get(k).and_then(|s| hex(s)).ok_or_else(|| err(format!("{}: argument {} missing or not a hex number", f[2], k + 1)))
        };
        let ret = |k: usize| -> Result<u64, ConfigError> {
            if args.get(k) != Some(&"=") {
                return Err(err(format!("{}: expected '= <return value>' after {} arguments", f[2], k)));
            }
            num(k + 1)
        };
        let ev = match f[2] {
            "fork" => {
                let child: u32 = args.first().and_then(|s| s.parse().ok()).ok_or_else(|| err("fork: expected the child's task id".into()))?;
                let kind = match args.get(1).copied() {
                    Some("process") => ForkKind::Process,
                    Some("thread") => ForkKind::Thread,
                    Some("vfork") => ForkKind::Vfork,
                    _ => return Err(err("fork: expected process, thread or vfork".into())),
                };
                tr.tasks.entry(child).or_default();
                Ev::Fork { child, kind }
            }
            "exec" => Ev::Exec { path: args.join(" "), layout: Vec::new() },
            "map" => {
                let (s, e) = args.first().and_then(|r| r.split_once('-')).ok_or_else(|| err("map: expected <start>-<end>".into()))?;
                let (start, end) = (hex(s).ok_or_else(|| err("map: bad start".into()))?, hex(e).ok_or_else(|| err("map: bad end".into()))?);
                if end <= start || start % PAGE_SIZE != 0 || end % PAGE_SIZE != 0 {
                    return Err(err(format!("map: {start:#x}-{end:#x} is not a page-aligned range")));
                }
                let perms = args.get(1).filter(|p| p.len() == 4).ok_or_else(|| err("map: expected perms like r-xp".into()))?.to_string();
                let offset = num(2)?;
                let m = MapLine { start, end, perms, offset, path: args.get(3..).map(|p| p.join(" ")).unwrap_or_default() };
                // Attach to the task's last exec.
                match tr.tasks.get_mut(&tid).and_then(|evs| evs.iter_mut().rev().find_map(|e| if let Ev::Exec { layout, .. } = e { Some(layout) } else { None })) {
                    Some(layout) => layout.push(m),
                    None => return Err(err("map: no exec of this task before it".into())),
                }
                continue;
            }
            "fault" => Ev::Fault { addr: num(0)?, err: num(1)? },
            "mmap" => Ev::Mmap { addr: num(0)?, len: num(1)?, prot: num(2)?, flags: num(3)?, fd: num(4)?, off: num(5)?, ret: ret(6)? },
            "munmap" => Ev::Munmap { addr: num(0)?, len: num(1)?, ret: ret(2)? },
            "mprotect" => Ev::Mprotect { addr: num(0)?, len: num(1)?, prot: num(2)?, ret: ret(3)? },
            "brk" => Ev::Brk { addr: num(0)?, ret: ret(1)? },
            "madvise" => Ev::Madvise { addr: num(0)?, len: num(1)?, advice: num(2)?, ret: ret(3)? },
            "exit" => Ev::Exit,
            other => return Err(err(format!("unknown event '{other}'"))),
        };
        tr.tasks.entry(tid).or_default().push(ev);
    }
    tr.root = root.ok_or_else(|| ConfigError::key(&Origin { file: file.into(), line: 1 }, key, "the trace has no events"))?;
    Ok(tr)
}

/// Replay state of one traced task.
#[derive(Debug)]
pub struct ReplayTask {
    trace: Arc<Trace>,
    tid: u32,
    pc: usize,
    /// brk: (start_brk, current brk) in vpns, learnt from the first brk() result.
    brk: Option<(u64, u64)>,
}

fn prot_of(p: u64) -> Prot {
    if p & 2 != 0 {
        Prot::ReadWrite
    } else if p & 5 != 0 {
        Prot::Read
    } else {
        Prot::None
    }
}

impl Sim {
    pub(crate) fn build_trace(&mut self, cfg: &Config) -> Result<(), ConfigError> {
        let key = "workload.trace.file";
        let origin = cfg.origin(key);
        let name = cfg.str(key);
        if name.is_empty() {
            return Err(ConfigError::key(&origin, key, "a trace workload needs workload.trace.file (see `mmsim trace record`)"));
        }
        let path = resolve(&origin, &name);
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::key(&origin, key, format!("{}: {e}", path.display())))?;
        let trace = Arc::new(parse(&path.display().to_string(), &text)?);
        let root = trace.root;
        let mm = self.mm_alloc(CpuId(0));
        let r = ReplayTask { trace, tid: root, pc: 0, brk: None };
        let t = self.new_task(root, Some(mm), CpuId(0), None, crate::workload::vma::trace_prog(r, &cfg.name));
        self.enqueue(CpuId(0), t, 0);
        Ok(())
    }

    /// Map `[start, start+pages)` as a recorded mmap did (replacing what was there, as MAP_FIXED
    /// does; the placement is the recorded result, so no get_unmapped_area search).
    fn replay_map(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, prot: u64, shared: bool, backing: Backing) {
        if self.mm(mm).vmas.range(..start + pages).any(|(_, v)| v.end > start) {
            self.do_munmap(cpu, mm, start, pages);
        }
        self.charge_sys(cpu, self.p.vma_op_ns);
        let mut flags = prot_of(prot).vm_flags();
        if prot & 4 != 0 {
            flags |= vm::EXEC;
        }
        if shared {
            flags |= vm::SHARED;
        }
        if let Backing::File { file, .. } = backing {
            self.files[file.0 as usize].i_mmap.push((mm, start));
        }
        self.mm_mut(mm).vmas.insert(start, Vma { start, end: start + pages, flags, backing, anon_vma: None });
        self.vma_linked(mm, start);
    }

    /// Build the layout of a freshly exec'd mm from the maps snapshot, leaving out what the
    /// task's own recorded syscalls map later (they were taken before the snapshot was read).
    fn replay_exec_layout(&mut self, cpu: CpuId, mm: MmId, tid: u32, pid_events: &[Ev], layout: &[MapLine]) {
        let start_brk = pid_events.iter().find_map(|e| if let Ev::Brk { ret, .. } = *e { Some(ret) } else { None });
        let made: Vec<(u64, u64)> = pid_events
            .iter()
            .take_while(|e| !matches!(e, Ev::Exec { .. }))
            .filter_map(|e| match *e {
                Ev::Mmap { len, ret, .. } if !is_err(ret) => Some((ret, ret + len)),
                Ev::Brk { ret, .. } => start_brk.map(|s| (s, ret.max(s))),
                _ => None,
            })
            .collect();
        for m in layout {
            if m.path == "[vsyscall]" || m.start >= 0x8000_0000_0000 {
                continue;
            }
            if m.path == "[heap]" || made.iter().any(|&(s, e)| s < m.end && m.start < e && m.path != "[stack]") {
                continue;
            }
            let p = m.perms.as_bytes();
            let prot = (p[0] == b'r') as u64 | ((p[1] == b'w') as u64) << 1 | ((p[2] == b'x') as u64) << 2;
            let backing = if m.path.starts_with('/') {
                let f = self.file_get_or_create(&m.path, (m.offset >> PAGE_SHIFT) + ((m.end - m.start) >> PAGE_SHIFT));
                Backing::File { file: f, pgoff: m.offset >> PAGE_SHIFT }
            } else {
                Backing::Anon
            };
            self.replay_map(cpu, mm, m.start >> PAGE_SHIFT, (m.end - m.start) >> PAGE_SHIFT, prot, p[3] == b's', backing);
        }
        let _ = tid;
    }

    /// One recorded event of a traced task.
    pub(crate) fn step_trace(&mut self, cpu: CpuId, _t: Tid, mm: MmId, r: &mut ReplayTask) -> Result<StepResult, String> {
        let trace = r.trace.clone();
        let Some(evs) = trace.tasks.get(&r.tid) else { return Ok(StepResult::Exit) };
        let Some(ev) = evs.get(r.pc) else { return Ok(StepResult::Exit) };
        r.pc += 1;
        let pages = |len: u64| len.div_ceil(PAGE_SIZE);
        match ev {
            Ev::Fault { addr, err } => {
                // A recorded fault the model does not reproduce (e.g. outside the VMAs it knows)
                // is counted, not fatal.
                let _ = self.access(cpu, mm, addr >> PAGE_SHIFT, err & 2 != 0, err & 0x10 != 0);
            }
            Ev::Mmap { addr, len, prot, flags, fd, off, ret } => {
                self.enter_syscall(cpu, 0.0);
                // get_unmapped_area() calls find_vma only for a non-fixed hint; do_mmap checks
                // MAP_FIXED_NOREPLACE with find_vma_intersection.
                let fixed = flags & 0x10 != 0;
                if (*addr != 0 && !fixed) || flags & 0x10_0000 != 0 {
                    self.find_vma(cpu, mm, addr >> PAGE_SHIFT);
                }
                if !is_err(*ret) && *len > 0 {
                    let anon = flags & 0x20 != 0 || *fd as u32 == u32::MAX;
                    let backing = if anon {
                        Backing::Anon
                    } else {
                        let f = self.file_get_or_create(&format!("trace:{}:fd{}", r.tid, fd), (off >> PAGE_SHIFT) + pages(*len));
                        Backing::File { file: f, pgoff: off >> PAGE_SHIFT }
                    };
                    self.replay_map(cpu, mm, ret >> PAGE_SHIFT, pages(*len), *prot, flags & 3 == 1, backing);
                }
            }
            Ev::Munmap { addr, len, .. } => {
                self.enter_syscall(cpu, 0.0);
                self.do_munmap(cpu, mm, addr >> PAGE_SHIFT, pages(*len));
            }
            Ev::Mprotect { addr, len, prot, ret } => {
                self.enter_syscall(cpu, 0.0);
                if !is_err(*ret) {
                    self.do_mprotect(cpu, mm, addr >> PAGE_SHIFT, pages(*len), prot_of(*prot));
                } else {
                    self.find_vma(cpu, mm, addr >> PAGE_SHIFT);
                }
            }
            Ev::Brk { addr, ret } => {
                let new = ret.div_ceil(PAGE_SIZE);
                match r.brk {
                    None => {
                        self.enter_syscall(cpu, 0.0);
                        r.brk = Some((new, new));
                    }
                    Some((start, cur)) => {
                        if *addr == 0 || new == cur {
                            self.enter_syscall(cpu, 0.0);
                        } else {
                            let got = self.sys_brk(cpu, mm, start, cur, new);
                            r.brk = Some((start, got));
                        }
                    }
                }
            }
            Ev::Madvise { addr, len, advice, .. } => {
                self.enter_syscall(cpu, 0.0);
                if *advice == 4 {
                    self.do_madvise(cpu, mm, addr >> PAGE_SHIFT, pages(*len), Advice::DontNeed);
                } else {
                    self.find_vma(cpu, mm, addr >> PAGE_SHIFT);
                }
            }
            Ev::Fork { child, kind } => {
                self.enter_syscall(cpu, self.p.fork_ns);
                let cmm = match kind {
                    ForkKind::Process => self.dup_mm(cpu, mm).map_err(|e| format!("fork: {e:?}"))?,
                    ForkKind::Thread | ForkKind::Vfork => mm,
                };
                let ct = ReplayTask { trace: trace.clone(), tid: *child, pc: 0, brk: if *kind == ForkKind::Process { r.brk } else { None } };
                let file = self.cfg.name.clone(); // the running task's program is out while it steps
                let nt = self.new_task(*child, Some(cmm), cpu, None, crate::workload::vma::trace_prog(ct, &file));
                let target = self.select_task_rq(nt);
                self.task_mut(nt).cpu = target;
                let now = self.now(cpu);
                self.enqueue(target, nt, now);
            }
            Ev::Exec { layout, .. } => {
                // exec_mmap(): a new mm (the task's vmacache is flushed: a new simulated task
                // continues the traced one), the old mm dropped when this task exits.
                self.enter_syscall(cpu, self.p.fork_ns);
                let nmm = self.try_mm_alloc(cpu).ok_or_else(|| "exec: out of memory for a new mm".to_string())?;
                self.replay_exec_layout(cpu, nmm, r.tid, &evs[r.pc..], layout);
                let ct = ReplayTask { trace: trace.clone(), tid: r.tid, pc: r.pc, brk: None };
                let file = self.cfg.name.clone(); // the running task's program is out while it steps
                let nt = self.new_task(r.tid, Some(nmm), cpu, None, crate::workload::vma::trace_prog(ct, &file));
                let now = self.now(cpu);
                self.enqueue(cpu, nt, now);
                return Ok(StepResult::Exit);
            }
            Ev::Exit => return Ok(StepResult::Exit),
        }
        Ok(StepResult::Continue)
    }
}

fn resolve(origin: &Origin, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() || origin.file.starts_with('<') || origin.file == "--set" {
        return p.to_path_buf();
    }
    Path::new(&origin.file).parent().map(|d| d.join(p)).unwrap_or_else(|| p.to_path_buf())
}

// ---------------------------------------------------------------- recording

const TRACEFS: &str = "/sys/kernel/tracing";
const EVENTS: &[&str] = &[
    "exceptions/page_fault_user",
    "syscalls/sys_enter_mmap",
    "syscalls/sys_exit_mmap",
    "syscalls/sys_enter_munmap",
    "syscalls/sys_exit_munmap",
    "syscalls/sys_enter_mprotect",
    "syscalls/sys_exit_mprotect",
    "syscalls/sys_enter_brk",
    "syscalls/sys_exit_brk",
    "syscalls/sys_enter_madvise",
    "syscalls/sys_exit_madvise",
    "task/task_newtask",
    "sched/sched_process_exec",
    "sched/sched_process_exit",
];

/// One line of tracefs text output: pid, time (ns), event name, payload.
fn parse_ftrace_line(l: &str) -> Option<(u32, u64, &str, &str)> {
    let open = l.find(" [")?;
    let (task, rest) = l.split_at(open);
    let pid: u32 = task.trim().rsplit_once('-')?.1.parse().ok()?;
    let rest = &rest[rest.find(']')? + 1..];
    let colon = rest.find(": ")?;
    let ts_str = rest[..colon].split_whitespace().last()?;
    let (secs, frac) = ts_str.split_once('.')?;
    let ns = secs.parse::<u64>().ok()? * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<u64>().ok()?;
    let rest = &rest[colon + 2..];
    let (event, payload) = rest.split_once(": ").unwrap_or((rest.trim_end_matches(':'), ""));
    Some((pid, ns, event, payload))
}

fn field<'a>(payload: &'a str, name: &str) -> Option<&'a str> {
    payload.split_whitespace().find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
}

/// Convert tracefs lines (and the maps snapshots taken at each exec) into the trace format.
pub fn convert(command: &str, root: u32, lines: &[String], snapshots: &BTreeMap<(u32, u64), String>) -> (String, String) {
    let mut out = String::new();
    let mut tracked: std::collections::BTreeSet<u32> = [root].into_iter().collect();
    let mut pending: BTreeMap<u32, (u64, String, Vec<u64>)> = BTreeMap::new();
    let mut t0 = None;
    let (mut faults, mut syscalls, mut tasks, mut execs, mut snaps, mut lost) = (0u64, 0u64, 1u64, 0u64, 0u64, 0u64);
    let mut body = String::new();
    for l in lines {
        if l.contains("LOST") && l.contains("EVENTS") {
            lost += 1;
            continue;
        }
        let Some((pid, ns, event, payload)) = parse_ftrace_line(l) else { continue };
        if event == "task_newtask" {
            let (Some(child), Some(flags)) = (field(payload, "pid").and_then(|p| p.parse::<u32>().ok()), field(payload, "clone_flags").and_then(hex)) else { continue };
            if !tracked.contains(&pid) {
                continue;
            }
            tracked.insert(child);
            tasks += 1;
            let kind = if flags & 0x10000 != 0 { "thread" } else if flags & 0x100 != 0 { "vfork" } else { "process" };
            let t = ns - *t0.get_or_insert(ns);
            body.push_str(&format!("{t} {pid} fork {child} {kind}\n"));
            continue;
        }
        if !tracked.contains(&pid) {
            continue;
        }
        // The command's process between fork and exec is still the recorder's code.
        if pid == root && execs == 0 && event != "sched_process_exec" {
            continue;
        }
        let t = ns - *t0.get_or_insert(ns);
        match event {
            "page_fault_user" => {
                let (Some(a), Some(e)) = (field(payload, "address"), field(payload, "error_code")) else { continue };
                faults += 1;
                body.push_str(&format!("{t} {pid} fault {a} {e}\n"));
            }
            "sched_process_exec" => {
                execs += 1;
                let path = field(payload, "filename").unwrap_or("?");
                body.push_str(&format!("{t} {pid} exec {path}\n"));
                if let Some(maps) = snapshots.get(&(pid, execs)) {
                    snaps += 1;
                    for m in maps.lines() {
                        let f: Vec<&str> = m.split_whitespace().collect();
                        if f.len() >= 5 {
                            let path = f.get(5..).map(|p| p.join(" ")).unwrap_or_default();
                            body.push_str(&format!("{t} {pid} map {} {} {} {path}\n", f[0], f[1], f[2]).trim_end().to_string());
                            body.push('\n');
                        }
                    }
                }
            }
            "sched_process_exit" => body.push_str(&format!("{t} {pid} exit\n")),
            e if e.starts_with("sys_") => {
                // "sys_mmap(addr: 0, len: 0x2000, ...)" or "sys_mmap -> 0x7f..."
                let text = if payload.is_empty() { e } else { payload };
                let _ = text;
                let (name, rest) = if let Some(i) = l.rfind(": sys_") { l[i + 2..].split_at(l[i + 2..].find(['(', ' ']).unwrap_or(l.len() - i - 2)) } else { continue };
                let name = name.trim_start_matches("sys_").to_string();
                if let Some(args) = rest.strip_prefix('(') {
                    let vals: Vec<u64> = args.trim_end_matches(')').split(", ").filter_map(|kv| kv.split_once(": ").and_then(|(_, v)| hex(v))).collect();
                    pending.insert(pid, (t, name, vals));
                } else if let Some(r) = rest.trim().strip_prefix("-> ") {
                    let Some((te, n, vals)) = pending.remove(&pid) else { continue };
                    if n != name {
                        continue;
                    }
                    let r = hex(r).unwrap_or(0);
                    let a = |k: usize| vals.get(k).copied().unwrap_or(0);
                    syscalls += 1;
                    let line = match name.as_str() {
                        "mmap" => format!("mmap {:#x} {:#x} {:#x} {:#x} {:#x} {:#x} = {r:#x}", a(0), a(1), a(2), a(3), a(4) as u32, a(5)),
                        "munmap" => format!("munmap {:#x} {:#x} = {r:#x}", a(0), a(1)),
                        "mprotect" => format!("mprotect {:#x} {:#x} {:#x} = {r:#x}", a(0), a(1), a(2)),
                        "brk" => format!("brk {:#x} = {r:#x}", a(0)),
                        "madvise" => format!("madvise {:#x} {:#x} {:#x} = {r:#x}", a(0), a(1), a(2)),
                        _ => continue,
                    };
                    body.push_str(&format!("{te} {pid} {line}\n"));
                }
            }
            _ => {}
        }
    }
    out.push_str(&format!("# mmsim-trace {FORMAT_VERSION}\n# command: {command}\n"));
    let summary = format!("tasks {tasks}, execs {execs} ({snaps} with a maps snapshot), faults {faults}, syscalls {syscalls}, lost-event markers {lost}");
    out.push_str(&format!("# {summary}\n"));
    out.push_str(&body);
    (out, summary)
}

fn write_tracefs(path: &str, v: &str) -> Result<(), String> {
    std::fs::write(path, v).map_err(|e| format!("{path}: {e}"))
}

/// Stop tracing in an instance and remove it.
fn remove_instance(inst: &str) {
    let _ = write_tracefs(&format!("{inst}/tracing_on"), "0");
    let _ = write_tracefs(&format!("{inst}/set_event_pid"), "");
    let _ = write_tracefs(&format!("{inst}/events/enable"), "0");
    let _ = std::fs::remove_dir(inst);
}

/// Remove the `mmsim-PID` instances of recorders that no longer run (killed with SIGKILL, which
/// no handler can catch), so that none stays behind tracing into its buffer.
fn remove_stale_instances() {
    let Ok(dir) = std::fs::read_dir(format!("{TRACEFS}/instances")) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("mmsim-").and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!("mmsim trace record: removing {TRACEFS}/instances/{name}, left by a recorder that was killed");
            remove_instance(&format!("{TRACEFS}/instances/{name}"));
        }
    }
}

/// `mmsim trace record [--out F] -- CMD ARGS`.
pub fn record_cli(out: Option<PathBuf>, cmd: Vec<String>) -> ExitCode {
    match record(out, &cmd) {
        Ok((path, summary)) if crate::interrupt::requested() => {
            eprintln!("mmsim trace record: stopped by a signal; wrote what was traced so far to {} ({summary})", path.display());
            ExitCode::from(crate::interrupt::EXIT_INTERRUPTED)
        }
        Ok((path, summary)) => {
            eprintln!("mmsim trace record: wrote {} ({summary})", path.display());
            ExitCode::SUCCESS
        }
        Err((code, msg)) => {
            eprintln!("mmsim trace record: {msg}");
            ExitCode::from(code)
        }
    }
}

fn record(out: Option<PathBuf>, cmd: &[String]) -> Result<(PathBuf, String), (u8, String)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    if !cfg!(target_os = "linux") {
        return Err((5, "recording needs Linux with tracefs".into()));
    }
    let host = |m: String| (5u8, m);
    if !Path::new(TRACEFS).join("events").exists() {
        let ok = std::process::Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]).status().map(|s| s.success()).unwrap_or(false);
        if !ok || !Path::new(TRACEFS).join("events").exists() {
            return Err(host(format!("tracefs is not mounted at {TRACEFS} and mounting it failed (are you root?)")));
        }
    }
    remove_stale_instances();
    let inst = format!("{TRACEFS}/instances/mmsim-{}", std::process::id());
    std::fs::create_dir(&inst).map_err(|e| host(format!("{inst}: {e} (are you root?)")))?;
    // A second SIGINT/SIGTERM exits at once (src/interrupt.rs): remove the instance first.
    let forced = inst.clone();
    crate::interrupt::on_forced_exit(Some(Box::new(move || remove_instance(&forced))));
    let cleanup = |inst: &str| {
        remove_instance(inst);
        crate::interrupt::on_forced_exit(None);
    };
    let setup = || -> Result<(), String> {
        write_tracefs(&format!("{inst}/buffer_size_kb"), "32768")?;
        for e in EVENTS {
            write_tracefs(&format!("{inst}/events/{e}/enable"), "1")?;
        }
        write_tracefs(&format!("{inst}/options/event-fork"), "1")?;
        write_tracefs(&format!("{inst}/set_event_pid"), &std::process::id().to_string())?;
        Ok(())
    };
    if let Err(e) = setup() {
        cleanup(&inst);
        return Err(host(e));
    }
    let pipe = std::fs::OpenOptions::new().read(true).custom_flags(0o4000 /* O_NONBLOCK */).open(format!("{inst}/trace_pipe"));
    let mut pipe = match pipe {
        Ok(p) => p,
        Err(e) => {
            cleanup(&inst);
            return Err(host(format!("trace_pipe: {e}")));
        }
    };
    // rmdir of an instance fails (EBUSY) while its trace_pipe is open: a forced exit closes the
    // reader's descriptor first.
    {
        use std::os::fd::AsRawFd;
        let (forced, fd) = (inst.clone(), pipe.as_raw_fd());
        crate::interrupt::on_forced_exit(Some(Box::new(move || {
            // SAFETY: the process exits right after this; the reader thread's next read fails.
            unsafe {
                libc::close(fd);
            }
            remove_instance(&forced)
        })));
    }
    let done = Arc::new(AtomicBool::new(false));
    let child_pid = Arc::new(AtomicU32::new(0));
    let (d2, c2) = (done.clone(), child_pid.clone());
    // The reader drains trace_pipe while the command runs and reads /proc/PID/maps at once after
    // each exec (best effort: a process that has already exited leaves no snapshot).
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut snaps: BTreeMap<(u32, u64), String> = BTreeMap::new();
        let mut execs = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        let mut partial = String::new();
        loop {
            match pipe.read(&mut buf) {
                Ok(n) if n > 0 => {
                    partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                    while let Some(i) = partial.find('\n') {
                        let l: String = partial.drain(..=i).collect();
                        let l = l.trim_end().to_string();
                        if let Some((pid, _, "sched_process_exec", _)) = parse_ftrace_line(&l) {
                            execs += 1;
                            if let Ok(m) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                                snaps.insert((pid, execs), m);
                            }
                        }
                        lines.push(l);
                    }
                }
                _ => {
                    if d2.load(Ordering::Acquire) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
        }
        let _ = c2;
        (lines, snaps)
    });
    if let Err(e) = write_tracefs(&format!("{inst}/tracing_on"), "1") {
        done.store(true, Ordering::Release);
        let _ = reader.join();
        cleanup(&inst);
        return Err(host(e));
    }
    let status = std::process::Command::new(&cmd[0]).args(&cmd[1..]).spawn();
    let (root, status) = match status {
        Ok(mut c) => {
            let id = c.id();
            child_pid.store(id, Ordering::Release);
            // Wait, but pass a SIGTERM on to the command when mmsim is asked to stop (a Ctrl-C
            // from the terminal reaches the command's process group itself), then trace on
            // until it exits so the trace covers what it did.
            let mut forwarded = false;
            let status = loop {
                match c.try_wait() {
                    Ok(Some(s)) => break Ok(s),
                    Ok(None) => {}
                    Err(e) => break Err(e),
                }
                if crate::interrupt::requested() && !forwarded {
                    forwarded = true;
                    // SAFETY: kill(2) on our own child's pid, which try_wait has not reaped.
                    unsafe {
                        libc::kill(id as libc::pid_t, libc::SIGTERM);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            };
            (id, status)
        }
        Err(e) => {
            done.store(true, Ordering::Release);
            let _ = reader.join();
            cleanup(&inst);
            return Err((2, format!("{}: {e}", cmd[0])));
        }
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let _ = write_tracefs(&format!("{inst}/tracing_on"), "0");
    std::thread::sleep(std::time::Duration::from_millis(20));
    done.store(true, Ordering::Release);
    let (lines, snaps) = reader.join().map_err(|_| (1u8, "the trace reader failed".to_string()))?;
    cleanup(&inst);
    if let Ok(s) = &status {
        if !s.success() {
            eprintln!("mmsim trace record: note: the command exited with {s}");
        }
    }
    // The reader numbered execs across all pids; convert() numbers them the same way only for
    // traced pids, so renumber the snapshots by order of traced execs.
    let mut traced_snaps = BTreeMap::new();
    {
        let mut tracked: std::collections::BTreeSet<u32> = [root].into_iter().collect();
        let (mut all, mut traced) = (0u64, 0u64);
        for l in &lines {
            let Some((pid, _, ev, payload)) = parse_ftrace_line(l) else { continue };
            if ev == "task_newtask" && tracked.contains(&pid) {
                if let Some(c) = field(payload, "pid").and_then(|p| p.parse().ok()) {
                    tracked.insert(c);
                }
            }
            if ev == "sched_process_exec" {
                all += 1;
                if tracked.contains(&pid) {
                    traced += 1;
                    if let Some(m) = snaps.get(&(pid, all)) {
                        traced_snaps.insert((pid, traced), m.clone());
                    }
                }
            }
        }
    }
    let command = cmd.iter().map(|a| if a.contains(' ') { format!("'{a}'") } else { a.clone() }).collect::<Vec<_>>().join(" ");
    let (text, summary) = convert(&command, root, &lines, &traced_snaps);
    let path = out.unwrap_or_else(|| PathBuf::from(format!("{}.trace", Path::new(&cmd[0]).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "cmd".into()))));
    let osrelease = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let text = text.replacen("\n# tasks", &format!("\n# recorded by: mmsim {} trace record on Linux {}\n# tasks", env!("CARGO_PKG_VERSION"), osrelease.trim()), 1);
    crate::output::write_atomic(&path, text.as_bytes()).map_err(|e| (1u8, format!("{}: {e}", path.display())))?;
    Ok((path, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftrace_lines_parse() {
        let l = "            true-25067   [001] .....  3138.440427: sys_mmap(addr: 0x7f6421e32000, len: 0x156000, prot: 5, flags: 0x812, fd: 3, off: 0x26000)";
        let (pid, ns, ev, _) = parse_ftrace_line(l).unwrap();
        assert_eq!((pid, ns, ev), (25067, 3_138_440_427_000, "sys_mmap(addr"));
        let l = "   bash-25062   [000] d....  3138.439175: page_fault_user: address=0x55c76e623c58 ip=0x7f243ced85be error_code=0x7";
        let (pid, _, ev, p) = parse_ftrace_line(l).unwrap();
        assert_eq!((pid, ev, field(p, "error_code")), (25062, "page_fault_user", Some("0x7")));
    }

    #[test]
    fn convert_pairs_syscalls_and_follows_children() {
        let lines: Vec<String> = [
            "  x-10 [000] ..... 0.900000: page_fault_user: address=0x1000 ip=0x1 error_code=0x4",
            "  x-10 [000] ..... 1.000000: sched_process_exec: filename=/bin/x pid=10 old_pid=10",
            "  x-10 [000] ..... 1.000001: sys_mmap(addr: 0, len: 0x2000, prot: 3, flags: 0x22, fd: 0xffffffff, off: 0)",
            "  x-10 [000] ..... 1.000002: sys_mmap -> 0x7f0000000000",
            "  x-10 [000] ..... 1.000003: page_fault_user: address=0x7f0000000010 ip=0x401000 error_code=0x6",
            "  x-10 [000] ..... 1.000004: task_newtask: pid=11 comm=x clone_flags=3d0f00 oom_score_adj=0",
            "  y-99 [000] ..... 1.000005: page_fault_user: address=0x1000 ip=0x1 error_code=0x4",
            "  x-11 [001] ..... 1.000006: sched_process_exit: comm=x pid=11 prio=120 group_dead=0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (text, _) = convert("x", 10, &lines, &BTreeMap::new());
        let tr = parse("t", &text).unwrap();
        assert_eq!(tr.root, 10);
        let ev = &tr.tasks[&10];
        assert!(matches!(ev[1], Ev::Mmap { len: 0x2000, ret: 0x7f00_0000_0000, .. }), "{ev:?}");
        assert!(matches!(ev[3], Ev::Fork { child: 11, kind: ForkKind::Thread }));
        assert_eq!(tr.tasks[&11], vec![Ev::Exit]);
        assert!(!text.contains(" 99 "), "untraced pids are dropped");
    }

    #[test]
    fn malformed_traces_name_the_line() {
        let e = parse("t.trace", "hello\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:1: workload.trace.file:"), "{e}");
        let e = parse("t.trace", "# mmsim-trace 1\n0 1 fault 0x1000 0x4\n5 1 mmap 0 0x1000 zz\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:3: workload.trace.file: mmap: argument 3"), "{e}");
        let e = parse("t.trace", "# mmsim-trace 1\n0 1 teleport\n").unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("unknown event 'teleport'"), "{e}");
        let e = parse("t.trace", "# mmsim-trace 1\n0 1 map 1000-2000 r-xp 0\n").unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("no exec"), "{e}");
    }
}
