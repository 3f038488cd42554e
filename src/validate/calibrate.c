/*
 * calibrate: microbenchmarks for the cost knobs of mmsim's model, run by `mmsim calibrate`.
 *
 * Usage: calibrate [FILEDIR [PCDIR]]  (FILEDIR: directory on a disk file system for the block-I/O
 *                                 and msync tests; default /var/tmp; skipped if it is tmpfs or
 *                                 O_DIRECT fails. PCDIR: directory for the page-cache loop, on a
 *                                 file system with 4 KiB page-cache folios; default FILEDIR)
 * Output: one `name=value` line per measurement (ns, or bytes/ns), then `tlb_ipis=N` (shootdowns
 * counted on the TLB: line during the IPI test) and `block=skipped:REASON` when there is no disk.
 * Every figure is the minimum over REPS repeats of a loop (noise from other tasks, interrupts
 * and steal time only adds time). The process pins itself to CPU 0; the IPI and lock tests use
 * a second thread pinned to CPU 1. What each figure means for the model is in
 * src/validate/calibrate.rs, which derives the knobs.
 *
 * C11 + POSIX/Linux; build: cc -O2 -pthread calibrate.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPS 9
#define PG 4096UL

static void die(const char *what)
{
    fprintf(stderr, "calibrate: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof(s), &s) != 0)
        die("sched_setaffinity");
}

static double min_d(double a, double b) { return a < b ? a : b; }

static uint64_t tlb_total(void)
{
    static char buf[1 << 20];
    int fd = open("/proc/interrupts", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n, len = 0;
    while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += n;
    close(fd);
    buf[len] = 0;
    char *p = strstr(buf, "TLB:");
    if (!p)
        return 0;
    p += 4;
    uint64_t t = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p < '0' || *p > '9')
            break;
        char *e;
        t += strtoull(p, &e, 10);
        p = e;
    }
    return t;
}

/* ---- syscall: getppid, a system call that does nothing (lmbench lat_syscall null) */
static double bench_syscall(void)
{
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        const int n = 200000;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++)
            syscall(SYS_getppid);
        best = min_d(best, (double)(now_ns() - t0) / n);
    }
    return best;
}

/* ---- clear and copy of 4 KiB pages in a buffer larger than the LLC (as a fresh page is) */
#define BUF (128UL << 20)
static double bench_clear(char *a)
{
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now_ns();
        for (size_t o = 0; o < BUF; o += PG)
            memset(a + o, r, PG);
        __asm__ volatile("" ::: "memory");
        best = min_d(best, (double)(now_ns() - t0) / (BUF / PG));
    }
    return best; /* ns per 4 KiB */
}

static double bench_copy(char *a, char *b)
{
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now_ns();
        for (size_t o = 0; o < BUF; o += PG)
            memcpy(b + o, a + o, PG);
        __asm__ volatile("" ::: "memory");
        best = min_d(best, (double)(now_ns() - t0) / (BUF / PG));
    }
    return best;
}

/* ---- anon faults: write-touch fresh pages (fault + alloc + clear), then mprotect and munmap
 * of the populated region (per-PTE work), all per page */
#define FPAGES 8192UL
static void bench_fault(double *fault, double *mprot, double *unmap)
{
    *fault = *mprot = *unmap = 1e18;
    for (int r = 0; r < REPS; r++) {
        char *p = mmap(NULL, FPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            die("mmap");
        madvise(p, FPAGES * PG, MADV_NOHUGEPAGE);
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < FPAGES; i++)
            ((volatile char *)p)[i * PG] = 1;
        uint64_t t1 = now_ns();
        if (mprotect(p, FPAGES * PG, PROT_READ) != 0)
            die("mprotect");
        uint64_t t2 = now_ns();
        if (munmap(p, FPAGES * PG) != 0)
            die("munmap");
        uint64_t t3 = now_ns();
        *fault = min_d(*fault, (double)(t1 - t0) / FPAGES);
        *mprot = min_d(*mprot, (double)(t2 - t1) / FPAGES);
        *unmap = min_d(*unmap, (double)(t3 - t2) / FPAGES);
    }
}

/* ---- VMA work: mmap + munmap of one untouched page (no page tables are touched) */
static double bench_mmap_pair(void)
{
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        const int n = 20000;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++) {
            void *p = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                die("mmap");
            munmap(p, PG);
        }
        best = min_d(best, (double)(now_ns() - t0) / n);
    }
    return best;
}

/* npages read-write anonymous pages between two PROT_NONE guard pages (as hostbench's
 * reserve_place()), so that no mprotect or madvise of them splits or merges a VMA; *guard is the
 * whole mapping, to munmap. */
static char *map_guarded(size_t npages, char **guard)
{
    char *g = mmap(NULL, (npages + 2) * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        die("mmap");
    char *p = mmap(g + PG, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    *guard = g;
    return p;
}

/* ---- mprotect of N populated pages, RO then RW, no sibling: per call. The pages sit between
 * two PROT_NONE guard pages, as hostbench's mapping does (reserve_place), so that no call splits
 * or merges a VMA: placed by mmap(NULL) next to another anonymous read-write VMA, every
 * mprotect(RO) split it off and every mprotect(RW) merged it back, and a call measured ~2x the
 * hostbench loop's. N = 1 gives the call's fixed cost; N = 32 (under
 * tlb_single_page_flush_ceiling, 33) adds 31 PTE updates and 31 single-page flushes (INVLPG). */
static double bench_mprotect_call(int npages)
{
    char *g;
    char *p = map_guarded(npages, &g);
    for (int i = 0; i < npages; i++)
        p[i * PG] = 1;
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        const int n = npages > 32 ? 400 : 20000;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++) {
            mprotect(p, npages * PG, PROT_READ);
            mprotect(p, npages * PG, PROT_READ | PROT_WRITE);
        }
        best = min_d(best, (double)(now_ns() - t0) / (2.0 * n));
    }
    munmap(g, (npages + 2) * PG);
    return best;
}

/* ---- The warm regime: mmap + write-touch + munmap of WPAGES fresh anonymous pages, over and
 * over at one 2 MiB-aligned address with nothing else in its 2 MiB block (as hostbench's
 * reserve_place(), so munmap frees the PTE table as the model's does). The pages come back from
 * the CPU's pcp list still in its caches (2 MiB of data), as in validate's loops of 1 to 1,024
 * pages. bench_fault() above measures the same work on 8,192 pages per mmap (32 MiB: the cold
 * regime), where this host spends 1.2-1.3x per fault (docs/host-findings.md §8.7). Per page,
 * after WARM_ITERS iterations, over WITERS: the write-touch, and mmap + munmap together. The
 * region is exactly one aligned PMD: main() turns THP off for the process (PR_SET_THP_DISABLE),
 * so a host with THP "always" faults 4 KiB pages here too. */
#define WPAGES 512UL
#define WITERS 200
#define WARM_ITERS 5
static char *reserve_2m(size_t len)
{
    size_t span = len + (4UL << 20);
    char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        die("mmap(reserve)");
    char *a = (char *)((((uintptr_t)r) + (2UL << 20) - 1) & ~((uintptr_t)(2UL << 20) - 1));
    munmap(r, span);
    return a;
}

/* `getppid_before`: a getppid() before each write-touch, timed with it (the fault-after-syscall
 * loop below). */
static void fault_warm_loop(double *fault, double *unmap, int getppid_before)
{
    char *at = reserve_2m(WPAGES * PG);
    *fault = *unmap = 1e18;
    for (int r = 0; r < REPS; r++) {
        uint64_t tf = 0, tu = 0;
        for (int i = 0; i < WARM_ITERS + WITERS; i++) {
            uint64_t t0 = now_ns();
            char *p = mmap(at, WPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p != at)
                die("mmap(MAP_FIXED_NOREPLACE)");
            uint64_t t1 = now_ns();
            for (size_t k = 0; k < WPAGES; k++) {
                if (getppid_before)
                    syscall(SYS_getppid);
                ((volatile char *)p)[k * PG] = 1;
            }
            uint64_t t2 = now_ns();
            if (munmap(p, WPAGES * PG) != 0)
                die("munmap");
            uint64_t t3 = now_ns();
            if (i >= WARM_ITERS) {
                tf += t2 - t1;
                tu += (t1 - t0) + (t3 - t2);
            }
        }
        *fault = min_d(*fault, (double)tf / (WITERS * WPAGES));
        *unmap = min_d(*unmap, (double)tu / (WITERS * WPAGES));
    }
}

static void bench_fault_warm(double *fault, double *unmap)
{
    fault_warm_loop(fault, unmap, 0);
}

/* ---- bench_fault_warm()'s write-touches with a getppid() before each: per page, the touch
 * and the call together. On this host a page fault right after a system call costs ~400 ns
 * more than one right after another fault, whatever the call (getppid, sched_yield, madvise),
 * while a system call costs the same after a fault as after another call
 * (docs/host-findings.md §8.9). calibrate.rs takes this less fault_touch_warm and less syscall
 * as cost.fault_after_syscall_ns. */
static double bench_fault_after_syscall(void)
{
    double fault, unmap;
    fault_warm_loop(&fault, &unmap, 1);
    return fault;
}

/* ---- madvise(MADV_DONTNEED) of one untouched page between guard pages, per call: the call's
 * fixed work (madvise_lock(), the VMA walk, the mmu_gather's set-up and finish) with no page
 * table under it to zap. */
static double bench_madvise_call(void)
{
    char *g;
    char *p = map_guarded(1, &g);
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        const int n = 20000;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++)
            if (madvise(p, PG, MADV_DONTNEED) != 0)
                die("madvise(MADV_DONTNEED)");
        best = min_d(best, (double)(now_ns() - t0) / n);
    }
    munmap(g, 3 * PG);
    return best;
}

/* ---- IPI round trip: mprotect(RO)+mprotect(RW)+write of one page between guard pages (as
 * hostbench maps it: no VMA split or merge), with a thread of the same mm spinning on CPU 1
 * (flush IPIs, counted on the TLB: line) minus the same with a *separate process* spinning on
 * CPU 1 (same competition for the core, e.g. an SMT sibling, and no IPI: CPU 1 is not in our
 * mm_cpumask), per iteration. Each repeat starts a fresh spinner and runs IPI_ITERS iterations
 * (≈40 ms), as long as one of validate's cases: on this project's KVM/PVM host a sibling that
 * has received flush IPIs for ~0.4 s switches to a regime in which they cost a quarter as much
 * and a third of them are not sent (docs/host-findings.md §8.3), which no validate case lasts
 * long enough to reach. */
#define IPI_ITERS 2000
static void try_rt(void)
{
    struct sched_param sp = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &sp);
}

static atomic_int stop, ready;
static void *spinner(void *arg)
{
    (void)arg;
    pin(1);
    try_rt();
    atomic_store(&ready, 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        ;
    return NULL;
}

/* A thread of the same mm that ran on CPU 1 and sleeps there (blocked on a pipe): CPU 1 idles
 * in lazy TLB mode with the mm still in its mm_cpumask. */
static int sleeper_pipe[2];
static void *sleeper(void *arg)
{
    (void)arg;
    pin(1);
    atomic_store(&ready, 1);
    char c;
    if (read(sleeper_pipe[0], &c, 1) != 1)
        die("read(sleeper pipe)");
    return NULL;
}

static double mprotect_loop(char *p, int n)
{
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        mprotect(p, PG, PROT_READ);
        mprotect(p, PG, PROT_READ | PROT_WRITE);
        ((volatile char *)p)[0] = (char)i;
    }
    return (double)(now_ns() - t0) / n;
}

static void bench_ipi(double *alone, double *with, uint64_t *ipis, int *iters)
{
    char *g;
    char *p = map_guarded(1, &g);
    p[0] = 1;
    *alone = *with = 1e18;
    *ipis = 0;
    for (int r = 0; r < REPS; r++) {
        pid_t child = fork();
        if (child < 0)
            die("fork");
        if (child == 0) {
            pin(1);
            try_rt();
            for (;;)
                ;
        }
        usleep(20000);
        *alone = min_d(*alone, mprotect_loop(p, IPI_ITERS));
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    for (int r = 0; r < REPS; r++) {
        pthread_t t;
        atomic_store(&stop, 0);
        atomic_store(&ready, 0);
        if (pthread_create(&t, NULL, spinner, NULL) != 0)
            die("pthread_create");
        while (!atomic_load(&ready))
            ;
        uint64_t tlb0 = tlb_total();
        *with = min_d(*with, mprotect_loop(p, IPI_ITERS));
        *ipis += tlb_total() - tlb0;
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
    }
    *iters = REPS * IPI_ITERS;
    munmap(g, 3 * PG);
}

/* ---- bench_ipi()'s loop in a fresh process (its mm_cpumask holds CPU 0 alone, as 6.14+ clears
 * a CPU from it only lazily), CPU 1 idle: alone, or with a thread of the mm asleep on CPU 1. With
 * the sleeper, every flush goes through native_flush_tlb_multi() and
 * smp_call_function_many_cond(), where should_flush_tlb() skips the lazy CPU 1: no IPI, but the
 * trip costs the initiator (cpumask work, reading CPU 1's per-CPU TLB state). Per iteration
 * (two flushes: both mprotects change _PAGE_RW), the best of 3 loops in each of 3 fresh
 * children. */
static double lazy_child(int with_sleeper)
{
    int fds[2];
    if (pipe(fds) != 0)
        die("pipe");
    pid_t c = fork();
    if (c < 0)
        die("fork");
    if (c == 0) {
        close(fds[0]);
        char *g;
        char *p = map_guarded(1, &g);
        p[0] = 1;
        pthread_t t;
        if (with_sleeper) {
            atomic_store(&ready, 0);
            if (pipe(sleeper_pipe) != 0)
                die("pipe");
            if (pthread_create(&t, NULL, sleeper, NULL) != 0)
                die("pthread_create");
            while (!atomic_load(&ready))
                ;
        }
        usleep(20000);
        double best = 1e18;
        for (int r = 0; r < 3; r++)
            best = min_d(best, mprotect_loop(p, IPI_ITERS));
        if (with_sleeper) {
            if (write(sleeper_pipe[1], "x", 1) != 1)
                die("write(sleeper pipe)");
            pthread_join(t, NULL);
        }
        if (write(fds[1], &best, sizeof(best)) != (ssize_t)sizeof(best))
            die("write(result pipe)");
        _exit(0);
    }
    close(fds[1]);
    double v = 1e18;
    if (read(fds[0], &v, sizeof(v)) != (ssize_t)sizeof(v))
        die("read(result pipe)");
    close(fds[0]);
    waitpid(c, NULL, 0);
    return v;
}

static void bench_lazy_sibling(double *none, double *asleep)
{
    *none = *asleep = 1e18;
    for (int r = 0; r < 3; r++) {
        *none = min_d(*none, lazy_child(0));
        *asleep = min_d(*asleep, lazy_child(1));
    }
}

/* ---- lock hand-off: a cache line (a ticket-free test-and-set spinlock) passed between CPU 0
 * and CPU 1 in turn; ns per hand-off */
static atomic_int turn;
static void *pong(void *arg)
{
    int n = *(int *)arg;
    pin(1);
    for (int i = 0; i < n; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 1)
            ;
        atomic_store_explicit(&turn, 0, memory_order_release);
    }
    return NULL;
}

static double bench_handoff(void)
{
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        int n = 200000;
        atomic_store(&turn, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, pong, &n) != 0)
            die("pthread_create");
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++) {
            atomic_store_explicit(&turn, 1, memory_order_release);
            while (atomic_load_explicit(&turn, memory_order_acquire) != 0)
                ;
        }
        uint64_t t1 = now_ns();
        pthread_join(t, NULL);
        best = min_d(best, (double)(t1 - t0) / (2.0 * n));
    }
    return best;
}

/* ---- fork of a small process: the parent's time in fork() (dup_mm with few PTEs), and from
 * fork's return to waitpid's (the child, on the parent's CPU, runs exit_group once the parent
 * blocks in waitpid).
 * Now and then (about 1 fork in 250 here) the parent is preempted on its way back from fork()
 * and the child runs and exits before the parent reads its clock: that fork() then took the
 * child's whole exit, and its waitpid() only reaps a zombie (3-4 us against 36 us). A minimum
 * over the repeats picked that up as the exit cost whenever one of the 180 forks did it (a
 * calibration of 2026-11-29 wrote exit_ns = 4276 where the others gave 37,000-42,000). So a
 * fork whose child has already exited when the parent looks (waitid WNOHANG|WNOWAIT) counts for
 * neither figure. */
static double bench_fork(double *exit_wait)
{
    double best = 1e18;
    *exit_wait = 1e18;
    for (int r = 0; r < REPS * 20; r++) {
        uint64_t t0 = now_ns();
        pid_t pid = (pid_t)syscall(SYS_fork);
        if (pid == 0)
            syscall(SYS_exit_group, 0);
        uint64_t t1 = now_ns();
        if (pid < 0)
            die("fork");
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
            die("waitid");
        int exited = si.si_pid != 0;
        uint64_t t1b = now_ns();
        int st;
        waitpid(pid, &st, 0);
        uint64_t t2 = now_ns();
        if (exited)
            continue;
        best = min_d(best, (double)(t1 - t0));
        *exit_wait = min_d(*exit_wait, (double)(t2 - t1b));
    }
    return best;
}

/* ---- block I/O: O_DIRECT 4 KiB reads at random offsets of a 64 MiB file, and O_DIRECT|O_DSYNC
 * 4 KiB writes */
/* A new file under dir, on a disk file system (its name in path). Otherwise prints
 * "KEY=skipped:why" and returns -1. */
static int scratch_file(const char *dir, const char *key, char *path, size_t len)
{
    struct statfs sfs;
    if (statfs(dir, &sfs) != 0 || sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC) {
        printf("%s=skipped:%s-is-not-on-a-disk\n", key, dir);
        return -1;
    }
    snprintf(path, len, "%s/mmsim-calibrate-%s.XXXXXX", dir, key);
    int fd = mkstemp(path);
    if (fd < 0)
        printf("%s=skipped:cannot-create-a-file-in-%s\n", key, dir);
    return fd;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of REPS values (sorted in place). */
static double median(double *v)
{
    qsort(v, REPS, sizeof(double), cmp_d);
    return v[REPS / 2];
}

/* An unlinked scratch file of `bytes` under dir (on a disk), or -1 (the skip printed). */
static int sized_scratch(const char *dir, const char *key, size_t bytes)
{
    char path[4096];
    int fd = scratch_file(dir, key, path, sizeof(path));
    if (fd < 0)
        return -1;
    unlink(path);
    if (ftruncate(fd, (off_t)bytes) != 0)
        die("ftruncate");
    return fd;
}

static void bench_block(const char *dir)
{
    char path[4096];
    int fd = scratch_file(dir, "block", path, sizeof(path));
    if (fd < 0)
        return;
    const size_t fsz = 64UL << 20;
    char *buf;
    if (posix_memalign((void **)&buf, PG, 1 << 20) != 0)
        die("posix_memalign");
    memset(buf, 0x5a, 1 << 20);
    for (size_t o = 0; o < fsz; o += 1 << 20)
        if (pwrite(fd, buf, 1 << 20, (off_t)o) != 1 << 20)
            die("pwrite");
    fsync(fd);
    close(fd);
    int dfd = open(path, O_RDWR | O_DIRECT);
    if (dfd < 0) {
        unlink(path);
        printf("block=skipped:no-O_DIRECT-on-%s\n", dir);
        return;
    }
    /* Device times are the median of the repeats, not the minimum as for CPU work: a device's
     * latency has a spread of its own (a virtio disk on shared storage moved the minimum
     * 1.3-2.6 B/ns between calibrations minutes apart), and the model's device should take
     * what a typical I/O takes, not the luckiest. */
    double rds[REPS], wrs[REPS], rd1ms[REPS], wr1ms[REPS];
    uint64_t x = 88172645463325252ull;
    for (int r = 0; r < REPS; r++) {
        const int n = 200;
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (pread(dfd, buf, PG, (off_t)((x % (fsz / PG)) * PG)) != (ssize_t)PG)
                die("pread(O_DIRECT)");
        }
        rds[r] = (double)(now_ns() - t0) / n;
        t0 = now_ns();
        for (int i = 0; i < n / 4; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (pwrite(dfd, buf, PG, (off_t)((x % (fsz / PG)) * PG)) != (ssize_t)PG)
                die("pwrite(O_DIRECT)");
            fdatasync(dfd);
        }
        wrs[r] = (double)(now_ns() - t0) / (n / 4);
    }
    /* Bandwidth: 1 MiB O_DIRECT reads through the file in order (one readahead window's worth
     * of this host's largest I/O size class), per read. */
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now_ns();
        for (size_t o = 0; o < fsz; o += 1 << 20)
            if (pread(dfd, buf, 1 << 20, (off_t)o) != 1 << 20)
                die("pread(O_DIRECT, 1 MiB)");
        rd1ms[r] = (double)(now_ns() - t0) / (double)(fsz >> 20);
    }
    /* The same for writes: 1 MiB O_DIRECT writes through the file in order, each followed by
     * fdatasync as the 4 KiB ones are, per write. */
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now_ns();
        for (size_t o = 0; o < fsz; o += 1 << 20) {
            if (pwrite(dfd, buf, 1 << 20, (off_t)o) != 1 << 20)
                die("pwrite(O_DIRECT, 1 MiB)");
            fdatasync(dfd);
        }
        wr1ms[r] = (double)(now_ns() - t0) / (double)(fsz >> 20);
    }
    close(dfd);
    unlink(path);
    printf("block_read_4k=%.1f\nblock_write_4k=%.1f\nblock_read_1m=%.1f\nblock_write_1m=%.1f\n", median(rds), median(wrs), median(rd1ms), median(wr1ms));
}

/* ---- the device through the page cache: how long a task sleeps for a read of evicted pages
 * and for the write-back of dirty ones, through the kernel paths the model's reads (readahead,
 * a page read alone) and writes (msync, writeback) stand for, rather than O_DIRECT's
 * (bench_block). The sleep is the wall time of the call less the thread's CPU time in it (its
 * page allocation, page-cache insertion and bio set-up, which the model charges as CPU work of
 * their own). Each figure is the median of REPS repeats, per call:
 *   bread_4k_wait   pread() of one page at a random offset of a BB_PAGES-page file opened with
 *                   POSIX_FADV_RANDOM (no readahead), after POSIX_FADV_DONTNEED of the file;
 *   bread_all_wait  pread() of the whole file from its start, evicted (readahead reads it);
 *   bwrite_4k_wait  fdatasync() after a pwrite() of one page;
 *   bwrite_all_wait fdatasync() after a pwrite() of the whole file.
 * The file is in dir, as validate's hostbench data file is (on 6.x ext4 its readahead uses
 * large folios, as validate's cases do; the model's folios are 4 KiB). */
#define BB_PAGES 1024UL
static uint64_t cpu_ns(void);
/* Wall and CPU time of one call, as a sleep: wall - cpu. */
#define SLEPT(call, what)                                                                          \
    ({                                                                                             \
        uint64_t w0_ = now_ns(), c0_ = cpu_ns();                                                   \
        if (!(call))                                                                               \
            die(what);                                                                             \
        uint64_t c1_ = cpu_ns(), w1_ = now_ns();                                                   \
        (double)(w1_ - w0_) - (double)(c1_ - c0_);                                                 \
    })
static void bench_block_buffered(const char *dir)
{
    int fd = sized_scratch(dir, "bb", BB_PAGES * PG);
    if (fd < 0)
        return;
    char *buf;
    if (posix_memalign((void **)&buf, PG, BB_PAGES * PG) != 0)
        die("posix_memalign");
    memset(buf, 0x5a, BB_PAGES * PG);
    if (pwrite(fd, buf, BB_PAGES * PG, 0) != (ssize_t)(BB_PAGES * PG))
        die("pwrite");
    fsync(fd);
    /* A second descriptor of the same file with readahead off, for the single pages. */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    int rfd = open(self, O_RDWR);
    if (rfd < 0)
        die("open(/proc/self/fd)");
    posix_fadvise(rfd, 0, 0, POSIX_FADV_RANDOM);
    double r1[REPS], ra[REPS], w1[REPS], wa[REPS], c1[REPS], ch[REPS];
    uint64_t x = 2463534242ull;
    const int n = 32;
    for (int r = 0; r < REPS; r++) {
        double t = 0, tc = 0, th = 0;
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            off_t o = (off_t)((x % BB_PAGES) * PG);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            /* The read's sleep (wall less CPU), its CPU time, and the CPU time of reading the
             * same page again from the page cache: the difference is the miss's own work, most
             * of it the request's submission (on this VM the virtio doorbell's exit to the
             * hypervisor, `iowrite16` in a profile; docs/host-findings.md §8.9). */
            uint64_t w0 = now_ns(), k0 = cpu_ns();
            if (pread(rfd, buf, PG, o) != (ssize_t)PG)
                die("pread");
            uint64_t k1 = cpu_ns(), w1_ = now_ns();
            if (pread(rfd, buf, PG, o) != (ssize_t)PG)
                die("pread(cached)");
            uint64_t k2 = cpu_ns();
            t += (double)(w1_ - w0) - (double)(k1 - k0);
            tc += (double)(k1 - k0);
            th += (double)(k2 - k1);
        }
        r1[r] = t / n;
        c1[r] = tc / n;
        ch[r] = th / n;
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ra[r] = SLEPT(pread(fd, buf, BB_PAGES * PG, 0) == (ssize_t)(BB_PAGES * PG), "pread(whole file)");
        t = 0;
        for (int i = 0; i < n / 4; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (pwrite(fd, buf, PG, (off_t)((x % BB_PAGES) * PG)) != (ssize_t)PG)
                die("pwrite");
            t += SLEPT(fdatasync(fd) == 0, "fdatasync");
        }
        w1[r] = t / (n / 4);
        if (pwrite(fd, buf, BB_PAGES * PG, 0) != (ssize_t)(BB_PAGES * PG))
            die("pwrite(whole file)");
        wa[r] = SLEPT(fdatasync(fd) == 0, "fdatasync(whole file)");
    }
    close(rfd);
    close(fd);
    free(buf);
    printf("bread_4k_wait=%.1f\nbread_all_wait=%.1f\nbwrite_4k_wait=%.1f\nbwrite_all_wait=%.1f\nbb_pages=%lu\n", median(r1), median(ra), median(w1), median(wa), BB_PAGES);
    printf("bread_4k_cpu=%.1f\nbread_cached_cpu=%.1f\n", median(c1), median(ch));
}

/* ---- page cache: a sparse file's PC_PAGES pages, mapped shared and read-touched (a hole needs
 * no I/O), then paged out with MADV_PAGEOUT; per page, the touch and the pageout separately.
 * The faults read the file by mmap read-around (read_ahead_kb of the file's device: printed,
 * and the model runs the loop with it; POSIX_FADV_RANDOM does not turn mmap read-around off,
 * only MADV_RANDOM would, and it makes every fault a major one that drops mmap_lock and
 * retries) and map it by fault-around. Between iterations, untimed, the file is truncated and
 * re-extended, which deletes the shadow entries the pageout left: every read is a first read,
 * as in a streaming reader, not a workingset_refault(). The model runs the same loop
 * (calibrate.rs), and the differences are its per-folio page-cache costs. Linux 6.x gives
 * ext4 and xfs files large folios, which the model does not have: `mmsim calibrate` runs this
 * loop on a loop-mounted ext4 with data=journal (4 KiB folios) when it can (argv[2]). */
#define PC_PAGES 512
static void bench_pagecache(const char *dir)
{
    int fd = sized_scratch(dir, "pc", PC_PAGES * PG);
    if (fd < 0)
        return;
    struct stat st;
    char bdi[128];
    long ra_kb = -1;
    if (fstat(fd, &st) == 0) {
        snprintf(bdi, sizeof(bdi), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev), minor(st.st_dev));
        FILE *f = fopen(bdi, "r");
        if (f) {
            if (fscanf(f, "%ld", &ra_kb) != 1)
                ra_kb = -1;
            fclose(f);
        }
    }
    volatile char *p = mmap(NULL, PC_PAGES * PG, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap(sparse file)");
    double touch = 1e18, pageout = 1e18, faults = 0;
    char sum = 0;
    for (int r = 0; r < REPS; r++) {
        const int n = 40;
        double t = 0, o = 0;
        for (int k = 0; k < n + 5; k++) {
            struct rusage u0, u1;
            getrusage(RUSAGE_SELF, &u0);
            uint64_t a = now_ns();
            for (int i = 0; i < PC_PAGES; i++)
                sum += p[(size_t)i * PG];
            uint64_t b = now_ns();
            getrusage(RUSAGE_SELF, &u1);
            if (madvise((void *)p, PC_PAGES * PG, MADV_PAGEOUT) != 0) {
                printf("pc=skipped:no-MADV_PAGEOUT\n");
                munmap((void *)p, PC_PAGES * PG);
                close(fd);
                return;
            }
            uint64_t c = now_ns();
            if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)(PC_PAGES * PG)) != 0)
                die("ftruncate(page-cache file)");
            if (k >= 5) {
                t += (double)(b - a), o += (double)(c - b);
                faults += (double)(u1.ru_minflt + u1.ru_majflt - u0.ru_minflt - u0.ru_majflt);
            }
        }
        touch = min_d(touch, t / n / PC_PAGES);
        pageout = min_d(pageout, o / n / PC_PAGES);
    }
    (void)sum;
    munmap((void *)p, PC_PAGES * PG);
    close(fd);
    printf("pc_touch=%.1f\npc_pageout=%.1f\npc_faults_per_page=%.4f\n", touch, pageout, faults / (REPS * 40.0 * PC_PAGES));
    if (ra_kb >= 0)
        printf("pc_read_ahead_kb=%ld\n", ra_kb);
}

/* ---- writeback: a file's MS_PAGES pages mapped shared, written back once, then REPS times:
 * write-touch every page (a write-protect fault each: the filesystem's page_mkwrite and
 * folio_mark_dirty) and msync(MS_SYNC). Per page: the touch, and msync's CPU time on this
 * thread (CLOCK_THREAD_CPUTIME_ID: the writeback submission, folio_mkclean and the rest of the
 * filesystem's writepages; not the device's time, which the block knobs carry). The model runs
 * the same loop (fit.rs) and the differences are its page_mkwrite and writepage costs. */
#define MS_PAGES 8192UL
static uint64_t cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void bench_msync(const char *dir)
{
    int fd = sized_scratch(dir, "ms", MS_PAGES * PG);
    if (fd < 0)
        return;
    char *p = mmap(NULL, MS_PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap(shared file)");
    for (size_t i = 0; i < MS_PAGES; i++)
        p[i * PG] = 1;
    msync(p, MS_PAGES * PG, MS_SYNC);
    double touch = 1e18, sync_cpu = 1e18;
    for (int r = 0; r < REPS; r++) {
        uint64_t a = now_ns();
        for (size_t i = 0; i < MS_PAGES; i++)
            ((volatile char *)p)[i * PG] = (char)r;
        uint64_t b = now_ns(), c0 = cpu_ns();
        if (msync(p, MS_PAGES * PG, MS_SYNC) != 0)
            die("msync");
        uint64_t c1 = cpu_ns();
        touch = min_d(touch, (double)(b - a) / MS_PAGES);
        sync_cpu = min_d(sync_cpu, (double)(c1 - c0) / MS_PAGES);
    }
    munmap(p, MS_PAGES * PG);
    close(fd);
    printf("ms_touch=%.1f\nms_sync_cpu=%.1f\n", touch, sync_cpu);
}

/* ---- mapping page-cache pages: mmap(PROT_READ, MAP_SHARED) of FM_PAGES cached pages of a file
 * at one 2 MiB-aligned address, read-touch (fault-around maps 16 pages a fault), munmap (the zap
 * drops each page's rmap and reference; nothing is freed), over and over: per page. The warm
 * regime, as bench_fault_warm(); the model fits cost.file_rmap_ns to it. */
#define FM_PAGES 256UL
static void bench_file_map(const char *dir)
{
    int fd = sized_scratch(dir, "fm", FM_PAGES * PG);
    if (fd < 0)
        return;
    /* One page per write: ext4 and xfs give a buffered write a folio the size of the write
     * (6.x large folios), and the model's page-cache folios are 4 KiB. */
    char buf[PG];
    memset(buf, 0x5a, sizeof(buf));
    for (size_t k = 0; k < FM_PAGES; k++)
        if (pwrite(fd, buf, PG, (off_t)(k * PG)) != (ssize_t)PG)
            die("pwrite");
    char *at = reserve_2m(FM_PAGES * PG);
    double best = 1e18;
    for (int r = 0; r < REPS; r++) {
        uint64_t t = 0;
        for (int i = 0; i < WARM_ITERS + WITERS; i++) {
            uint64_t t0 = now_ns();
            volatile char *p = mmap(at, FM_PAGES * PG, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
            if ((char *)p != at)
                die("mmap(file, MAP_FIXED_NOREPLACE)");
            for (size_t k = 0; k < FM_PAGES; k++)
                (void)p[k * PG];
            if (munmap((char *)p, FM_PAGES * PG) != 0)
                die("munmap");
            if (i >= WARM_ITERS)
                t += now_ns() - t0;
        }
        best = min_d(best, (double)t / (WITERS * FM_PAGES));
    }
    close(fd);
    printf("file_map_warm=%.2f\n", best);
}

int main(int argc, char **argv)
{
    pin(0);
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        die("prctl(PR_SET_THP_DISABLE)");
    printf("syscall=%.2f\n", bench_syscall());
    char *a = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    char *b = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        die("mmap(buffers)");
    printf("clear_4k=%.2f\n", bench_clear(a));
    printf("copy_4k=%.2f\n", bench_copy(a, b));
    munmap(a, BUF);
    munmap(b, BUF);
    double f, m, u;
    bench_fault(&f, &m, &u);
    printf("fault_touch=%.2f\nmprotect_per_page=%.2f\nmunmap_per_page=%.2f\n", f, m, u);
    printf("mmap_munmap_pair=%.2f\n", bench_mmap_pair());
    printf("mprotect_call=%.2f\n", bench_mprotect_call(1));
    printf("mprotect_call_32=%.2f\n", bench_mprotect_call(32));
    printf("mprotect_call_512=%.2f\n", bench_mprotect_call(512));
    double fw, uw;
    bench_fault_warm(&fw, &uw);
    printf("fault_touch_warm=%.2f\nmap_unmap_per_page_warm=%.2f\n", fw, uw);
    printf("fault_touch_after_syscall=%.2f\n", bench_fault_after_syscall());
    printf("madvise_call=%.2f\n", bench_madvise_call());
    double alone, with;
    uint64_t ipis;
    int iters;
    bench_ipi(&alone, &with, &ipis, &iters);
    printf("mprotect_other_spin=%.2f\nmprotect_spin=%.2f\ntlb_ipis=%llu\nipi_iters=%d\n", alone, with,
           (unsigned long long)ipis, iters);
    double lazy_none, lazy_asleep;
    bench_lazy_sibling(&lazy_none, &lazy_asleep);
    printf("mprotect_alone=%.2f\nmprotect_lazy_sibling=%.2f\n", lazy_none, lazy_asleep);
    printf("handoff=%.2f\n", bench_handoff());
    double ew;
    printf("fork=%.1f\n", bench_fork(&ew));
    printf("exit_wait=%.1f\n", ew);
    bench_block(argc > 1 ? argv[1] : "/var/tmp");
    bench_block_buffered(argc > 1 ? argv[1] : "/var/tmp");
    bench_pagecache(argc > 2 ? argv[2] : argc > 1 ? argv[1] : "/var/tmp");
    bench_msync(argc > 1 ? argv[1] : "/var/tmp");
    bench_file_map(argc > 1 ? argv[1] : "/var/tmp");
    return 0;
}
