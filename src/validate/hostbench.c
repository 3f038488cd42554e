/*
 * hostbench: count TLB-shootdown interrupts caused by one memory-management op on the host kernel.
 *
 * Usage: hostbench OP PAGES ITERS REMOTE [FILEDIR]
 *   OP      mmap-anon | mmap-file | mprotect | madv-dontneed | madv-pageout | fork-cow | msync
 *   PAGES   number of base pages the op works on (>= 1)
 *   ITERS   number of measured iterations (>= 1)
 *   REMOTE  none | spin | sleep
 *   FILEDIR directory for the data file of mmap-file / madv-pageout / msync (default: a fresh temp
 *           directory under /var/tmp, which is on disk; tmpfs pages cannot be paged out)
 *
 * The ops and remote modes are defined in src/validate/case.rs (the table there is the
 * definition; this file implements exactly that table).
 *
 * Output: exactly one line on stdout, space-separated key=value fields (consumers must ignore
 * keys they do not know):
 *   tlb_per_cpu=D0,D1,...  per CPU, the increase of its count on the "TLB:" line of
 *                          /proc/interrupts over the measured iterations
 *   elapsed_ns=T           wall time of the measured loop
 *   iters=I pages=N page_size=P
 *   addr=0x...             the fixed, 2 MiB aligned address of the benchmark mapping
 *                          (see reserve_place)
 *   remote_nivcsw=K        times the spinning remote thread was preempted during the
 *                          measurement (0 unless REMOTE=spin); K > 0: the count is probably low
 *   remote_rt=R            1 if the spinning thread runs SCHED_FIFO (see spin_main)
 *   remote_oncpu=F         REMOTE=spin only: share of the measurement window in which the
 *                          spinning thread actually ran (its CPU clock, which excludes steal
 *                          time, over wall time); well below 1, CPU 1 was taken by another task
 *                          or by the hypervisor, and shootdowns were lost
 *   remote_steal=S         REMOTE=spin only: steal time of CPU 1 over the measurement, in
 *                          USER_HZ ticks of /proc/stat; S > 0: the hypervisor preempted that
 *                          vCPU, and kvm_flush_tlb_multi() skips a preempted vCPU
 *   bg_tlb=B bg_ns=W       TLB interrupts (all CPUs) counted while this process slept for W ns
 *                          (min(elapsed, 200 ms)) right after the measurement: the background
 *                          rate of other processes' shootdowns, which the counts include
 * Any failure: message on stderr, exit status 1 (2 for a usage error).
 *
 * Five warm-up iterations run before the counters are read (environment HOSTBENCH_WARMUP=n
 * overrides this, for studying first-op effects).
 *
 * Process layout: the program first pins itself to CPU 0 and re-executes itself
 * (/proc/self/exe), so the measured mm is created on CPU 0 and CPU 1 never enters its
 * mm_cpumask unless the remote thread of REMOTE=spin|sleep puts it there. See
 * docs/host-findings.md for what the figures mean.
 *
 * C11 + POSIX/Linux (pthreads, sched_setaffinity); build: cc -O2 -pthread hostbench.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 1024
#define WARMUP_ITERS 5
#define REEXEC_ENV "HOSTBENCH_PINNED"

enum op { OP_MMAP_ANON, OP_MMAP_FILE, OP_MPROTECT, OP_MADV_DONTNEED, OP_MADV_PAGEOUT, OP_FORK_COW, OP_MSYNC };
enum remote { R_NONE, R_SPIN, R_SLEEP };

static const char *op_names[] = {"mmap-anon",     "mmap-file",    "mprotect",
                                 "madv-dontneed", "madv-pageout", "fork-cow", "msync"};
static const char *remote_names[] = {"none", "spin", "sleep"};

/* ---------------------------------------------------------------- errors */

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    fputs("hostbench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* die with strerror(errno) appended */
#define DIE_ERRNO(what) die("%s failed: %s (%s:%d)", (what), strerror(errno), __FILE__, __LINE__)
/* pthread functions return the error number instead of setting errno */
#define CHECK_PT(call)                                                                    \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != 0)                                                                     \
            die("%s failed: %s (%s:%d)", #call, strerror(rc_), __FILE__, __LINE__);       \
    } while (0)

static void usage(void)
{
    fputs("usage: hostbench OP PAGES ITERS REMOTE [FILEDIR]\n"
          "  OP: mmap-anon|mmap-file|mprotect|madv-dontneed|madv-pageout|fork-cow|msync\n"
          "  REMOTE: none|spin|sleep\n",
          stderr);
    exit(2);
}

static long parse_pos(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v < 1 || v > (1L << 30)) {
        fprintf(stderr, "hostbench: bad %s '%s' (want a positive integer)\n", what, s);
        usage();
    }
    return v;
}

/* ---------------------------------------------------------------- /proc/interrupts */

static char irq_buf[1 << 20];

/*
 * Read the "TLB:" line of /proc/interrupts into out[]; returns the number of CPU columns.
 * Uses only read(2) into a static buffer (no allocation between the two reads).
 */
static int read_tlb(uint64_t *out)
{
    int fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        DIE_ERRNO("open(/proc/interrupts)");
    size_t len = 0;
    for (;;) {
        if (len >= sizeof(irq_buf) - 1)
            die("/proc/interrupts is larger than %zu bytes", sizeof(irq_buf));
        ssize_t n = read(fd, irq_buf + len, sizeof(irq_buf) - 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            DIE_ERRNO("read(/proc/interrupts)");
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    irq_buf[len] = '\0';
    if (close(fd) != 0)
        DIE_ERRNO("close(/proc/interrupts)");

    char *line = irq_buf;
    while (line && *line) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        char *nl = strchr(line, '\n');
        if (strncmp(p, "TLB:", 4) == 0) {
            p += 4;
            int n = 0;
            for (;;) {
                while (*p == ' ' || *p == '\t')
                    p++;
                if (*p < '0' || *p > '9')
                    break;
                char *end;
                unsigned long long v = strtoull(p, &end, 10);
                if (n >= MAX_CPUS)
                    die("more than %d CPU columns in /proc/interrupts", MAX_CPUS);
                out[n++] = (uint64_t)v;
                p = end;
            }
            if (n == 0)
                die("the TLB: line of /proc/interrupts has no per-CPU counts");
            return n;
        }
        line = nl ? nl + 1 : NULL;
    }
    die("no 'TLB:' line in /proc/interrupts (not x86, or the kernel does not count shootdowns)");
}

/* ---------------------------------------------------------------- CPU pinning */

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        die("cannot pin to CPU %d: %s", cpu, strerror(errno));
}

/* ---------------------------------------------------------------- remote thread */

static atomic_int remote_ready;
static atomic_int remote_stop;
static pthread_mutex_t remote_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t remote_cv = PTHREAD_COND_INITIALIZER;

static atomic_int remote_tid; /* tid of the spinning thread, 0 if none */
static atomic_int remote_rt;  /* the spinning thread runs SCHED_FIFO */
static int spin_want_rt;      /* try SCHED_FIFO for it (not for madv-pageout) */

static void *spin_main(void *arg)
{
    (void)arg;
    /*
     * SCHED_FIFO (lowest RT priority) if wanted and allowed, so that ordinary tasks cannot take
     * CPU 1 from us: every time slice CPU 1 spends in another mm (or, for a kernel thread, in
     * lazy TLB mode) is a window in which shootdowns skip CPU 1. Not for madv-pageout: its
     * read faults do disk I/O whose completion work (ksoftirqd/kworker on CPU 1) an RT spinner
     * would starve until the fair server steps in, which disturbs far more than it protects.
     */
    struct sched_param sp = {.sched_priority = 1};
    if (spin_want_rt && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
        atomic_store(&remote_rt, 1);
    atomic_store(&remote_tid, (int)syscall(SYS_gettid));
    atomic_store(&remote_ready, 1);
    /* Busy loop in user mode that only *reads* memory: it never touches the benchmark pages,
     * and it never writes any page (a write would take a COW fault after each fork-cow fork). */
    while (!atomic_load_explicit(&remote_stop, memory_order_relaxed))
        ;
    return NULL;
}

static void *sleep_main(void *arg)
{
    (void)arg;
    CHECK_PT(pthread_mutex_lock(&remote_mu));
    atomic_store(&remote_ready, 1);
    /* Block in a futex (condition variable) until the measurement is over. */
    while (!atomic_load(&remote_stop))
        CHECK_PT(pthread_cond_wait(&remote_cv, &remote_mu));
    CHECK_PT(pthread_mutex_unlock(&remote_mu));
    return NULL;
}

static pthread_t remote_thread;

/* CPU time consumed so far by the remote thread (0 if there is none). Precise even while the
 * thread runs (posix CPU clocks use task_sched_runtime()), and net of steal time. */
static uint64_t remote_cpu_ns(enum remote r)
{
    if (r == R_NONE)
        return 0;
    clockid_t cid;
    CHECK_PT(pthread_getcpuclockid(remote_thread, &cid));
    struct timespec ts;
    if (clock_gettime(cid, &ts) != 0)
        DIE_ERRNO("clock_gettime(remote thread CPU clock)");
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Involuntary context switches of the spinning thread so far. Every one of them is a time
 * slice in which CPU 1 ran something else, and shootdowns sent in that window are not
 * received by our mm on CPU 1 (should_flush_tlb() skips it): the count comes out low.
 */
static long remote_nivcsw(void)
{
    int tid = atomic_load(&remote_tid);
    if (tid == 0)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        DIE_ERRNO("fopen(/proc/self/task/TID/status)");
    char line[256];
    long v = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
            break;
    if (fclose(f) != 0)
        DIE_ERRNO("fclose(status)");
    if (v < 0)
        die("no nonvoluntary_ctxt_switches in %s", path);
    return v;
}

/* Steal time of `cpu` so far (the 8th value of its /proc/stat line), in USER_HZ ticks. */
static unsigned long long cpu_steal(int cpu)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        DIE_ERRNO("fopen(/proc/stat)");
    char line[512], want[32];
    snprintf(want, sizeof(want), "cpu%d ", cpu);
    unsigned long long v[8] = {0};
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            found = sscanf(line + strlen(want), "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                           &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8;
            break;
        }
    }
    if (fclose(f) != 0)
        DIE_ERRNO("fclose(/proc/stat)");
    return found ? v[7] : 0;
}

static void remote_start(enum remote r)
{
    if (r == R_NONE)
        return;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2)
        die("REMOTE=%s needs at least 2 online CPUs (have %ld)", remote_names[r], ncpu);
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    CHECK_PT(pthread_attr_init(&attr));
    /* Start directly on CPU 1. */
    CHECK_PT(pthread_attr_setaffinity_np(&attr, sizeof(set), &set));
    CHECK_PT(pthread_create(&remote_thread, &attr, r == R_SPIN ? spin_main : sleep_main, NULL));
    CHECK_PT(pthread_attr_destroy(&attr));
    while (!atomic_load(&remote_ready))
        ; /* we are on CPU 0, the remote thread on CPU 1 */
    if (r == R_SLEEP) {
        /* The thread releases the mutex only inside pthread_cond_wait; give it time to
         * enter the futex wait so CPU 1 goes idle (lazy TLB mode with our mm loaded). */
        CHECK_PT(pthread_mutex_lock(&remote_mu));
        CHECK_PT(pthread_mutex_unlock(&remote_mu));
        struct timespec ts = {0, 20 * 1000 * 1000};
        while (nanosleep(&ts, &ts) != 0) {
            if (errno != EINTR)
                DIE_ERRNO("nanosleep");
        }
    }
}

static void remote_stop_join(enum remote r)
{
    if (r == R_NONE)
        return;
    CHECK_PT(pthread_mutex_lock(&remote_mu));
    atomic_store(&remote_stop, 1);
    CHECK_PT(pthread_cond_broadcast(&remote_cv));
    CHECK_PT(pthread_mutex_unlock(&remote_mu));
    CHECK_PT(pthread_join(remote_thread, NULL));
}

/* ---------------------------------------------------------------- the ops */

static size_t page_size;
static size_t npages;
static size_t len;
static char *region;  /* setup mapping (mprotect, madv-*, fork-cow) */
static int file_fd = -1;
static char file_path[4096];
static char dir_path[4096];
static int dir_created;
static volatile uint64_t sink;

static void write_touch(char *p)
{
    for (size_t i = 0; i < npages; i++)
        ((volatile char *)p)[i * page_size] = (char)(i + 1);
}

static void read_touch(const char *p)
{
    uint64_t s = 0;
    for (size_t i = 0; i < npages; i++)
        s += ((const volatile char *)p)[i * page_size];
    sink += s;
}

static void wipe_stack_on_fork(void);

static void cleanup_file(void)
{
    if (file_fd >= 0) {
        if (close(file_fd) != 0)
            perror("hostbench: close(data file)");
        file_fd = -1;
    }
    if (file_path[0] && unlink(file_path) != 0)
        perror("hostbench: unlink(data file)");
    file_path[0] = '\0';
    if (dir_created && rmdir(dir_path) != 0)
        perror("hostbench: rmdir(temp dir)");
    dir_created = 0;
}

/* Create an N-page file of real data on disk and fsync it: its pages are clean page cache. */
static void setup_file(const char *filedir)
{
    if (filedir) {
        snprintf(dir_path, sizeof(dir_path), "%s", filedir);
    } else {
        snprintf(dir_path, sizeof(dir_path), "/var/tmp/hostbench.XXXXXX");
        if (!mkdtemp(dir_path)) {
            snprintf(dir_path, sizeof(dir_path), "/tmp/hostbench.XXXXXX");
            if (!mkdtemp(dir_path))
                DIE_ERRNO("mkdtemp");
        }
        dir_created = 1;
    }
    if (atexit(cleanup_file) != 0)
        die("atexit failed");
    int n = snprintf(file_path, sizeof(file_path), "%s/hostbench-data.XXXXXX", dir_path);
    if (n < 0 || (size_t)n >= sizeof(file_path))
        die("FILEDIR path too long");
    file_fd = mkostemp(file_path, O_CLOEXEC);
    if (file_fd < 0) {
        file_path[0] = '\0';
        DIE_ERRNO("mkostemp(data file)");
    }
    char *buf = malloc(page_size);
    if (!buf)
        die("out of memory");
    for (size_t i = 0; i < npages; i++) {
        memset(buf, (int)(0x41 + i % 26), page_size);
        size_t off = 0;
        while (off < page_size) {
            ssize_t w = pwrite(file_fd, buf + off, page_size - off, (off_t)(i * page_size + off));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                DIE_ERRNO("pwrite(data file)");
            }
            off += (size_t)w;
        }
    }
    free(buf);
    if (fsync(file_fd) != 0)
        DIE_ERRNO("fsync(data file)");
    struct statfs sfs;
    if (fstatfs(file_fd, &sfs) != 0)
        DIE_ERRNO("fstatfs(data file)");
    if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)
        die("%s is on tmpfs/ramfs: its pages are not page cache of a disk file and cannot be "
            "paged out without swap; pass a FILEDIR on a disk file system",
            dir_path);
}

/*
 * Placement. Every benchmark mapping is put at one fixed address `place`, chosen at setup so
 * that it is 2 MiB (PMD) aligned and no other mapping shares any of its page tables: the
 * reservation covers [place, align_up(place + len, 2 MiB)) and nothing else is mapped there
 * afterwards. So the result does not depend on ASLR or on the neighbours of a NULL-hint mmap:
 * the mapping always starts a fresh PTE table, spans ceil(N / 512) PTE tables, and munmap's
 * free_pgtables() (floor/ceiling) frees them all.
 */
#define PMD_BYTES (2UL << 20)
static uintptr_t place;

static void reserve_place(void)
{
    size_t span = (len + PMD_BYTES - 1) & ~(PMD_BYTES - 1);
    size_t total = span + PMD_BYTES;
    void *p = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        DIE_ERRNO("mmap(reservation)");
    place = ((uintptr_t)p + PMD_BYTES - 1) & ~(uintptr_t)(PMD_BYTES - 1);
    if (munmap(p, total) != 0)
        DIE_ERRNO("munmap(reservation)");
}

static char *map_at_place(int prot, int flags, int fd, const char *what)
{
    void *p = mmap((void *)place, len, prot, flags | MAP_FIXED_NOREPLACE, fd, 0);
    if (p == MAP_FAILED)
        die("mmap(%s) at %p failed: %s", what, (void *)place, strerror(errno));
    if ((uintptr_t)p != place)
        die("mmap(%s) ignored the address %p (kernel without MAP_FIXED_NOREPLACE?)", what,
            (void *)place);
    return p;
}

static char *map_anon(void)
{
    return map_at_place(PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, "anon");
}

static char *map_file(void)
{
    return map_at_place(PROT_READ | PROT_WRITE, MAP_SHARED, file_fd, "file, MAP_SHARED");
}

static void setup(enum op op, const char *filedir)
{
    if (op == OP_MMAP_FILE || op == OP_MADV_PAGEOUT || op == OP_MSYNC)
        setup_file(filedir);
    reserve_place();
    switch (op) {
    case OP_MMAP_ANON:
    case OP_MMAP_FILE:
        break;
    case OP_MPROTECT:
        region = map_anon();
        write_touch(region);
        break;
    case OP_FORK_COW:
        region = map_anon();
        write_touch(region);
        wipe_stack_on_fork();
        break;
    case OP_MADV_DONTNEED:
        region = map_anon();
        break;
    case OP_MADV_PAGEOUT:
    case OP_MSYNC:
        region = map_file();
        break;
    }
}

/*
 * fork-cow is defined as "fork; write-touch N (COW); release child; waitpid": the parent must
 * write *only* the N benchmark pages while the child is alive, otherwise every other page it
 * writes (its stack, libc data, TLS) is an extra COW fault and an extra TLB flush. So:
 *  - the main thread's stack is MADV_WIPEONFORK: fork does not write-protect it in the parent
 *    (dup_mmap skips copy_page_range for it) and the child gets zero-filled pages there;
 *  - fork, the child's wait and exit, and the parent's pipe/wait calls are raw system calls
 *    (glibc's fork() runs atfork/malloc/stdio bookkeeping that writes libc data pages);
 *  - rseq is disabled through GLIBC_TUNABLES at the re-exec (the kernel writes the rseq area in
 *    TLS after a context switch, which would be a COW fault too).
 * The child runs no C code: on x86-64 it blocks in read(2) and exit_group(2)s from inline asm,
 * using no stack. Elsewhere glibc fork() is used (and extra COW faults are to be expected).
 */
static void wipe_stack_on_fork(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        DIE_ERRNO("fopen(/proc/self/maps)");
    char line[512];
    unsigned long lo = 0, hi = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "[stack]")) {
            if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
                die("cannot parse the [stack] line of /proc/self/maps");
            break;
        }
    }
    if (fclose(f) != 0)
        DIE_ERRNO("fclose(/proc/self/maps)");
    if (hi <= lo)
        die("no [stack] mapping in /proc/self/maps");
    if (madvise((void *)lo, hi - lo, MADV_WIPEONFORK) != 0)
        DIE_ERRNO("madvise([stack], MADV_WIPEONFORK)");
}

#if defined(__x86_64__)
/* Returns the child's pid (or -errno) in the parent; the child never returns. */
static long fork_and_park(int rfd, char *buf)
{
    long ret;
    register long r_fd __asm__("r12") = rfd; /* callee-saved: survive the syscalls */
    register char *r_buf __asm__("r13") = buf;
    __asm__ volatile("movl $57, %%eax\n\t" /* SYS_fork */
                     "syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 2f\n\t"
                     "1:\n\t" /* child: read(rfd, buf, 1), retried on -EINTR */
                     "xorl %%eax, %%eax\n\t"
                     "movq %%r12, %%rdi\n\t"
                     "movq %%r13, %%rsi\n\t"
                     "movl $1, %%edx\n\t"
                     "syscall\n\t"
                     "cmpq $-4, %%rax\n\t"
                     "je 1b\n\t"
                     "leaq -1(%%rax), %%rdi\n\t" /* exit status 0 iff read returned 1 */
                     "movl $231, %%eax\n\t"      /* SYS_exit_group */
                     "syscall\n\t"
                     "hlt\n\t"
                     "2:\n\t"
                     : "=a"(ret)
                     : "r"(r_fd), "r"(r_buf)
                     : "rcx", "r11", "rdi", "rsi", "rdx", "memory", "cc");
    return ret;
}
#endif

static void fork_cow_iter(void)
{
    int pfd[2];
    char buf[1];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        DIE_ERRNO("pipe2");
#if defined(__x86_64__)
    long pid = fork_and_park(pfd[0], buf);
    if (pid < 0) {
        errno = (int)-pid;
        DIE_ERRNO("fork");
    }
#else
    pid_t pid = fork();
    if (pid < 0)
        DIE_ERRNO("fork");
    if (pid == 0) {
        ssize_t r;
        do
            r = read(pfd[0], buf, 1);
        while (r < 0 && errno == EINTR);
        _exit(r == 1 ? 0 : 3);
    }
#endif
    /* Parent, child alive: write the benchmark pages and nothing else (see above). */
    write_touch(region); /* COW: every page is copied */
    long w;
    do
        w = syscall(SYS_write, pfd[1], "x", 1);
    while (w < 0 && errno == EINTR);
    if (w != 1)
        DIE_ERRNO("write(pipe)");
    int status = 0;
    long r;
    do
        r = syscall(SYS_wait4, (pid_t)pid, &status, 0, NULL);
    while (r < 0 && errno == EINTR);
    if (r != pid)
        DIE_ERRNO("wait4");
    /* The child is gone: from here on writes to other pages are COW *reuses* (no flush). */
    if (close(pfd[0]) != 0 || close(pfd[1]) != 0)
        DIE_ERRNO("close(pipe)");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("fork-cow child ended abnormally (status 0x%x)", status);
}

static void one_iter(enum op op)
{
    char *p;
    switch (op) {
    case OP_MMAP_ANON:
        p = map_anon();
        write_touch(p);
        if (munmap(p, len) != 0)
            DIE_ERRNO("munmap");
        break;
    case OP_MMAP_FILE:
        p = map_file();
        read_touch(p);
        if (munmap(p, len) != 0)
            DIE_ERRNO("munmap");
        break;
    case OP_MPROTECT:
        if (mprotect(region, len, PROT_READ) != 0)
            DIE_ERRNO("mprotect(PROT_READ)");
        if (mprotect(region, len, PROT_READ | PROT_WRITE) != 0)
            DIE_ERRNO("mprotect(PROT_READ|PROT_WRITE)");
        write_touch(region);
        break;
    case OP_MADV_DONTNEED:
        write_touch(region);
        if (madvise(region, len, MADV_DONTNEED) != 0)
            DIE_ERRNO("madvise(MADV_DONTNEED)");
        break;
    case OP_MADV_PAGEOUT:
        read_touch(region);
        if (madvise(region, len, MADV_PAGEOUT) != 0)
            DIE_ERRNO("madvise(MADV_PAGEOUT)");
        break;
    case OP_FORK_COW:
        fork_cow_iter();
        break;
    case OP_MSYNC:
        write_touch(region);
        if (msync(region, len, MS_SYNC) != 0)
            DIE_ERRNO("msync(MS_SYNC)");
        break;
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        DIE_ERRNO("clock_gettime");
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t before[MAX_CPUS], after[MAX_CPUS];

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6)
        usage();
    int op = -1, remote = -1;
    for (int i = 0; i < (int)(sizeof(op_names) / sizeof(op_names[0])); i++)
        if (strcmp(argv[1], op_names[i]) == 0)
            op = i;
    for (int i = 0; i < 3; i++)
        if (strcmp(argv[4], remote_names[i]) == 0)
            remote = i;
    if (op < 0) {
        fprintf(stderr, "hostbench: unknown op '%s'\n", argv[1]);
        usage();
    }
    if (remote < 0) {
        fprintf(stderr, "hostbench: unknown remote '%s'\n", argv[4]);
        usage();
    }
    npages = (size_t)parse_pos(argv[2], "PAGES");
    long iters = parse_pos(argv[3], "ITERS");
    const char *filedir = argc == 6 ? argv[5] : NULL;

    /* Pin to CPU 0 and re-exec, so that the measured mm is born on CPU 0. */
    pin_self(0);
    if (!getenv(REEXEC_ENV)) {
        if (setenv(REEXEC_ENV, "1", 1) != 0)
            DIE_ERRNO("setenv");
        /* No rseq registration: see fork_cow_iter. */
        const char *old = getenv("GLIBC_TUNABLES");
        static char tun[4096];
        int n = snprintf(tun, sizeof(tun), "%s%sglibc.pthread.rseq=0", old ? old : "",
                         old && *old ? ":" : "");
        if (n < 0 || (size_t)n >= sizeof(tun))
            die("GLIBC_TUNABLES too long");
        if (setenv("GLIBC_TUNABLES", tun, 1) != 0)
            DIE_ERRNO("setenv(GLIBC_TUNABLES)");
        execv("/proc/self/exe", argv);
        DIE_ERRNO("execv(/proc/self/exe)");
    }
    if (unsetenv(REEXEC_ENV) != 0)
        DIE_ERRNO("unsetenv");

    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        DIE_ERRNO("sysconf(_SC_PAGESIZE)");
    page_size = (size_t)ps;
    len = npages * page_size;

    int ncpu = read_tlb(before); /* fail early if there is no TLB line */
    /* The remote thread first: its stack mapping must exist before the placement is chosen. */
    spin_want_rt = op != OP_MADV_PAGEOUT && op != OP_MSYNC;
    remote_start((enum remote)remote);
    setup((enum op)op, filedir);

    int warmup = WARMUP_ITERS;
    const char *w = getenv("HOSTBENCH_WARMUP"); /* diagnostic override, e.g. 0 to see first-op effects */
    if (w)
        warmup = (int)strtol(w, NULL, 10);
    for (int i = 0; i < warmup; i++)
        one_iter((enum op)op);

    long nivcsw0 = remote_nivcsw();
    unsigned long long steal0 = remote == R_SPIN ? cpu_steal(1) : 0;
    uint64_t cpu0 = remote_cpu_ns(remote), w0 = now_ns();
    if (read_tlb(before) != ncpu)
        die("CPU count of /proc/interrupts changed");
    uint64_t t0 = now_ns();
    for (long i = 0; i < iters; i++)
        one_iter((enum op)op);
    uint64_t t1 = now_ns();
    if (read_tlb(after) != ncpu)
        die("CPU count of /proc/interrupts changed");
    uint64_t cpu1 = remote_cpu_ns(remote), w1 = now_ns();
    /* Background: the same counter while we sleep (other processes' flushes). */
    static uint64_t bg0[MAX_CPUS], bg1[MAX_CPUS];
    uint64_t bg_want = t1 - t0 < 200000000u ? t1 - t0 : 200000000u;
    read_tlb(bg0);
    uint64_t b0 = now_ns();
    struct timespec bts = {(time_t)(bg_want / 1000000000u), (long)(bg_want % 1000000000u)};
    while (nanosleep(&bts, &bts) != 0 && errno == EINTR)
        ;
    read_tlb(bg1);
    uint64_t bg_ns = now_ns() - b0, bg_tlb = 0;
    for (int c = 0; c < ncpu; c++)
        bg_tlb += bg1[c] - bg0[c];
    long nivcsw = remote_nivcsw() - nivcsw0;
    unsigned long long steal = remote == R_SPIN ? cpu_steal(1) - steal0 : 0;
    /* Share of the measurement the spinning thread really ran (steal time excluded). */
    double oncpu = remote == R_SPIN && w1 > w0 ? (double)(cpu1 - cpu0) / (double)(w1 - w0) : 0.0;

    remote_stop_join((enum remote)remote);
    if (region && munmap(region, len) != 0)
        DIE_ERRNO("munmap(region)");

    printf("tlb_per_cpu=");
    for (int c = 0; c < ncpu; c++)
        printf("%s%llu", c ? "," : "", (unsigned long long)(after[c] - before[c]));
    printf(" elapsed_ns=%llu iters=%ld pages=%zu page_size=%zu addr=0x%llx remote_nivcsw=%ld"
           " remote_rt=%d",
           (unsigned long long)(t1 - t0), iters, npages, page_size,
           (unsigned long long)place, nivcsw, atomic_load(&remote_rt));
    if (remote == R_SPIN)
        printf(" remote_oncpu=%.4f remote_steal=%llu", oncpu, steal);
    printf(" bg_tlb=%llu bg_ns=%llu\n", (unsigned long long)bg_tlb, (unsigned long long)bg_ns);
    if (fflush(stdout) != 0 || ferror(stdout))
        die("writing stdout failed");
    return 0; /* atexit removes the data file */
}
