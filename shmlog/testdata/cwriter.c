/*
 * cwriter appends records to an shmlog log from C, following the layout and
 * protocol in the shmlog package doc, to show that another language can
 * append to the same log as Go processes.
 *
 * usage: cwriter PATH WRITER RECORDS SIZE
 *
 * Record c of writer w is SIZE bytes: "c" w as 4 hex digits, a space, c as
 * 12 hex digits, then '.' up to a final '\n'. It joins an existing log (it
 * does not create file 0), rolls files as any writer does, and does not
 * trim on exit. Exit status 0 when every record was committed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
	HDR = 4096, OFF_CAP = 128, OFF_INDEX = 136, OFF_ALIGN = 144,
	OFF_SLOTN = 148, OFF_PARCRC = 156, OFF_TAIL = 256, OFF_ACTIVE = 320,
	OFF_WAITERS = 448, OFF_WAKE = 512, OFF_SLOTS = 1024, SLOT_SIZE = 64,
	SLOTS = 48, ALIGN = 8, FRAME_HDR = 16,
};
#define KIND_RECORD 1ULL
#define KIND_PADDING 2ULL

static uint32_t crc_table[256];

static void crc_init(void) {
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1; /* Castagnoli, reflected */
		crc_table[i] = c;
	}
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8; }

static void put32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = v >> (8 * i); }
static void put64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = v >> (8 * i); }
static uint64_t get64(const uint8_t *b) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | b[i]; return v; }

static _Atomic uint64_t *word(uint8_t *m, size_t off) { return (_Atomic uint64_t *)(m + off); }

static void die(const char *what) { perror(what); exit(1); }

static const char *path;
static uint64_t capacity;
static int lockfd;
static uint8_t *hdr0;   /* file 0's header page */
static uint8_t *cur;    /* the mapped active file */
static uint64_t cur_idx;
static uint64_t marker; /* low 32 bits of our in-progress words */
static int slot;

static char *file_name(uint64_t idx) {
	static char name[4096];
	if (idx == 0)
		snprintf(name, sizeof name, "%s", path);
	else
		snprintf(name, sizeof name, "%s.%08llu", path, (unsigned long long)idx);
	return name;
}

/* proc_start returns the start time of pid, or 0 if it is gone. */
static uint64_t proc_start(int pid) {
	char name[64], buf[4096];
	snprintf(name, sizeof name, "/proc/%d/stat", pid);
	int fd = open(name, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p += 2; /* state */
	if (*p == 'Z' || *p == 'X' || *p == 'x')
		return 0;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10);
}

static void put_header(uint8_t *b, uint64_t idx) {
	memset(b, 0, HDR);
	memcpy(b, "APNDLOG\0", 8);
	b[8] = 1;  /* version */
	b[10] = 2; /* file kind: shm */
	put64(b + 16, idx << 32);
	put32(b + 24, mask(crc_update(0, b, 24)));
	put64(b + OFF_CAP, capacity);
	put64(b + OFF_INDEX, idx);
	put32(b + OFF_ALIGN, ALIGN);
	put32(b + OFF_SLOTN, SLOTS);
	memcpy(b + 152, hdr0 + 152, 4); /* the log's id, file 0's */
	put32(b + OFF_PARCRC, mask(crc_update(0, b + 128, 28)));
}

static uint8_t *map_file(uint64_t idx) {
	int fd = open(file_name(idx), O_RDWR);
	if (fd < 0)
		die(file_name(idx));
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("fstat");
	if ((uint64_t)st.st_size < HDR + capacity && posix_fallocate(fd, 0, HDR + capacity) != 0) {
		fprintf(stderr, "cwriter: preallocate %s failed\n", file_name(idx));
		exit(1);
	}
	uint8_t *m = mmap(NULL, HDR + capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap");
	close(fd);
	if (memcmp(m, "APNDLOG\0", 8) != 0 || m[10] != 2 || get64(m + OFF_INDEX) != idx) {
		fprintf(stderr, "cwriter: %s: not file %llu of an shm log\n", file_name(idx), (unsigned long long)idx);
		exit(1);
	}
	return m;
}

/* roll moves past full file idx (step 5 of the protocol). */
static void roll(uint64_t idx) {
	if (cur_idx > idx)
		return;
	if (flock(lockfd, LOCK_EX) < 0)
		die("flock");
	_Atomic uint64_t *active = word(hdr0, OFF_ACTIVE);
	if (atomic_load(active) == idx) {
		char *next = file_name(idx + 1);
		if (access(next, F_OK) != 0) {
			char tmp[4200];
			snprintf(tmp, sizeof tmp, "%s.%d-0.tmp", next, (int)getpid());
			int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
			if (fd < 0)
				die(tmp);
			if (posix_fallocate(fd, 0, HDR + capacity) != 0) {
				unlink(tmp);
				fprintf(stderr, "cwriter: preallocate %s failed\n", tmp);
				exit(1);
			}
			uint8_t b[HDR];
			put_header(b, idx + 1);
			if (pwrite(fd, b, HDR, 0) != HDR)
				die("pwrite");
			close(fd);
			/* Linked, never renamed over: a file of that name is kept. */
			if (link(tmp, file_name(idx + 1)) < 0 && errno != EEXIST)
				die("link");
			unlink(tmp);
		}
		uint64_t want = idx;
		atomic_compare_exchange_strong(active, &want, idx + 1);
	}
	uint64_t a = atomic_load(active);
	flock(lockfd, LOCK_UN);
	munmap(cur, HDR + capacity);
	cur = map_file(a);
	cur_idx = a;
}

static void append(const uint8_t *p, uint64_t n) {
	uint64_t size = (FRAME_HDR + n + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
	_Atomic uint64_t *entered = word(hdr0, OFF_SLOTS + slot * SLOT_SIZE + 16);
	_Atomic uint64_t *left = word(hdr0, OFF_SLOTS + slot * SLOT_SIZE + 24);
	for (;;) {
		atomic_fetch_add(entered, 1);
		uint64_t off = atomic_fetch_add(word(cur, OFF_TAIL), size);
		uint8_t *f = cur + HDR + off;
		uint64_t pos = cur_idx << 32 | off;
		if (off + size <= capacity) {
			uint64_t inprog = n << 32 | marker, zero = 0;
			int ok = atomic_compare_exchange_strong(word(f, 0), &zero, inprog);
			atomic_fetch_add(left, 1);
			if (!ok) {
				fprintf(stderr, "cwriter: claim at %llx padded over\n", (unsigned long long)pos);
				exit(1);
			}
			put64(f + 8, pos);
			memcpy(f + FRAME_HDR, p, n);
			uint8_t h[12];
			uint32_t lenword = (uint32_t)(KIND_RECORD << 30 | n);
			put32(h, lenword);
			put64(h + 4, pos);
			uint32_t crc = mask(crc_update(crc_update(0, h, 12), p, n));
			uint64_t rec = (uint64_t)lenword << 32 | crc;
			if (!atomic_compare_exchange_strong(word(f, 0), &inprog, rec)) {
				fprintf(stderr, "cwriter: record at %llx padded over before commit\n", (unsigned long long)pos);
				exit(1);
			}
			if (atomic_load(word(hdr0, OFF_WAITERS)) != 0) {
				atomic_fetch_add(word(hdr0, OFF_WAKE), 1);
				syscall(SYS_futex, hdr0 + OFF_WAKE, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
			}
			return;
		}
		if (off < capacity && capacity - off >= FRAME_HDR) {
			uint64_t body = capacity - off - FRAME_HDR, zero = 0;
			uint8_t h[12];
			uint32_t lenword = (uint32_t)(KIND_PADDING << 30 | body);
			put32(h, lenword);
			put64(h + 4, pos);
			put64(f + 8, pos);
			atomic_compare_exchange_strong(word(f, 0), &zero, (uint64_t)lenword << 32 | mask(crc_update(0, h, 12)));
		}
		atomic_fetch_add(left, 1);
		roll(cur_idx);
	}
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: cwriter PATH WRITER RECORDS SIZE\n");
		return 2;
	}
	path = argv[1];
	unsigned writer = strtoul(argv[2], NULL, 10);
	unsigned long long records = strtoull(argv[3], NULL, 10);
	size_t size = strtoul(argv[4], NULL, 10);
	if (size < 20) {
		fprintf(stderr, "cwriter: SIZE must be at least 20\n");
		return 2;
	}
	crc_init();

	char lockname[4200];
	snprintf(lockname, sizeof lockname, "%s.lock", path);
	lockfd = open(lockname, O_RDWR | O_CREAT, 0644);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) < 0)
		die(lockname);
	int fd0 = open(path, O_RDWR);
	if (fd0 < 0 || flock(fd0, LOCK_SH) < 0)
		die(path);
	hdr0 = mmap(NULL, HDR, PROT_READ | PROT_WRITE, MAP_SHARED, fd0, 0);
	if (hdr0 == MAP_FAILED)
		die("mmap");
	if (memcmp(hdr0, "APNDLOG\0", 8) != 0 || hdr0[10] != 2 ||
	    (uint32_t)mask(crc_update(0, hdr0 + 128, 28)) != (uint32_t)(hdr0[156] | hdr0[157] << 8 | hdr0[158] << 16 | (uint32_t)hdr0[159] << 24)) {
		fprintf(stderr, "cwriter: %s: not an shm log\n", path);
		return 1;
	}
	capacity = get64(hdr0 + OFF_CAP);

	/* Register: a free slot, or one whose process is gone. */
	slot = -1;
	uint64_t mystart = proc_start(getpid());
	for (int s = 0; s < SLOTS && slot < 0; s++) {
		uint8_t *sl = hdr0 + OFF_SLOTS + s * SLOT_SIZE;
		uint64_t st = atomic_load(word(sl, 0));
		uint32_t pid = (uint32_t)st;
		if (pid != 0) {
			uint64_t start = atomic_load(word(sl, 8)), now = proc_start(pid);
			if (now != 0 && (start == 0 || start == now))
				continue;
		}
		uint64_t gen = (st >> 32) + 1;
		if (!atomic_compare_exchange_strong(word(sl, 0), &st, gen << 32 | (uint32_t)getpid()))
			continue;
		atomic_store(word(sl, 8), mystart);
		atomic_store(word(sl, 16), 0);
		atomic_store(word(sl, 24), 0);
		slot = s;
		marker = (gen & 0xffff) << 16 | (uint64_t)(s + 1);
	}
	if (slot < 0) {
		fprintf(stderr, "cwriter: no free slot\n");
		return 1;
	}
	cur_idx = atomic_load(word(hdr0, OFF_ACTIVE));
	cur = map_file(cur_idx);
	flock(lockfd, LOCK_UN);

	uint8_t *rec = malloc(size);
	memset(rec, '.', size);
	rec[size - 1] = '\n';
	for (unsigned long long c = 0; c < records; c++) {
		char head[32];
		int k = snprintf(head, sizeof head, "c%04x %012llx", writer, c);
		memcpy(rec, head, k);
		append(rec, size);
	}

	/* Close: free the slot. */
	_Atomic uint64_t *state = word(hdr0, OFF_SLOTS + slot * SLOT_SIZE);
	uint64_t st = atomic_load(state);
	atomic_compare_exchange_strong(state, &st, ((st >> 32) + 1) << 32);
	munmap(cur, HDR + capacity);
	munmap(hdr0, HDR);
	close(fd0);
	close(lockfd);
	return 0;
}
