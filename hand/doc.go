// Package hand is goverbs' idiomatic layer over the generated packages
// (generated/verbs, generated/rdmacm): RDMA objects with lifetimes, errors
// that name the verb, and a data path that never allocates.
//
// # Getting started
//
// Open a device, allocate a PD, register memory, make a CQ and a QP, and
// connect the QP: with rdma_cm (Listen and Dial, which make the QP and its
// CQ for you, see Connection setup) or through a side channel of your own
// (QP.Connect with the peer's Endpoint). examples/echo in the module is a
// complete rdma_cm client and server; ExampleQP_Connect is RC over a TCP
// side channel.
//
//	dev, err := hand.Open("") // the first device, or hand.Open("mlx5_0")
//	...
//	defer dev.Close()
//	pd, err := dev.AllocPD()
//	mr, err := pd.Alloc(1<<20, hand.AccessLocalWrite|hand.AccessRemoteWrite)
//	cq, err := dev.NewCQ(64, hand.CQOptions{})
//	qp, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq, Caps: hand.QPCaps{MaxSendWR: 16, MaxRecvWR: 16}})
//
// Every object (Context, PD, MR, CQ, CompChannel, QP, SRQ, AH, MW, Conn,
// Listener) is closed with Close, refuses to close under live children
// (*BusyError), and returns ErrClosed when used after Close. The objects
// are safe for concurrent use; chains and pollers are not (see
// Concurrency).
//
// # Memory
//
// Memory a work request points at must be registered memory outside the Go
// heap: the garbage collector may move or free Go memory, and an address in
// a uint64 is invisible to every check. PD.Alloc maps and registers such
// memory (MR.Bytes is its slice, MR.SGE an entry of it); PD.Register
// registers memory you allocated outside the heap. Registration pins pages
// against RLIMIT_MEMLOCK (MemlockLimit, RaiseMemlockLimit).
//
// A peer's memory is a RemoteBuffer (address, length, rkey): MR.Remote
// makes one to advertise, in rping's 16-byte wire format (MarshalBinary);
// the peer decodes it (UnmarshalBinary refuses a wrong length or a buffer
// that wraps the address space), takes parts of it with Slice, which
// returns an error when a part is out of bounds, and posts RDMA writes and
// reads to it (SendWRs.SetWriteTo, SetWriteImmTo, SetReadFrom), which never
// move more bytes than the buffer holds. A peer's QP address is an Endpoint
// (QPN, PSN, GID), checked the same way when decoded.
//
// What an rkey opens, and for how long: an MR's rkey opens the MR, with
// the MR's remote access flags, to every QP of its PD for as long as the
// MR is registered. Ending a connection therefore does not by itself
// revoke it when the PD is shared with other connections: close the MR
// (or use a window). A Conn that made its own PD refuses to close
// (*BusyError) while MRs on it are open, so once it has closed, the rkeys
// of those MRs are gone. A type 2 memory window (PD.NewMW,
// SendWRs.SetBindMW) is a grant to one QP: its rkey opens only its part of
// the MR, only to work requests arriving on that QP, and only until a
// local invalidate (SendWRs.SetLocalInv) or the peer's send with
// invalidate (SendWRs.SetSendInv). A revoked or foreign key gets the peer
// a remote access error (IBV_WC_REM_ACCESS_ERR) and leaves the memory
// untouched. Register memory with the remote access its peer needs and no
// more (AccessRemoteWrite for a buffer the peer only writes). tests/rxe
// holds each of these on soft-RoCE.
//
// # Posting
//
// RecvChain and SendChain post chains of work requests with one cgo call
// (PostRecv, PostSRQRecv, PostSend, and rdma_cm's PostRecvv, PostSendv,
// PostReadv, PostWritev). Everything they hand to C lives in C memory,
// allocated once when the chain is made and reused until Close: the work
// requests (prelinked through next), their scatter lists, the bad_wr slot
// and inline-data staging. Go fills them through the generated layouts
// (verbs.RecvWR, verbs.SendWR, verbs.SGE), so no Go pointer ever crosses
// into C.
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
// naming the failing WR's index in the chain and its errno; the WRs before
// it are posted, it and the rest stay in the chain, ready to post again.
// AH pointers stored into a chain must come from C (AH.Raw,
// ibv_create_ah), never from Go memory; GOEXPERIMENT=cgocheck2 catches that
// mistake. For UD, UDRecvSGE, SplitUD and GRHSource handle the 40-byte GRH
// in front of each received payload.
//
// # Completions
//
// Poller and ExPoller (extended CQs) reap completions into a C array with
// one cgo call: Poll, or PollSpin(n), which polls up to n times in that
// call and returns at the first poll that finds completions. The WCs they
// return are a view into C memory, valid until the next Poll or Wait. To
// wait instead of polling:
//
//   - Poller.Wait (or CQ.Wait, then RequestNotify, then Poll) parks the
//     goroutine on the netpoller and holds no OS thread: the way for many
//     waiters.
//   - Poller.WaitThread and CQ.WaitThread block the goroutine's thread in
//     the completion channel's read, as perftest's -e does: the way for a
//     few data-path goroutines. Poller.WaitThread polls, waits, reads and
//     acknowledges the event and re-arms the CQ in one cgo call;
//     Poller.WaitThreadAtLeast returns only once it holds a given number
//     of completions. With context.Background they allocate nothing.
//
// # Concurrency
//
// Safe for concurrent use by any number of goroutines: Context, PD, MR,
// CompChannel, CQ, QP, SRQ, AH, MW, Conn, Listener, UDConn and Multicast,
// Close included. A call that overlaps Close either completes before the
// object goes or returns ErrClosed; transitions of one QP (Connect, ToRTR,
// ...) and Resizes of one CQ go one at a time. Several goroutines may post
// to one QP or one SRQ at once, each with a chain of its own: the provider
// serializes each queue (ibv_post_send and ibv_post_recv are thread-safe
// per queue) and every WR completes exactly once. The order RC promises
// holds for what one goroutine posts (its chain's order, then its next
// post's); between goroutines the order is whichever post went first.
// Several Pollers may poll one CQ, each with its own buffer: each
// completion is reaped by one of them, and each sees its share in the
// CQ's order. Several goroutines may wait on one CQ (CQ.Wait, or Wait of
// a Poller each), taking the completion channel's descriptor in turn.
// tests/rxe holds this on soft-RoCE, under the race detector too: 16
// goroutines posting sends in chains of 1 to 64 WRs, 4 posting receives
// and 2 polling the shared CQ, on one RC QP and on an SRQ shared by 8 QPs.
//
// Close may come at any moment of any other call. While goroutines post,
// poll, register memory and wait, in every way there is to wait
// (Poller.Wait, WaitThread and WaitThreadAtLeast, CQ.Wait and WaitThread,
// CompChannel.Wait and WaitThread, Context.NextEvent and Events), a Close
// of their QP, CQ, completion channel, PD, MR or Context returns nil, or
// a *BusyError while children are open, which leaves every wait as it
// was; every other call returns its result or ErrClosed; a wait blocked
// on the object returns ErrClosed once its Close has succeeded, and not
// before; and once all is closed the device holds none of the objects,
// and no file descriptor or goroutine is left. tests/rxe holds this on
// soft-RoCE, under the race detector too, for 1,000 Closes at random
// moments (a wait returned at most 1.2 s after its Close began, on a VM
// under TCG on a loaded host; the test's bound is 2 s).
//
// Not safe for concurrent use: a SendChain or RecvChain and the views its
// Reserve returns, a Poller or ExPoller and the WCs it returns, and the
// connection steps of a Conn from NewConn (Bind ... Connect). Each holds
// per-call state in plain memory (the pending WRs, the bad_wr slot, a
// reused *PostError, the reaped WCs) that a second goroutine would
// overwrite: give each goroutine its own chains and pollers, or hand one
// over through a channel or a mutex. Calls that overlap on one chain or
// poller fail loudly instead of corrupting it: each post, Poll, PollSpin,
// wait (parked too) and Close takes the object's in-use word for its
// duration, and one that finds it taken does nothing and returns an error
// matching ErrConcurrentUse that names the method, while the call under way
// completes as if alone. An error rather than a panic, as for the
// connection steps' overlap: these calls return errors already, and
// nothing is harmed when it is found (the runtime throws "concurrent map
// writes" because by then the map may be). Like the map check it is best
// effort, a plain word that costs nothing measurable: two calls that start
// within nanoseconds of each other can both pass it. Built with -race it
// is atomic and catches every overlap, which the race detector cannot see
// itself in a poller (its WCs are C memory). Neither catches a goroutine
// reading the WCs of its last poll, or filling a view, while another
// calls; the race detector reports Reserve racing a post (the chain's
// count of pending WRs is Go memory). The connection steps refuse an
// overlapping step with an error naming the step under way.
//
// # Errors
//
// A failed verb returns a *VerbError, the generated stub's own error
// (verberr.Error), naming the C function and its errno ("ibv_reg_mr:
// cannot allocate memory (ENOMEM)"); where a step needs saying it is
// wrapped ("QP to RTR: ibv_modify_qp: invalid argument (EINVAL)"), and
// errors.As finds it, errors.Is its errno (syscall.EINVAL), either way. A bad argument is an *AttrError naming the field, a
// failed completion a StatusError, a post that stopped part-way a
// *PostError. ErrNotSupported matches a verb the device or the installed
// rdma-core lacks (naming the first release that has it); without
// rdma-core installed, Open returns an error matching libload.ErrNoLibrary.
//
// # Limits and failures
//
// A registration past RLIMIT_MEMLOCK fails with ENOMEM and an error that
// names the limit, its value and how to raise it (RaiseMemlockLimit,
// `ulimit -l`, LimitMEMLOCK in a systemd unit, limits.conf); the failed
// registration leaves nothing behind: no pinned pages, no mapping of
// PD.Alloc's, no file descriptor, no MR on the device, and a registration
// within the limit works after it.
//
// A CQ must hold every completion its QPs can have outstanding. One too
// small overruns: the device drops the completions it has no room for and
// reports IBV_EVENT_CQ_ERR. Read the device's async events
// (Context.Events or NextEvent): the event names the *CQ, which from then
// on reports Overrun, and its polls return the completions it kept and
// then an *OverrunError (ErrCQOverrun) instead of an empty CQ. What
// finished is then unknown: close the CQ's QPs and the CQ, and make a
// deeper one. Soft-RoCE also moves a QP whose receive could not complete
// to the error state.
//
// Starting programs while RDMA moves registered memory is safe: os/exec
// and syscall.ForkExec share the address space with the child until it
// execs and copy none of it, on any kernel. A fork that copies the
// address space (fork(2) from C, a raw clone without CLONE_VM) is safe on
// Linux 5.13 and later, which copy registered pages into the child at the
// fork and say so (`rdma system` shows copy-on-fork on;
// verbs.IsForkInitialized returns verbs.ForkUnneeded with rdma-core 35 or
// later): the parent's MRs and its RDMA go on unaffected. tests/rxe holds
// this on soft-RoCE (kernels 6.1, 6.12 and newer): 1 GiB of RDMA writes and
// reads, every byte checked, across 200 os/exec runs and 24 forks, 16 of
// them copying the address space while WRs were in flight. On an older
// kernel, set RDMAV_FORK_SAFE=1 in the environment or call verbs.ForkInit
// before the first registration, so that rdma-core keeps registered memory
// out of children (MADV_DONTFORK; a forked child must not touch it), or
// start programs only through os/exec.
//
// # Connection setup
//
// rdma_cm: Listen and Dial (rdma_create_id's path), ListenEP and DialEP
// (rdma_create_ep's), each giving a *Conn with its QP, CQs and PD made from
// a ConnConfig; the server accepts a ConnRequest. ConnConfig.BeforeConnect
// runs once the QP exists and before the peer can send: post the first
// receives there. Conn.Disconnect and WaitDisconnect end a connection.
//
// Use Listen and Dial: the server sees each request (its address, private
// data and device) before it chooses that connection's ConnConfig, and
// every step honours the context and StepTimeout. ListenEP and DialEP do
// what librdmacm's rdma_create_ep programs do (rdma_server, rdma_client):
// one ConnConfig for every connection a listener accepts, its PD and CQs
// shared by them all, and librdmacm's fixed 2 s resolution; use them to
// port such a program, or when every connection is alike and should share
// the listener's CQs.
//
// Dial is the client's steps in one call. NewConn makes a Conn that takes
// them one at a time: Bind (a source address), ResolveAddr, ResolveRoute,
// CreateQP, Connect. Use Dial unless something must happen between the
// steps: timing each one (goverbs-cmtime does), an rdma_set_option on the
// Raw id before a resolution, receives posted between CreateQP and Connect
// without a hook, or a source address chosen per step (Dial takes one too,
// as ConnConfig.LocalAddr). A step out of order says which must come
// first; Close works at every step. A program on generated/rdmacm comes
// back to hand through ContextOf, which wraps librdmacm's device context of
// a raw id (its Verbs) for PDs, CQs and MRs.
//
// Datagrams go over rdma_cm's UDP port space: DialUD and ListenUD give a
// *UDConn, a UD QP with the peer's AH, QPN and Q_Key (UDConfig, with its
// own BeforeConnect); NewMulticast joins groups (Multicast.Join, full or
// send-only) and gives each McastGroup's AH, QPN and Q_Key. Without
// rdma_cm, QP.Connect moves an RC or UC QP from RESET through INIT and RTR
// to RTS in one call, given the peer's Endpoint and ConnectAttr;
// Context.RoCEv2IPv4GID finds the GID index RoCE v2 traffic over IPv4 must
// use.
//
// # Raw forms
//
// Every object has a Raw method returning the generated layer's pointer
// (*verbs.QP, *rdmacm.CMID), for verbs hand does not wrap; crecord.As
// hands it to a package generated from other headers. The data path takes
// hand's own objects (PostRecv(qp *QP), NewPoller(cq *CQ, n)), which cost
// one read lock of the object per call (about 12 ns) and make a post after
// Close return ErrClosed. Each has a Raw form (PostRecvRaw(*verbs.QP),
// NewPollerRaw(*verbs.CQ, n)) for QPs, SRQs and CQs made through the
// generated layer, or for a loop that wants the last nanoseconds and keeps
// the object alive itself.
//
// # Performance
//
// The posts and polls call hand.c's own entry points, which take every
// pointer as a uintptr_t and call the static inlines of verbs.h
// (ibv_post_recv, ibv_post_srq_recv, ibv_post_send, ibv_poll_cq): through a
// typed pointer cgo would check each argument for Go pointers at run time,
// as much again as the crossing. The loops that would take one crossing
// per step (rdma_post_*v over a chain, extended-CQ polling) run in C
// likewise and return once. The data path is in data_*.go and hand.c; the
// waits in wait_*.go and wait.c; the control path in control_*.go calls
// rdma-core through the generated stubs, except the thread waits' C loop
// (wait.c), which calls ibv_get_cq_event and ibv_ack_cq_events through the
// addresses verbs.Address gives, so that a wake costs one crossing.
//
// A loop that busy-polls should use PollSpin with n in the tens, and call
// runtime.Gosched every few milliseconds: a goroutine preempted inside a
// cgo call costs the loop context switches. A wait that parks costs the Go
// runtime more than C's blocking read: an EAGAIN read before parking, two
// epoll_pwait, the scheduler's run of the goroutine, and, after the process
// sat idle, a wake of the runtime's sysmon thread, which then naps before
// it sleeps again. A wait on the thread (WaitThread) costs the read alone,
// as C's does. Where a wait comes once a message, wait on the thread or
// busy-poll; to park there anyway, start the program with
// GODEBUG=schedtrace=2147483647, which keeps sysmon from that sleep
// (goverbs-perf -e -wait netpoll does it). docs/performance.md in the
// module has the measurements behind this advice.
package hand
