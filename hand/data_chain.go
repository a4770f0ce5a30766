package hand

// #include "hand.h"
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// chain is what RecvChain and SendChain share: their work requests in C
// memory, prelinked once, and the window [head, n) of them that is pending.
type chain[W verbs.RecvWR | verbs.SendWR] struct {
	use    inUse // taken by each post and by Close
	wr     []W   // C memory
	bad    **W   // C memory: the bad_wr slot
	mem    unsafe.Pointer
	maxSGE int
	head   int // first pending WR
	n      int // WRs reserved
	err    PostError
}

// Cap is the number of WRs the chain holds.
func (c *chain[W]) Cap() int { return len(c.wr) }

// Len is the number of pending WRs: reserved and not yet posted.
func (c *chain[W]) Len() int { return c.n - c.head }

// Room is the number of WRs Reserve can still hand out before a post
// empties the chain.
func (c *chain[W]) Room() int { return len(c.wr) - c.n }

// Reset drops every pending WR; the next Reserve starts at WR 0.
func (c *chain[W]) Reset() { c.head, c.n = 0, 0 }

// Skip drops the first pending WR (after a PostError, the one that failed),
// leaving the rest pending. It does nothing on an empty chain.
func (c *chain[W]) Skip() {
	if c.head < c.n {
		c.head++
	}
	if c.head == c.n {
		c.Reset()
	}
}

// close releases the C memory and empties the chain, unless another
// goroutine is in a call of it: then it returns used and frees nothing,
// for that call is using the memory. The owner clears its own fields
// before calling exit.
func (c *chain[W]) close(used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.mem != nil {
		cfree(c.mem)
	}
	c.wr, c.bad, c.mem, c.maxSGE, c.head, c.n, c.err = nil, nil, nil, 0, 0, 0, PostError{}
	return nil
}

// failed records a partial post from the bad_wr slot. A provider that fails
// without setting bad_wr (or names a WR outside the chain's pending ones)
// leaves it unknown what it posted: the whole pending chain stays, no WR is
// lost, and the PostError says Unknown, for a WR posted twice is no better.
func (c *chain[W]) failed(op string, errno syscall.Errno) error {
	idx, unknown := c.head, true
	if bad := *c.bad; bad != nil {
		off := uintptr(unsafe.Pointer(bad)) - uintptr(unsafe.Pointer(&c.wr[0]))
		size := unsafe.Sizeof(c.wr[0])
		if k := int(off / size); off%size == 0 && k >= c.head && k < c.n {
			idx, unknown = k, false
		}
	}
	c.err = PostError{Op: op, Index: idx, Posted: idx - c.head, Errno: errno, Unknown: unknown}
	c.head = idx
	return &c.err
}

// stopped records a partial post from a C loop doing what rdma_post_*v do,
// one WR a call, which reports how many WRs went through (each call
// succeeded), the errno of the one that did not, and whether the provider
// named it: when it did not, that WR alone is in doubt, and stays pending.
func (c *chain[W]) stopped(op string, r C.int64_t) error {
	k, errno, unknown := split(r)
	c.err = PostError{Op: op, Index: c.head + k, Posted: k, Errno: errno, Unknown: unknown, alone: unknown}
	c.head += k
	return &c.err
}
