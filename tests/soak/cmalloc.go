package soak

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>

// glibc's struct mallinfo2 (2.33 and later), declared here so that the
// package builds against an older C library too, where cHeap reports that
// it cannot tell.
struct goverbs_mallinfo2 {
	size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};

static int goverbs_c_heap(size_t *inuse, size_t *held) {
	struct goverbs_mallinfo2 (*fn)(void) = (struct goverbs_mallinfo2 (*)(void))dlsym(RTLD_DEFAULT, "mallinfo2");
	if (fn == NULL) {
		return -1;
	}
	struct goverbs_mallinfo2 m = fn();
	*inuse = m.uordblks + m.hblkhd;
	*held = m.arena + m.hblkhd;
	return 0;
}

static int goverbs_malloc_trim(void) { return malloc_trim(0); }
*/
import "C"

// cHeap returns what the C library's malloc has handed out and not freed
// (inuse), and what it holds from the system for it (held), over all its
// arenas: glibc's mallinfo2. ok is false where the C library has none.
func cHeap() (inuse, held int64, ok bool) {
	var u, h C.size_t
	if C.goverbs_c_heap(&u, &h) != 0 {
		return 0, 0, false
	}
	return int64(u), int64(h), true
}

// mallocTrim gives the C heap's free memory back to the system
// (malloc_trim(0)).
func mallocTrim() { C.goverbs_malloc_trim() }
