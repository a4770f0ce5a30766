// Package hand holds the hand-written data-path fast paths over the generated
// packages: posting chains of work requests and reaping completions with one
// cgo call each, without allocating.
//
// Everything a call hands to C lives in C memory, allocated once when a
// RecvChain, SendChain, Poller or ExPoller is made and reused until Free: the
// work requests (prelinked through next), their scatter lists, the bad_wr slot,
// inline-data staging and completion arrays. Go fills them through the
// generated layouts (verbs.RecvWR, verbs.SendWR, verbs.SGE, verbs.WC), so no Go
// pointer ever crosses into C. The posts and polls call hand.c's own entry
// points, which take every pointer as a uintptr_t and call the static inlines
// of verbs.h (ibv_post_recv, ibv_post_srq_recv, ibv_post_send, ibv_poll_cq):
// through a typed pointer cgo would check each argument for Go pointers at run
// time, as much again as the crossing. So the QPs, SRQs and CQs passed in must
// be C memory too (as libibverbs returns them). The loops that would take one
// crossing per step (rdma_post_*v over a chain, extended-CQ polling) run in C
// likewise and return once.
//
// Filling and posting a chain:
//
//	c, err := hand.NewRecvChain(64, 1) // once
//	...
//	v := c.Reserve(n) // n WRs, filled in place
//	for i := range n {
//		v.Set(i, wrID(i), mr.SGE(i*size, size))
//	}
//	if err := c.PostRecv(qp); err != nil {
//		var pe *hand.PostError // pe.Index failed; c still holds it and the rest
//		...
//	}
//
// A partial post is never silent: the post methods return a *PostError
// naming the failing WR's index in the chain and its errno; the WRs before it
// are posted, it and the rest stay in the chain, ready to post again.
//
// Memory a WR points at (sge.addr) must be registered memory outside the Go
// heap: the garbage collector may move or free Go memory, and an address in a
// uint64 is invisible to every check. AH pointers stored into a chain must come
// from C (ibv_create_ah), never from Go memory; GOEXPERIMENT=cgocheck2 catches
// that mistake.
//
// Chains and pollers are not safe for concurrent use. What this package does
// not do: create or modify QPs, CQs or MRs (use the generated packages), or
// wait for completion events.
package hand
