// `mmsim validate --race reclaim-writeback`: does this host's kernel lose a write that races
// reclaim's batched unmap flush with writeback? (The model's scenarios/reclaim-msync-race.toml;
// docs/host-findings.md section 9.) Needs root (SCHED_FIFO, /proc/self/pagemap), two CPUs, and
// a file on a filesystem with real writeback whose I/O completes fast (the caller makes one:
// ext4 on a loop device over tmpfs).
//
//   reclaim_race FILE ROUNDS pageout sync_file_range|msync
//   reclaim_race FILE ROUNDS memcg CGROUP_DIR LIMIT_FILE none|sync_file_range
//
// Three threads of one process:
//   B (CPU 1) reclaims page 0 of a MAP_SHARED file mapping, which it dirtied first:
//     pageout: dirties and maps the 512 order-0 folios of a 2 MiB mapping, then runs
//       MADV_PAGEOUT over it: reclaim_pages() -> shrink_folio_list() clears every PTE with its
//       TLB flush batched (TTU_BATCH_FLUSH: CPU 0 is in the mm), keeps each folio, dirty and
//       not kswapd's to write (`goto activate_locked`), unlocks it, and flushes CPU 0 once, at
//       the end of the list;
//     memcg: the process is in a memory cgroup limited to 16 MiB (CGROUP_DIR, created here;
//       LIMIT_FILE is memory.limit_in_bytes or memory.max); B write-faults page 0 of a 64 MiB
//       sparse file (the oldest folio on the inactive list), then read-faults the rest, so that
//       each fault past the limit reclaims a batch of SWAP_CLUSTER_MAX folios from the inactive
//       tail (try_to_free_mem_cgroup_pages() -> shrink_folio_list(): direct reclaim's path).
//   M (CPU 0, SCHED_FIFO) stores to page 0 (CPU 0 now caches a dirty, writable translation),
//     polls pagemap until B has cleared page 0's PTE, writes the page back (sync_file_range or
//     msync: folio_mkclean() finds no PTE to clean or flush), then stores a new value to page 0.
//     If B has not flushed yet, the store goes through CPU 0's stale entry into a folio that is
//     clean, with no PTE left to carry a dirty bit: nothing will write it. With `none` M writes
//     nothing back and times how long its stores go on without a fault (the window).
//   W (CPU 0, SCHED_OTHER) spins in the same mm and never touches the mapping: while M sleeps
//     on the I/O, CPU 0 runs W instead of going idle. (An idle CPU, or a kernel thread, holds
//     the mm lazily, and switching back to M then catches up with the mm's TLB generation,
//     which B's batch advanced: a flush that closes the window.)
// M counts the stores that did not fault (they went through the stale entry: `stale`). After B
// is done, M checks: fsync, POSIX_FADV_DONTNEED (drops a clean, unmapped page 0), and an
// O_DIRECT read of the file's first page. Anything but the last stored value is a lost write.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#define PG 4096UL

static char *base;
static unsigned long sz;
static int pm, memcg;
static atomic_int bgo, bgo2, btouched, bdone, bstop, wstop;
static atomic_ulong bvalue;

static void die(const char *what) { perror(what); exit(2); }

static int present(void *p) {
	uint64_t e;
	if (pread(pm, &e, 8, ((uintptr_t)p / PG) * 8) != 8) die("pread /proc/self/pagemap");
	return (e >> 63) & 1;
}

static long faults(void) {
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return u.ru_minflt + u.ru_majflt;
}

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void write_file(const char *path, const char *v) {
	int f = open(path, O_WRONLY);
	if (f < 0 || write(f, v, strlen(v)) != (ssize_t)strlen(v)) die(path);
	close(f);
}

static void *bthread(void *arg) {
	(void)arg;
	for (;;) {
		int g;
		while ((g = atomic_load(&bgo)) == 0)
			;
		if (g < 0) return NULL;
		atomic_store(&bgo, 0);
		/* A write fault on CPU 1 puts a new folio in CPU 1's lru_add batch, which
		 * MADV_PAGEOUT drains first (lru_add_drain()): every folio is on the LRU. In the memcg
		 * mode page 0 alone is dirtied: it is the oldest folio on the inactive list. */
		uint64_t v = atomic_load(&bvalue);
		for (unsigned long o = 0; o < (memcg ? PG : sz); o += PG) *(volatile uint64_t *)(base + o) = v;
		atomic_store(&btouched, 1);
		while (atomic_load(&bgo2) == 0)
			;
		atomic_store(&bgo2, 0);
		if (memcg) {
			uint64_t sum = 0;
			for (unsigned long o = PG; o < sz && !atomic_load(&bstop); o += PG) sum += *(volatile uint64_t *)(base + o);
			(void)sum;
		} else if (madvise(base, sz, MADV_PAGEOUT)) {
			die("madvise(MADV_PAGEOUT)");
		}
		atomic_store(&bdone, 1);
	}
}

static void *wthread(void *arg) {
	(void)arg;
	while (!atomic_load(&wstop))
		;
	return NULL;
}

int main(int argc, char **argv) {
	memcg = argc == 7 && strcmp(argv[3], "memcg") == 0;
	if (!memcg && !(argc == 5 && strcmp(argv[3], "pageout") == 0)) {
		fprintf(stderr, "usage: %s FILE ROUNDS pageout sync_file_range|msync\n"
				"       %s FILE ROUNDS memcg CGROUP_DIR LIMIT_FILE none|sync_file_range\n", argv[0], argv[0]);
		return 2;
	}
	const char *path = argv[1], *wb = argv[argc - 1];
	int rounds = atoi(argv[2]);
	int sfr = strcmp(wb, "sync_file_range") == 0, none = strcmp(wb, "none") == 0;
	if (!sfr && !(memcg ? none : strcmp(wb, "msync") == 0)) { fprintf(stderr, "unknown writeback %s\n", wb); return 2; }
	setvbuf(stdout, NULL, _IOLBF, 0);
	sz = memcg ? 64UL << 20 : 2UL << 20;

	if (memcg) {
		char file[4096], pid[32];
		if (mkdir(argv[4], 0755) && errno != EEXIST) die("mkdir cgroup");
		snprintf(file, sizeof file, "%s/%s", argv[4], argv[5]);
		write_file(file, "16777216");
		snprintf(file, sizeof file, "%s/cgroup.procs", argv[4]);
		snprintf(pid, sizeof pid, "%d", getpid());
		write_file(file, pid);
	}
	cpu_set_t c0, c1;
	CPU_ZERO(&c0); CPU_SET(0, &c0);
	CPU_ZERO(&c1); CPU_SET(1, &c1);
	if (sched_setaffinity(0, sizeof c0, &c0)) die("sched_setaffinity(CPU 0)");
	struct sched_param fifo = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) die("sched_setscheduler(SCHED_FIFO)");

	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) die("open");
	if (memcg) {
		if (ftruncate(fd, sz)) die("ftruncate");
	} else {
		char *zero = calloc(1, sz);
		if (!zero || write(fd, zero, sz) != (ssize_t)sz) die("write");
		if (fsync(fd)) die("fsync");
	}
	int dfd = open(path, O_RDONLY | O_DIRECT);
	if (dfd < 0) die("open O_DIRECT");
	void *dbuf;
	if (posix_memalign(&dbuf, PG, PG)) die("posix_memalign");
	pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0) die("open /proc/self/pagemap");

	/* A 2 MiB-aligned mapping: MADV_PAGEOUT's 512 pages are one PTE table, one
	 * reclaim_pages() batch. */
	char *r = mmap(NULL, sz + (2UL << 20), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED) die("mmap");
	base = (char *)(((uintptr_t)r + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	if (mmap(base, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != base) die("mmap file");
	/* Order-0 folios: drop the large folios write() may have made; with MADV_RANDOM a fault
	 * reads one page (no readahead). MADV_PAGEOUT skips a large folio it cannot take whole. */
	posix_fadvise(fd, 0, sz, POSIX_FADV_DONTNEED);
	if (madvise(base, sz, MADV_RANDOM)) die("madvise(MADV_RANDOM)");
	int large = 0;
	if (!memcg) {
		for (unsigned long o = 0; o < sz; o += PG) *(volatile uint64_t *)(base + o) = 1;
		int kpf = open("/proc/kpageflags", O_RDONLY);
		for (unsigned long o = 0; kpf >= 0 && o < sz; o += PG) {
			uint64_t e = 0, f = 0;
			if (pread(pm, &e, 8, ((uintptr_t)(base + o) / PG) * 8) != 8) break;
			if (pread(kpf, &f, 8, (e & ((1ULL << 55) - 1)) * 8) != 8) break;
			if (f & ((1ULL << 15) | (1ULL << 16))) large++; /* KPF_COMPOUND_HEAD, _TAIL */
		}
		if (kpf >= 0) close(kpf);
	}

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	struct sched_param other = { .sched_priority = 0 };
	pthread_attr_setschedparam(&attr, &other);
	pthread_t b, w;
	pthread_attr_setaffinity_np(&attr, sizeof c0, &c0);
	if (pthread_create(&w, &attr, wthread, NULL)) die("pthread_create");
	pthread_attr_setaffinity_np(&attr, sizeof c1, &c1);
	if (pthread_create(&b, &attr, bthread, NULL)) die("pthread_create");

	volatile uint64_t *p0 = (volatile uint64_t *)base;
	int seen = 0, stale = 0, lost = 0;
	for (int i = 0; i < rounds; i++) {
		uint64_t v1 = 2 * (uint64_t)i + 1000, v2 = v1 + 1;
		if (memcg) {
			/* Fresh folios: unmap, write back and drop the whole file. */
			if (madvise(base, sz, MADV_DONTNEED)) die("madvise(MADV_DONTNEED)");
			if (fsync(fd)) die("fsync");
			posix_fadvise(fd, 0, sz, POSIX_FADV_DONTNEED);
		}
		atomic_store(&bvalue, v1);
		atomic_store(&bdone, 0);
		atomic_store(&btouched, 0);
		atomic_store(&bstop, 0);
		atomic_store(&bgo, 1);
		while (!atomic_load(&btouched))
			;
		*p0 = v1; /* CPU 0 caches page 0's translation, dirty and writable */
		atomic_store(&bgo2, 1);
		int hit = 0;
		for (;;) {
			*p0 = v1;
			if (!present(base)) { hit = 1; break; }
			if (atomic_load(&bdone)) break;
		}
		if (hit) {
			seen++;
			if (none) {
				double t0 = now_us();
				long f0 = faults(), n = 0;
				for (;;) {
					*p0 = v1;
					if (faults() != f0) break;
					n++;
				}
				stale += n > 0;
				printf("window round=%d us=%.1f stale_stores=%ld\n", i, now_us() - t0, n);
			} else {
				if (sfr) {
					if (sync_file_range(fd, 0, PG, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER))
						die("sync_file_range");
				} else if (msync(base, PG, MS_SYNC)) {
					die("msync");
				}
				long f0 = faults();
				*p0 = v2; /* through CPU 0's stale entry if B has not flushed yet */
				stale += faults() == f0;
			}
		}
		atomic_store(&bstop, 1);
		while (!atomic_load(&bdone))
			;
		if (hit && !none) {
			uint64_t got = 0;
			if (fsync(fd)) die("fsync");
			if (madvise(base, PG, MADV_DONTNEED)) die("madvise(MADV_DONTNEED)");
			posix_fadvise(fd, 0, PG, POSIX_FADV_DONTNEED);
			/* O_DIRECT: what is on the disk, without a buffered read's readahead (which
			 * would bring page 0 back in a large folio). */
			if (pread(dfd, dbuf, PG, 0) != (ssize_t)PG) die("pread O_DIRECT");
			memcpy(&got, dbuf, 8);
			if (got != v2) {
				lost++;
				printf("lost round=%d stored=%llu file=%llu\n", i, (unsigned long long)v2, (unsigned long long)got);
			}
		}
	}
	atomic_store(&bgo, -1);
	atomic_store(&wstop, 1);
	pthread_join(b, NULL);
	pthread_join(w, NULL);
	printf("result rounds=%d large=%d seen=%d stale=%d lost=%d\n", rounds, large, seen, stale, lost);
	return 0;
}
