/* The fake libibverbs of the loader case: built into a shared library by
 * TestLoader, which the generated package opens with dlopen. */
struct ibv_thing {
	unsigned int id;
};

static struct ibv_thing thing = {42};

int ibv_add_one(int x) { return x + 1; }
struct ibv_thing *ibv_get_thing(void) { return &thing; }
int ibv_twice(int x) { return 2 * x; }
