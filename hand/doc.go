// Package hand is goverbs' idiomatic layer over the generated packages, in
// two parts:
//
//   - The data path, which never allocates: RecvChain and SendChain post
//     chains of work requests with one cgo call (PostRecv, PostSRQRecv,
//     PostSend, and rdma_cm's PostRecvv, PostSendv, PostReadv, PostWritev),
//     Poller and ExPoller reap completions with one (Poll), or busy-poll
//     up to n times with one (PollSpin), or wait for one, parked on the
//     netpoller (Poller.Wait; CQ.Wait then RequestNotify then Poll) or
//     blocked in the channel's read on the goroutine's thread
//     (Poller.WaitThread, CQ.WaitThread; Poller.WaitThreadAtLeast for a
//     batch), which allocates nothing when its context cannot end
//     (context.Background).
//     Files data_*.go, with their C side in hand.c.
//   - The control path: Open, Context, PD, MR, CQ and CompChannel, QP, SRQ,
//     AH, MW, async events, and rdma_cm's Listen, Dial, ListenEP, DialEP and
//     Conn. Files control_*.go. Every object is closed with Close, refuses
//     to close under live children (*BusyError), and returns ErrClosed when
//     used after Close. It calls rdma-core only through the generated stubs
//     (generated/verbs, generated/rdmacm), whose errors it turns into a
//     *VerbError naming the verb and its step.
//
// The data path takes hand's own objects (PostRecv(qp *QP), NewPoller(cq
// *CQ, n)), which cost one read lock of the object per call (about 12 ns
// here) and make a post after Close return ErrClosed. Each has a Raw form
// (PostRecvRaw(*verbs.QP), NewPollerRaw(*verbs.CQ, n)) for QPs, SRQs and CQs
// made through the generated layer, or for a loop that wants the last
// nanoseconds and keeps the object alive itself.
//
// Everything the data path hands to C lives in C memory, allocated once when
// a RecvChain, SendChain, Poller or ExPoller is made and reused until Free:
// the work requests (prelinked through next), their scatter lists, the
// bad_wr slot, inline-data staging and completion arrays. Go fills them
// through the generated layouts (verbs.RecvWR, verbs.SendWR, verbs.SGE,
// verbs.WC), so no Go pointer ever crosses into C. The posts and polls call
// hand.c's own entry points, which take every pointer as a uintptr_t and
// call the static inlines of verbs.h (ibv_post_recv, ibv_post_srq_recv,
// ibv_post_send, ibv_poll_cq): through a typed pointer cgo would check each
// argument for Go pointers at run time, as much again as the crossing. The
// loops that would take one crossing per step (rdma_post_*v over a chain,
// extended-CQ polling) run in C likewise and return once.
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
// A peer's memory is a RemoteBuffer (address, length, rkey): MR.Remote
// makes one to advertise, in rping's 16-byte wire format (MarshalBinary),
// the peer decodes it (UnmarshalBinary refuses a wrong length or a buffer
// that wraps the address space), takes parts of it with Slice, which
// returns an error when a part is out of bounds, and posts RDMA writes and
// reads to it (SendWRs.SetWriteTo, SetWriteImmTo, SetReadFrom), which never
// move more bytes than the buffer holds.
//
// A partial post is never silent: the post methods return a *PostError
// naming the failing WR's index in the chain and its errno; the WRs before it
// are posted, it and the rest stay in the chain, ready to post again.
//
// Memory a WR points at (sge.addr) must be registered memory outside the Go
// heap: the garbage collector may move or free Go memory, and an address in a
// uint64 is invisible to every check. MR.SGE gives entries of hand's own
// registered memory (PD.Alloc). AH pointers stored into a chain must come
// from C (AH.Raw, ibv_create_ah), never from Go memory; GOEXPERIMENT=cgocheck2
// catches that mistake.
//
// Chains and pollers are not safe for concurrent use; the control-path
// objects are.
//
// A wait that parks costs the Go runtime more than C's blocking read: an
// EAGAIN read before parking, two epoll_pwait, the scheduler's run of the
// goroutine, and, after the process sat idle, a wake of the runtime's
// sysmon thread, which then naps before it sleeps again. A wait on the
// thread (WaitThread) costs the read alone, as C's does, and holds the thread
// while it waits; Poller.WaitThread also polls and re-arms in the same cgo
// call, one crossing a wake, and Poller.WaitThreadAtLeast one crossing for
// as many completions as it is told to wait for. Where a wait comes once a message, wait on
// the thread or busy-poll (PollSpin); to park there anyway, start the
// program with GODEBUG=schedtrace=2147483647, which keeps sysmon from that
// sleep (README.md, "An RC program with hand/"; goverbs-perf -e -wait
// netpoll does it).
package hand
