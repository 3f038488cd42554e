// `mmsim validate --race reclaim-writeback`, second part: the same window under memory pressure
// (docs/host-findings.md section 9). Needs root, two CPUs and a memory cgroup the caller names.
//
//   reclaim_race_memcg FILE ROUNDS CGROUP_DIR LIMIT_FILE window|sync_file_range
//
// The process joins CGROUP_DIR (created here) with LIMIT_FILE (memory.limit_in_bytes or
// memory.max) at 16 MiB and maps a 64 MiB sparse file shared. Each round starts from an empty
// page cache; B (CPU 1) write-faults page 0 (the oldest folio on the inactive list), then
// read-faults the rest, so that its faults charge past the limit and reclaim from the inactive
// tail (try_charge() -> try_to_free_mem_cgroup_pages() -> shrink_folio_list(), in batches of
// SWAP_CLUSTER_MAX). M (CPU 0, SCHED_FIFO, beside the spinner W as in reclaim_race.c) stores to
// page 0 until pagemap shows its PTE cleared, then either
//   window: keeps storing, timing how long its stores go through CPU 0's stale entry without a
//           fault (the batch's flush has not come yet); or
//   sync_file_range: writes page 0 back, stores once more, and checks the file as reclaim_race.c
//           does.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <errno.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/resource.h>

#define SZ (64UL << 20)
#define PG 4096UL

static char *base;
static int pm;
static atomic_int bgo, bgo2, btouched, bdone, wstop;
static atomic_ulong bvalue;

static void die(const char *what) { perror(what); exit(2); }

static int present(void *p) {
	uint64_t e;
	if (pread(pm, &e, 8, ((uintptr_t)p / PG) * 8) != 8) die("pread /proc/self/pagemap");
	return (e >> 63) & 1;
}
static atomic_int stop_b;
static void *bthread(void *arg) {
	(void)arg;
	for (;;) {
		int g;
		while ((g = atomic_load(&bgo)) == 0)
			;
		if (g < 0) return NULL;
		atomic_store(&bgo, 0);
		*(volatile uint64_t *)base = atomic_load(&bvalue); /* page 0: dirty, oldest on the LRU */
		atomic_store(&btouched, 1);
		while (atomic_load(&bgo2) == 0)
			;
		atomic_store(&bgo2, 0);
		/* Read-fault the rest: past the memcg limit each fault reclaims from the inactive tail. */
		uint64_t sum = 0;
		for (unsigned long o = PG; o < SZ && !atomic_load(&stop_b); o += PG) sum += *(volatile uint64_t *)(base + o);
		(void)sum;
		atomic_store(&bdone, 1);
	}
}
static void *wthread(void *arg) {
	(void)arg;
	while (!atomic_load(&wstop))
		;
	return NULL;
}
static void wr(const char *path, const char *v) {
	int f = open(path, O_WRONLY);
	if (f < 0 || write(f, v, strlen(v)) != (ssize_t)strlen(v)) { perror(path); exit(2); }
	close(f);
}
int main(int argc, char **argv) {
	if (argc != 6) { fprintf(stderr, "usage: %s FILE ROUNDS CGROUP_DIR LIMIT_FILE window|sync_file_range\n", argv[0]); return 2; }
	const char *path = argv[1];
	int rounds = atoi(argv[2]);
	const char *cg = argv[3], *limit = argv[4];
	int window = strcmp(argv[5], "window") == 0;
	if (!window && strcmp(argv[5], "sync_file_range") != 0) { fprintf(stderr, "unknown mode %s\n", argv[5]); return 2; }
	setvbuf(stdout, NULL, _IOLBF, 0);
	char buf[4096];
	if (mkdir(cg, 0755) && errno != EEXIST) die("mkdir cgroup");
	snprintf(buf, sizeof buf, "%s/%s", cg, limit);
	wr(buf, "16777216");
	snprintf(buf, sizeof buf, "%s/cgroup.procs", cg);
	{ char pid[32]; snprintf(pid, sizeof pid, "%d", getpid()); wr(buf, pid); }
	cpu_set_t c0, c1;
	CPU_ZERO(&c0); CPU_SET(0, &c0);
	CPU_ZERO(&c1); CPU_SET(1, &c1);
	if (sched_setaffinity(0, sizeof c0, &c0)) die("sched_setaffinity(CPU 0)");
	struct sched_param fifo = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) die("sched_setscheduler(SCHED_FIFO)");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) die("open");
	if (ftruncate(fd, SZ)) die("ftruncate");
	int dfd = open(path, O_RDONLY | O_DIRECT);
	if (dfd < 0) die("open O_DIRECT");
	void *dbuf;
	if (posix_memalign(&dbuf, PG, PG)) die("posix_memalign");
	pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0) die("open /proc/self/pagemap");
	base = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) die("mmap file");
	if (madvise(base, SZ, MADV_RANDOM)) die("madvise(MADV_RANDOM)"); /* order-0 folios */
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
		/* Fresh folios: unmap, write back and drop the whole file. */
		if (madvise(base, SZ, MADV_DONTNEED)) die("madvise(MADV_DONTNEED)");
		if (fsync(fd)) die("fsync");
		posix_fadvise(fd, 0, SZ, POSIX_FADV_DONTNEED);
		atomic_store(&bvalue, v1);
		atomic_store(&bdone, 0);
		atomic_store(&btouched, 0);
		atomic_store(&stop_b, 0);
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
		struct rusage u0, u1;
		if (hit && window) {
			seen++;
			struct timespec a, z;
			clock_gettime(CLOCK_MONOTONIC, &a);
			getrusage(RUSAGE_THREAD, &u0);
			long n = 0;
			for (;;) {
				*p0 = v1;
				getrusage(RUSAGE_THREAD, &u1);
				if (u1.ru_minflt != u0.ru_minflt || u1.ru_majflt != u0.ru_majflt) break;
				n++;
			}
			clock_gettime(CLOCK_MONOTONIC, &z);
			if (n > 0) stale++;
			printf("window round=%d us=%.1f stale_stores=%ld\n", i, (z.tv_sec - a.tv_sec) * 1e6 + (z.tv_nsec - a.tv_nsec) / 1e3, n);
		} else if (hit) {
			seen++;
			if (sync_file_range(fd, 0, PG, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER))
				die("sync_file_range");
			getrusage(RUSAGE_THREAD, &u0);
			*p0 = v2; /* through CPU 0's stale entry if the batch has not been flushed */
			getrusage(RUSAGE_THREAD, &u1);
			if (u1.ru_minflt == u0.ru_minflt && u1.ru_majflt == u0.ru_majflt) stale++;
		}
		atomic_store(&stop_b, 1);
		while (!atomic_load(&bdone))
			;
		if (hit && !window) {
			uint64_t got = 0;
			if (fsync(fd)) die("fsync");
			if (madvise(base, PG, MADV_DONTNEED)) die("madvise");
			posix_fadvise(fd, 0, PG, POSIX_FADV_DONTNEED);
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
	munmap(base, SZ);
	close(fd);
	close(dfd);
	printf("result rounds=%d large=0 seen=%d stale=%d lost=%d\n", rounds, seen, stale, lost);
	return 0;
}
