/*
 * insncount: a qemu TCG plugin (qemu 7.2, plugin API version 1) that counts
 * the guest instructions executed at every translated block's address, on
 * all vCPUs, and writes the counts out whenever the guest executes the
 * marker instruction (goverbs-perfcompare -insns does, before and after each
 * run), so that the counts between two markers are one run's.
 *
 *   qemu ... -plugin insncount.so,out=FILE
 *
 * FILE gets, per marker: "snap K" and then one line "ID VADDR NINSNS COUNT"
 * for every block whose count moved since the last snapshot: ID names the
 * translation (a block retranslated at the same address gets a new one),
 * COUNT is how many times it has run since qemu started. A block that an
 * interrupt cuts short still counts whole: the counts are exact to a few
 * instructions per interrupt.
 *
 * TCG has no performance counters to read, and perf in the guest sees none:
 * this is how the guest's instructions per message are counted.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few declarations of qemu's plugin API (include/qemu/qemu-plugin.h)
 * this plugin uses; qemu-system exports the functions. */
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
typedef void (*vcpu_udata_cb)(unsigned int vcpu_index, void *userdata);
typedef void (*tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, vcpu_udata_cb cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, vcpu_udata_cb cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* The marker: nopl 0x474f5642(%rax,%rax,1), "BVOG" as its displacement. */
static const unsigned char marker[8] = {0x0f, 0x1f, 0x84, 0x00, 0x42, 0x56, 0x4f, 0x47};

#define MAX_VCPUS 16

/* One translated block. Each vCPU counts into its own slot, so that two
 * vCPUs running the same block (both tools poll the same library code)
 * never lose an increment; the slots sit a cache line apart. */
struct block {
	uint64_t vaddr;
	uint32_t ninsns;
	uint64_t dumped; /* the total at the last snapshot */
	struct {
		uint64_t n;
		char pad[56];
	} runs[MAX_VCPUS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block **blocks;
static size_t nblocks, capblocks;
static FILE *out;
static int snaps;

static void block_ran(unsigned int vcpu, void *udata)
{
	((struct block *)udata)->runs[vcpu % MAX_VCPUS].n++;
}

static void snapshot(unsigned int vcpu, void *udata)
{
	size_t i;

	(void)vcpu;
	(void)udata;
	pthread_mutex_lock(&lock);
	fprintf(out, "snap %d\n", snaps++);
	for (i = 0; i < nblocks; i++) {
		struct block *b = blocks[i];
		uint64_t total = 0;
		int v;

		for (v = 0; v < MAX_VCPUS; v++)
			total += b->runs[v].n;
		if (total != b->dumped) {
			fprintf(out, "%zu %" PRIx64 " %" PRIu32 " %" PRIu64 "\n", i, b->vaddr, b->ninsns, total);
			b->dumped = total;
		}
	}
	fflush(out);
	pthread_mutex_unlock(&lock);
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	struct block *b = calloc(1, sizeof(*b));

	(void)id;
	if (!b)
		abort();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->ninsns = (uint32_t)n;
	pthread_mutex_lock(&lock);
	if (nblocks == capblocks) {
		capblocks = capblocks ? 2 * capblocks : 65536;
		blocks = realloc(blocks, capblocks * sizeof(*blocks));
		if (!blocks)
			abort();
	}
	blocks[nblocks++] = b;
	pthread_mutex_unlock(&lock);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, block_ran, QEMU_PLUGIN_CB_NO_REGS, b);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (qemu_plugin_insn_size(insn) == sizeof(marker) &&
		    memcmp(qemu_plugin_insn_data(insn), marker, sizeof(marker)) == 0)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, snapshot, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	fclose(out);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
							       int argc, char **argv)
{
	const char *path = NULL;
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (strncmp(argv[i], "out=", 4) == 0)
			path = argv[i] + 4;
	if (!path) {
		fprintf(stderr, "insncount: want out=FILE\n");
		return -1;
	}
	out = fopen(path, "w");
	if (!out) {
		perror(path);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
