package hand

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
	"github.com/goverbs/goverbs/libload"
	"github.com/goverbs/goverbs/verberr"
)

// Unit tests of the control path that need no device: errors, lifetimes,
// the netpoller wait, addresses and encodings. The soft-RoCE tests in
// tests/rxe (control_*_test.go) cover the verbs themselves.

func TestVerbErrorMessageAndIs(t *testing.T) {
	// A VerbError is the generated stub's error itself; a Site stands in
	// for the stub.
	modify := verberr.NewSite("ibv_modify_qp", nil)
	err := error(modify.Err(syscall.EINVAL))
	var ve *VerbError
	require.ErrorAs(t, err, &ve)
	require.Same(t, err, ve)
	require.Equal(t, "ibv_modify_qp", ve.Func())
	require.Equal(t, syscall.EINVAL, ve.Errno())
	require.EqualError(t, err, "ibv_modify_qp: invalid argument (EINVAL)")
	require.ErrorIs(t, err, syscall.EINVAL)
	require.NotErrorIs(t, err, ErrNotSupported)

	for _, e := range []syscall.Errno{syscall.EOPNOTSUPP, syscall.ENOSYS} {
		err := verberr.NewSite("ibv_alloc_mw", nil).Err(e)
		require.ErrorIs(t, err, ErrNotSupported, "%v", e)
		require.ErrorIs(t, err, e)
	}
	// The ENOSYS that says this host has no RDMA is not "not supported".
	noRDMA := verberr.NewSite("ibv_get_device_list", nil).NoRDMA(syscall.ENOSYS, "no RDMA here")
	err = noRDMA.Err(syscall.ENOSYS)
	require.ErrorIs(t, err, verberr.ErrNoRDMA)
	require.ErrorIs(t, err, syscall.ENOSYS)
	require.NotErrorIs(t, err, ErrNotSupported)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "no RDMA here; load ib_uverbs and a driver", ve.Note())

	// This package's own sites (a C call outside the stubs) are the same
	// type, kept per errno as a stub's are.
	require.EqualError(t, siteEpollWait.Err(syscall.EINTR), "epoll_wait: interrupted system call (EINTR)")
	require.Same(t, siteEpollWait.Err(syscall.EINTR), siteEpollWait.Err(syscall.EINTR))
	require.NoError(t, siteEpollWait.Err(0))

	// A provider's code from ibv_poll_cq (verberr.Error.Code): CQ.Poll
	// makes it a *PollError, as a Poller's; an errno passes as is.
	poll := verberr.NewSite("ibv_poll_cq", nil)
	var pe *PollError
	require.ErrorAs(t, pollCQErr(poll.ProviderCode(-2)), &pe)
	require.Equal(t, PollError{Op: "ibv_poll_cq", Ret: -2}, *pe)
	require.NotErrorIs(t, pe, syscall.ENOENT)
	einval := poll.Err(syscall.EINVAL)
	require.Same(t, einval, pollCQErr(einval))
	require.NoError(t, pollCQErr(nil))
}

// A method that adds nothing to a stub's failure returns the stub's error
// itself: the *VerbError a user gets is the one the stub made (pointer
// equal, no copy), and the same one a direct call of the stub gets.
// CQ.RequestNotify on the fake provider, whose ibv_req_notify_cq fails
// with the errno the test sets.
func TestStubErrorReachesUserAsIs(t *testing.T) {
	p, err := fakeprov.New()
	require.NoError(t, err)
	defer p.Close()
	fcq, err := p.NewCQ(16)
	require.NoError(t, err)
	cq := &CQ{raw: (*verbs.CQ)(fcq.Ptr()), ch: &CompChannel{}}
	require.NoError(t, cq.RequestNotify(false))

	fcq.FailNotify(syscall.EINVAL)
	err = cq.RequestNotify(false)
	var ve *VerbError
	require.ErrorAs(t, err, &ve)
	require.Same(t, err, ve, "the method wrapped or copied the stub's error")
	require.Equal(t, "ibv_req_notify_cq", ve.Func())
	require.EqualError(t, err, "ibv_req_notify_cq: invalid argument (EINVAL)")
	require.False(t, cq.armed.Load(), "a failed arm left the CQ marked armed")

	fcq.FailNotify(syscall.EINVAL)
	direct := verbs.ReqNotifyCQ(cq.raw, 0)
	require.Same(t, err, direct, "the stub's error for one errno is one value")

	// Nothing copies it, so a failure seen before allocates nothing (a
	// copy into a second error type allocated one per failure).
	if n := testing.AllocsPerRun(100, func() {
		fcq.FailNotify(syscall.EINVAL)
		if err := cq.RequestNotify(false); err != direct {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a failed CQ.RequestNotify seen before allocates %v times", n)
	}
	// hand's own sites (hand.c's waits) keep theirs too.
	siteReqNotifyCq.Err(syscall.EINVAL)
	if n := testing.AllocsPerRun(100, func() { _ = siteReqNotifyCq.Err(syscall.EINVAL) }); n != 0 {
		t.Errorf("a thread wait's failed arm seen before allocates %v times", n)
	}
}

// Where this package adds a step to a stub's failure, it wraps the stub's
// error: errors.As finds the same *VerbError, and the message says the
// step first. The thread wait's kick polling a CQ whose provider returns
// its own code (mlx5's CQ_POLL_ERR, -2), on the fake provider.
func TestWrappedStubErrorSaysStep(t *testing.T) {
	p, err := fakeprov.New()
	require.NoError(t, err)
	defer p.Close()
	fcq, err := p.NewCQ(16)
	require.NoError(t, err)
	mem, err := cmalloc(unsafe.Sizeof(kickMem{}))
	require.NoError(t, err)
	defer cfree(mem)
	k := &cqKick{kcq: (*verbs.CQ)(fcq.Ptr()), mem: (*kickMem)(mem)}

	fcq.FailPoll(-2)
	err = k.reap()
	require.EqualError(t, err, "the thread wait's kick: ibv_poll_cq: failed: provider code -2")
	var ve *VerbError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ibv_poll_cq", ve.Func())
	require.Equal(t, -2, ve.Code())
	require.NotErrorIs(t, err, syscall.ENOENT)
	fcq.FailPoll(-2)
	_, direct := verbs.PollCQ(k.kcq, 1, &k.mem.wc)
	require.Same(t, direct, ve, "the wrap holds the stub's error itself")
}

func TestAttrAndBusyErrors(t *testing.T) {
	err := error(&AttrError{Op: "QP.ToRTR", Field: "MTU", Reason: "too big"})
	require.EqualError(t, err, "goverbs: QP.ToRTR: MTU: too big")
	require.ErrorIs(t, err, syscall.EINVAL)
	err = &BusyError{Object: "PD 0x1", Children: []string{"MR lkey 0x5 (4096 bytes)", "RC QP 17"}}
	require.EqualError(t, err, "goverbs: cannot close PD 0x1: still used by MR lkey 0x5 (4096 bytes), RC QP 17; close them first")
	require.ErrorIs(t, err, syscall.EBUSY)
	err = &BusyError{Object: "RC QP 17", Owner: "its Conn"}
	require.EqualError(t, err, "goverbs: cannot close RC QP 17: it belongs to its Conn, whose Close closes it")
	require.ErrorIs(t, err, syscall.EBUSY)
}

// A Conn's QP is the Conn's: QP.Close refuses, leaving it open, and the
// Conn's own close (closeOwned) closes it; then QP.Close is a no-op.
func TestOwnedQPClose(t *testing.T) {
	q := &QP{cmID: &rdmacm.CMID{}}
	q.init("RC QP 17")
	var busy *BusyError
	require.ErrorAs(t, q.Close(), &busy)
	require.Equal(t, "its Conn", busy.Owner)
	require.NoError(t, q.use(), "still open")
	q.done()
	require.NoError(t, q.close(func() error { return nil }, nil, nil)) // closeOwned's, without C
	require.NoError(t, q.Close(), "closed by its owner: a second Close")
}

// busyOwned names the children of an owned object that are not owned
// themselves, each once, wherever they hang.
func TestBusyOwned(t *testing.T) {
	var ctx, pd, cq, qp, mr, userPD object
	ctx.init("Context")
	pd.init("PD", &ctx)
	cq.init("CQ", &ctx)
	qp.init("QP", &pd, &cq)
	require.NoError(t, busyOwned("Conn", &ctx, &pd, &cq, &qp))
	mr.init("MR", &pd)
	userPD.init("user PD", &ctx)
	var busy *BusyError
	require.ErrorAs(t, busyOwned("Conn", &ctx, &pd, &cq, &qp), &busy)
	require.Equal(t, "Conn", busy.Object)
	require.ElementsMatch(t, []string{"MR", "user PD"}, busy.Children)
	require.Error(t, busyOwned("Conn", &ctx, &pd, &cq), "the QP, not owned, uses the PD")
}

// closeTearing closes nothing when check fails: before the interrupt, so
// that no wait on the object is ended, or, when check fails only under the
// lock (a child made meanwhile), undoing the interrupt. Once teardown has
// run the object is closed whatever teardown returned, its error returned
// once.
func TestLifetimeCloseTearing(t *testing.T) {
	var o object
	o.init("Conn")
	var interrupted, undone, torn int
	busy := errors.New("busy")
	checks := []error{busy}
	check := func() error {
		err := checks[0]
		if len(checks) > 1 {
			checks = checks[1:]
		}
		return err
	}
	teardown := func() error { torn++; return errors.New("the PD: still used") }
	closeIt := func() error {
		return o.closeTearing(check, teardown, func() { interrupted++ }, func() { undone++ })
	}
	require.ErrorIs(t, closeIt(), busy)
	require.Equal(t, []int{0, 0, 0}, []int{interrupted, undone, torn}, "a failed check interrupts nothing")
	checks = []error{nil, busy}
	require.ErrorIs(t, closeIt(), busy)
	require.Equal(t, []int{1, 1, 0}, []int{interrupted, undone, torn}, "failing under the lock, it undoes the interrupt")
	require.NoError(t, o.use(), "a failed check closes nothing")
	o.done()

	checks = []error{nil}
	require.EqualError(t, closeIt(), "the PD: still used")
	require.Equal(t, 1, torn)
	require.ErrorIs(t, o.use(), ErrClosed, "torn down: closed despite the error")
	require.NoError(t, closeIt(), "second Close")
	require.Equal(t, 1, torn)
}

func TestMemlockAdvice(t *testing.T) {
	const inf = ^uint64(0)
	require.Empty(t, memlockAdvice(1<<20, inf, inf, false), "an unlimited limit is not the cause")
	s := memlockAdvice(1<<20, 64<<10, 8<<20, false)
	require.Contains(t, s, "RLIMIT_MEMLOCK allows 64 KiB in all (hard limit 8192 KiB)")
	require.Contains(t, s, "hand.RaiseMemlockLimit()")
	require.Contains(t, s, "ulimit -l 8192")
	require.Contains(t, s, "/etc/security/limits.conf")
	s = memlockAdvice(1<<20, 64<<10, 64<<10, true)
	require.NotContains(t, s, "RaiseMemlockLimit", "nothing to raise to")
	require.Contains(t, s, "ulimit -l unlimited", "root may raise its hard limit")
	require.Contains(t, memlockAdvice(1, 0, inf, false), "ulimit -l unlimited")

	soft, hard, err := MemlockLimit()
	require.NoError(t, err)
	require.LessOrEqual(t, soft, hard)
}

func TestLifetimeRules(t *testing.T) {
	var parent, child, other object
	parent.init("PD 0x1")
	child.init("MR lkey 0x2 (10 bytes)", &parent, &parent) // a parent named twice counts once
	other.init("RC QP 3", &parent, nil)

	destroyed := 0
	destroy := func() error { destroyed++; return nil }
	err := parent.close(destroy, nil, nil)
	var busy *BusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, []string{"MR lkey 0x2 (10 bytes)", "RC QP 3"}, busy.Children)
	require.Zero(t, destroyed)
	require.NoError(t, parent.use(), "a failed Close leaves the object usable")
	parent.done()

	require.NoError(t, child.close(destroy, nil, nil))
	require.NoError(t, child.close(destroy, nil, nil), "second Close")
	require.Equal(t, 1, destroyed, "destroyed once")
	require.ErrorIs(t, child.use(), ErrClosed)

	// A destroy that fails leaves the object open, to retry.
	require.ErrorIs(t, other.close(func() error { return syscall.EIO }, nil, nil), syscall.EIO)
	require.NoError(t, other.use())
	other.done()
	require.NoError(t, other.close(destroy, nil, nil))
	require.NoError(t, parent.close(destroy, nil, nil))
	require.Equal(t, 3, destroyed)

	_, err = useAll(&parent)
	require.ErrorIs(t, err, ErrClosed)
}

// Uses racing Close either finish first or see ErrClosed; run with -race.
func TestLifetimeConcurrentUseAndClose(t *testing.T) {
	for range 50 {
		var o object
		o.init("X")
		var freed bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if err := o.use(); err != nil {
						return
					}
					if freed {
						t.Error("used after destroy")
					}
					o.done()
				}
			}()
		}
		time.Sleep(time.Millisecond)
		require.NoError(t, o.close(func() error { freed = true; return nil }, nil, nil))
		wg.Wait()
	}
}

// kickByte is what a pipeKicker's signal writes.
const kickByte = 'K'

// pipeKicker stands in for a completion channel's kick (cqKick): its
// signal writes kickByte to the other end of the waiter's socket, as the
// kick raises an event of its own CQ on the channel. It counts its calls,
// and fails open or rearm when told to.
type pipeKicker struct {
	w                          int
	failOpen, failRearm        error
	opens, rearms, closes, sig int
}

func (k *pipeKicker) open() error {
	k.opens++
	return k.failOpen
}
func (k *pipeKicker) cq() uintptr { return kickByte }
func (k *pipeKicker) signal() error {
	k.sig++
	_, err := syscall.Write(k.w, []byte{kickByte})
	return err
}
func (k *pipeKicker) rearm() error {
	k.rearms++
	return k.failRearm
}
func (k *pipeKicker) close() { k.closes++ }

// kickedSocket makes a pollFD on one end of a socket pair, with k
// signalling on the other end (k nil: a pollFD without a kicker), and a
// read of one byte from it that reports whether there was one; the test's
// cleanup closes them.
func kickedSocket(t *testing.T, k *pipeKicker) (p *pollFD, r, w int, read func() bool) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	r, w = fds[0], fds[1]
	t.Cleanup(func() { syscall.Close(r); syscall.Close(w) })
	var kicker threadKicker // not a nil *pipeKicker, which is no nil interface
	if k != nil {
		k.w = w
		kicker = k
	}
	p, err = newPollFDKick(int32(r), "socket", kicker)
	require.NoError(t, err)
	t.Cleanup(p.close)
	read = func() bool {
		var b [1]byte
		_, err := syscall.Read(r, b[:])
		return err != syscall.EAGAIN
	}
	return p, r, w, read
}

// kickStep is a thread waiter's step on a socket whose pollFD may have a
// pipeKicker: while kicking (w.waiter -1) it blocks in a read that peeks,
// and takes a kickByte as its wake; otherwise it blocks in epoll_wait. It
// calls try once the fd has data.
func kickStep(fd int, try func() bool) threadStep {
	return func(w threadWake) (bool, error) {
		if w.waiter >= 0 {
			_, woken, err := waitFDs(w)
			if err != nil || woken {
				return false, err
			}
			return try(), nil
		}
		var b [1]byte
		n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK) // blocking, as the channel's read
		if err != nil {
			return false, err
		}
		if n == 1 && b[0] == kickByte && w.kickCQ == kickByte {
			syscall.Read(fd, b[:])
			return false, nil
		}
		return try(), nil
	}
}

// pollFD parks on the netpoller (wait) or blocks its thread (waitThreadHeld)
// in epoll_wait (with a step that reads once epoll_wait finds the fd
// readable) or, with a kicker, in the fd's read (kickStep): a socket
// stands in for a completion channel. Each way wakes for data, a ctx's end
// and an interrupt, keeps waiting after a kick when nothing changed, and
// undo revives it. The netpoller's wait tries the read before it parks
// and after a kick; the thread's step only once the fd is readable. A
// stale kick wakes a kicked thread wait once, which waits on. The thread's
// wait leaves the fd off the netpoller; with the kicker it leaves it
// blocking, until the next netpoller wait. A kicker that will not open
// leaves the thread waits in epoll_wait.
func TestPollFDWaitCancelInterrupt(t *testing.T) {
	// One wait for the thread cases: kickStep blocks in epoll_wait when
	// the fd has no kicker, or its kicker would not open.
	threadWait := func(p *pollFD, fd int, ctx context.Context, try func() bool) error {
		if err := p.acquire(ctx); err != nil {
			return err
		}
		defer p.release()
		return p.waitThreadHeld(ctx, kickStep(fd, try))
	}
	for _, tc := range []struct {
		name      string
		minTries  int  // after a kick then a write
		idleTries int  // in a wait that times out
		netpolled bool // whether the fd ends up registered with the netpoller
		kicker    *pipeKicker
		wait      func(p *pollFD, fd int, ctx context.Context, try func() bool) error
	}{
		{"netpoller", 3, 1, true, nil, func(p *pollFD, _ int, ctx context.Context, try func() bool) error { return p.wait(ctx, try) }},
		{"thread", 1, 0, false, nil, threadWait},
		{"thread, kicked", 1, 0, false, &pipeKicker{}, threadWait},
		{"thread, kicker refused", 1, 0, false, &pipeKicker{failOpen: syscall.EOPNOTSUPP}, threadWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r, w, read := kickedSocket(t, tc.kicker)
			wait := func(ctx context.Context, try func() bool) error { return tc.wait(p, r, ctx, try) }

			go func() { time.Sleep(20 * time.Millisecond); syscall.Write(w, []byte{1}) }()
			require.NoError(t, wait(context.Background(), read))

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, wait(ctx, read), context.DeadlineExceeded)

			// A kick makes the waiter try again; it keeps waiting when nothing changed.
			tries := 0
			go func() {
				time.Sleep(20 * time.Millisecond)
				p.kick()
				time.Sleep(20 * time.Millisecond)
				syscall.Write(w, []byte{2})
			}()
			require.NoError(t, wait(context.Background(), func() bool { tries++; return read() }))
			require.GreaterOrEqual(t, tries, tc.minTries, "after the kick, after the write")

			// A kick with no waiter is not seen by the next wait (a
			// kicker's event is, once, and it waits on).
			p.kick()
			ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel2()
			tries = 0
			require.ErrorIs(t, wait(ctx2, func() bool { tries++; return read() }), context.DeadlineExceeded)
			require.Equal(t, tc.idleTries, tries, "a stale kick woke the wait")

			errc := make(chan error)
			go func() { errc <- wait(context.Background(), read) }()
			time.Sleep(20 * time.Millisecond)
			p.interrupt()
			require.ErrorIs(t, <-errc, ErrClosed)
			require.ErrorIs(t, wait(context.Background(), read), ErrClosed)
			p.undo()
			syscall.Write(w, []byte{3})
			require.NoError(t, wait(context.Background(), read), "undo revives the fd")
			// A thread wait takes the fd off the netpoller, where it would
			// wake a parked thread at every event.
			require.Equal(t, tc.netpolled, p.f != nil, "registered with the netpoller")
			if k := tc.kicker; k != nil {
				kicked := k.failOpen == nil
				require.Equal(t, kicked, p.kicking, "kicking")
				require.Equal(t, kicked, p.blocking, "the fd blocking after a kicked thread wait")
				require.Equal(t, kicked, p.waiter < 0, "no epoll instance while kicking")
				require.Equal(t, 1, k.opens, "kicker opened")
				if kicked {
					// ctx's end, the kick, the stale kick, its ctx's end,
					// the interrupt: each signal's event is read and
					// rearmed.
					require.Equal(t, 5, k.sig, "signals")
					require.Equal(t, k.sig, k.rearms, "rearms")
				} else {
					require.ErrorIs(t, p.kickErr, syscall.EOPNOTSUPP)
					require.Zero(t, k.sig)
				}
				// The netpoller takes the fd back non-blocking.
				short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, p.wait(short, read), context.DeadlineExceeded)
				require.False(t, p.blocking)
				fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(r), syscall.F_GETFL, 0)
				require.Zero(t, errno)
				require.NotZero(t, fl&syscall.O_NONBLOCK, "O_NONBLOCK after a netpoller wait")
			}
		})
	}
}

// A kicker that will not rearm after its event is closed, and the wait it
// woke goes on in epoll_wait: it still wakes for data, and the next one
// for a ctx's end.
func TestPollFDKickerRearmFails(t *testing.T) {
	k := &pipeKicker{failRearm: syscall.EIO}
	p, r, w, read := kickedSocket(t, k)
	wait := func(ctx context.Context) error {
		require.NoError(t, p.acquire(ctx))
		defer p.release()
		return p.waitThreadHeld(ctx, kickStep(r, read))
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.kick()
		time.Sleep(20 * time.Millisecond)
		syscall.Write(w, []byte{1})
	}()
	require.NoError(t, wait(context.Background()))
	require.Equal(t, 1, k.rearms)
	require.Equal(t, 1, k.closes, "the kicker closed")
	require.ErrorIs(t, p.kickErr, syscall.EIO)
	require.False(t, p.kicking)
	require.GreaterOrEqual(t, p.waiter, int32(0), "an epoll instance")
	require.False(t, p.blocking, "the fd non-blocking again, for epoll_wait's step")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, wait(ctx), context.DeadlineExceeded)
	require.Equal(t, 1, k.opens, "not opened again")
}

func TestEndpointEncoding(t *testing.T) {
	e := Endpoint{QPN: 0x123456, PSN: 0xabcdef, GID: GIDFromAddr(netip.MustParseAddr("192.0.2.1")), LID: 7}
	b, err := e.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, EndpointSize)
	var got Endpoint
	require.NoError(t, got.UnmarshalBinary(b))
	require.Equal(t, e, got)
	require.Error(t, got.UnmarshalBinary(b[:10]))
	for range 100 {
		require.LessOrEqual(t, RandomPSN(), uint32(psnMask))
	}
}

func TestGID(t *testing.T) {
	g := GIDFromAddr(netip.MustParseAddr("192.0.2.1"))
	require.Equal(t, "::ffff:192.0.2.1", g.String())
	require.Equal(t, netip.MustParseAddr("192.0.2.1"), g.Addr())
	require.False(t, g.IsZero())
	require.True(t, GID{}.IsZero())
	raw := g.Raw()
	require.Equal(t, [16]byte(g), *raw.Raw())
	v6 := GIDFromAddr(netip.MustParseAddr("fe80::1"))
	require.True(t, v6.Addr().Is6())
	require.Equal(t, "RoCE v2", GIDTypeRoCEv2.String())
}

func TestPathAttr(t *testing.T) {
	a := Path{DGID: GIDFromAddr(netip.MustParseAddr("192.0.2.2")), SGIDIndex: 1}.ahAttr()
	require.Equal(t, uint8(1), a.IsGlobal)
	require.Equal(t, uint8(1), a.PortNum, "port 0 means 1")
	require.Equal(t, uint8(64), a.GRH.HopLimit)
	require.Equal(t, uint8(1), a.GRH.SGIDIndex)
	a = Path{DLID: 5, SL: 2, Port: 2}.ahAttr()
	require.Zero(t, a.IsGlobal)
	require.Equal(t, uint16(5), a.DLID)
	require.Equal(t, uint8(2), a.PortNum)
	require.Equal(t, "RTR", stateName(verbs.QPSRtr))
	require.Equal(t, "1024", mtuName(verbs.MTU1024))
}

func TestSockaddr(t *testing.T) {
	for _, s := range []string{"192.0.2.1:7471", "[fe80::1]:18515", "0.0.0.0:0"} {
		ap := netip.MustParseAddrPort(s)
		sa := sockaddrOf(ap)
		require.Equal(t, ap, addrFrom(unsafe.Pointer(&sa)), s)
	}
	ap, err := resolveAddrPort(context.Background(), ":7471")
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddrPort("0.0.0.0:7471"), ap)
	ap, err = resolveAddrPort(context.Background(), "localhost:1")
	require.NoError(t, err)
	require.True(t, ap.Addr().IsLoopback())
	_, err = resolveAddrPort(context.Background(), "192.0.2.1")
	require.Error(t, err, "no port")
}

func TestCMEventError(t *testing.T) {
	err := error(&CMEventError{Op: "rdma_connect", Event: 8 /* REJECTED */, Status: rejInvalidServiceID})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "no listener at that address and port")
	err = &CMEventError{Op: "rdma_resolve_addr", Event: 1 /* ADDR_ERROR */, Status: -int32(syscall.ETIMEDOUT)}
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	require.Equal(t, "rdma_resolve_addr: RDMA_CM_EVENT_ADDR_ERROR (connection timed out)", err.Error())
	require.True(t, errors.Is(&CMEventError{Event: 7 /* UNREACHABLE */, Status: 5}, syscall.EHOSTUNREACH))
}

// Without a device (the host, CI outside the VM) opening fails cleanly.
func TestOpenWithoutDevice(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		t.Skip("this host has RDMA devices: the soft-RoCE tests (make rxe-test) cover Open")
	}
	_, err := Open("")
	require.ErrorIs(t, err, ErrNoDevice)
	// The kernel's ENOSYS, told apart from a missing function: it says
	// what to do, once.
	require.ErrorIs(t, err, verberr.ErrNoRDMA)
	require.ErrorIs(t, err, syscall.ENOSYS)
	require.NotErrorIs(t, err, libload.ErrNotSupported)
	require.Equal(t, "goverbs: no RDMA device: ibv_get_device_list: function not implemented "+
		"(ENOSYS; this kernel has no RDMA support: no /sys/class/infiniband_verbs; load ib_uverbs and a driver)", err.Error())
	t.Log(err)
}

// CMContext without a device gives Open's hint, not a bare errno.
func TestCMContextWithoutDevice(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		t.Skip("this host has RDMA devices: the soft-RoCE tests (make rxe-test) cover CMContext")
	}
	_, err := CMContext("")
	if errors.Is(err, libload.ErrNoLibrary) {
		t.Skipf("librdmacm is not installed here (%v): install librdmacm1", err)
	}
	require.ErrorIs(t, err, ErrNoDevice)
	require.ErrorIs(t, err, verberr.ErrNoRDMA)
	require.ErrorIs(t, err, syscall.ENODEV)
	require.Contains(t, err.Error(), "librdmacm found no RDMA device: this kernel has no RDMA support, or no device is set up; load ib_uverbs and a driver")
	t.Log(err)
}

// Listen, Dial and their EP forms without RDMA match ErrNoDevice and give
// CMContext's hint, naming what they were doing, not a bare errno; a
// wildcard ListenEP says so too rather than ask for a PD.
func TestListenDialWithoutDevice(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		t.Skip("this host has RDMA devices: the soft-RoCE tests (make rxe-test) cover Listen and Dial")
	}
	if err := rdmacm.Load(); err != nil {
		t.Skipf("librdmacm is not installed here (%v): install librdmacm1", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, says string
		do         func() error
	}{
		{"Listen", "goverbs: listen on 127.0.0.1:7471: ", func() error { _, err := Listen(ctx, "127.0.0.1:7471"); return err }},
		{"Dial", "goverbs: dial 127.0.0.1:7471: ", func() error { _, err := Dial(ctx, "127.0.0.1:7471", ConnConfig{}); return err }},
		{"NewConn", "goverbs: NewConn: ", func() error { _, err := NewConn(ConnConfig{}); return err }},
		{"ListenEP", "goverbs: listen on 127.0.0.1:7471 (rdma_create_ep path): ", func() error { _, err := ListenEP(ctx, "127.0.0.1:7471", ConnConfig{}); return err }},
		{"ListenEP wildcard", "goverbs: listen on 0.0.0.0:7471 (rdma_create_ep path): ", func() error { _, err := ListenEP(ctx, ":7471", ConnConfig{}); return err }},
		{"DialEP", "goverbs: dial 127.0.0.1:7471 (rdma_create_ep path): finding the device: ", func() error {
			_, err := DialEP(ctx, "127.0.0.1:7471", ConnConfig{})
			return err
		}},
	} {
		err := c.do()
		require.ErrorIs(t, err, ErrNoDevice, c.name)
		require.ErrorIs(t, err, verberr.ErrNoRDMA, c.name)
		require.ErrorIs(t, err, syscall.ENODEV, c.name)
		require.Equal(t, c.says+"no RDMA device: rdma_create_event_channel: no such device "+
			"(ENODEV; librdmacm found no RDMA device: this kernel has no RDMA support, or no device is set up; load ib_uverbs and a driver)", err.Error(), c.name)
		t.Logf("%s: %v", c.name, err)
	}
}

// A thread wait whose ctx cannot end takes the short way (no p.mu, the
// wait's generation left as it was) once a kicked thread wait has set the
// fd up, and whatever undoes that sends the next one the long way, which
// sets it up again: the netpoller's wait, an interrupt (of a wait on
// either way), the kick's close, a kick that will not rearm (for good: the
// waits use epoll_wait from then on). A wait whose ctx can end always goes
// the long way. On the short way, a kick wakes the wait, which waits on,
// and an interrupt ends it with ErrClosed; each reads the kick's event and
// rearms it.
func TestPollFDThreadWaitShortWay(t *testing.T) {
	k := &pipeKicker{}
	p, r, w, read := kickedSocket(t, k)
	wait := func(ctx context.Context) error {
		if err := p.acquire(ctx); err != nil {
			return err
		}
		defer p.release()
		return p.waitThreadHeld(ctx, kickStep(r, read))
	}
	// later runs each of do 20 ms apart, on another goroutine.
	later := func(do ...func()) {
		go func() {
			for _, f := range do {
				time.Sleep(20 * time.Millisecond)
				f()
			}
		}()
	}
	write := func() { syscall.Write(w, []byte{1}) }
	// shortWay waits for a write 20 ms away, and reports whether the wait
	// took the short way.
	shortWay := func(ctx context.Context, what string) bool {
		t.Helper()
		gen := p.gen
		later(write)
		require.NoError(t, wait(ctx), what)
		return p.gen == gen
	}
	ready := func() bool { return p.readyKickCQ.Load() == kickByte }
	background := context.Background()

	require.False(t, ready(), "set up before any thread wait")
	require.False(t, shortWay(background, "the first thread wait"))
	require.True(t, ready(), "set up by the first thread wait")
	require.True(t, shortWay(background, "a second"))
	ctx, cancel := context.WithCancel(background)
	defer cancel()
	require.False(t, shortWay(ctx, "a wait whose ctx can end"))

	later(p.kick, write)
	require.NoError(t, wait(background), "a kicked wait")
	require.Equal(t, 1, k.rearms, "the kick's event read and rearmed")
	require.True(t, shortWay(background, "the wait after a kicked one"))

	errc := make(chan error, 1)
	go func() { errc <- wait(background) }()
	time.Sleep(20 * time.Millisecond)
	p.interrupt()
	require.ErrorIs(t, <-errc, ErrClosed, "an interrupted wait")
	require.Equal(t, 2, k.rearms, "the interrupt's event read and rearmed")
	require.False(t, ready(), "set up after an interrupt")
	require.ErrorIs(t, wait(background), ErrClosed, "a wait after the interrupt")
	p.undo()
	go func() { errc <- wait(background) }() // the long way, after the interrupt
	time.Sleep(20 * time.Millisecond)
	p.interrupt()
	require.ErrorIs(t, <-errc, ErrClosed, "an interrupted wait on the long way")
	require.Equal(t, 3, k.rearms, "the interrupt's event read and rearmed")
	require.False(t, ready(), "set up after an interrupt of a wait on the long way")
	p.undo()
	require.False(t, shortWay(background, "the first wait after undo"))
	require.True(t, shortWay(background, "the second"))

	short, cancelShort := context.WithTimeout(background, 20*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, p.wait(short, read), context.DeadlineExceeded)
	require.False(t, ready(), "set up after the netpoller's wait")
	require.False(t, shortWay(background, "the first thread wait after the netpoller's"))
	require.True(t, shortWay(background, "the second"))

	p.closeKick()
	require.False(t, ready(), "set up after the kick's close")
	require.False(t, shortWay(background, "the first thread wait after the kick's close"))
	require.Equal(t, 2, k.opens, "the kick opened again")
	require.True(t, shortWay(background, "the second"))

	k.failRearm = syscall.EIO
	later(p.kick, write)
	require.NoError(t, wait(background), "a wait kicked by a kick that will not rearm")
	require.False(t, p.kicking)
	require.False(t, ready(), "set up without a kick")
	require.False(t, shortWay(background, "a wait in epoll_wait"))
	require.False(t, shortWay(background, "another"))
}

// A waiter kicked over and over still ends at once on an interrupt or a
// ctx's end that comes between a kick's wake and its re-arm: neither may
// be lost, or the wait parks until the fd's next event (and Close waits
// for it). For a netpoller waiter, and for a thread waiter blocked in the
// read that a kicker's events end.
func TestPollFDKicksDoNotLoseAnEnd(t *testing.T) {
	for _, way := range []string{"netpoller", "thread, kicked"} {
		for _, end := range []string{"interrupt", "cancel"} {
			t.Run(way+"/"+end, func(t *testing.T) {
				for iter := range 300 {
					fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
					require.NoError(t, err)
					var kicker threadKicker
					if way != "netpoller" {
						kicker = &pipeKicker{w: fds[1]}
					}
					p, err := newPollFDKick(int32(fds[0]), "socket", kicker)
					require.NoError(t, err)
					read := func() bool {
						var b [1]byte
						_, err := syscall.Read(fds[0], b[:])
						return err != syscall.EAGAIN
					}
					ctx, cancel := context.WithCancel(context.Background())
					errc := make(chan error, 1)
					if kicker == nil {
						go func() { errc <- p.wait(ctx, read) }()
					} else {
						go func() {
							if err := p.acquire(ctx); err != nil {
								errc <- err
								return
							}
							defer p.release()
							errc <- p.waitThreadHeld(ctx, kickStep(fds[0], read))
						}()
					}
					stop := make(chan struct{})
					kicked := make(chan struct{})
					go func() {
						defer close(kicked)
						for {
							select {
							case <-stop:
								return
							default:
								p.kick()
							}
						}
					}()
					time.Sleep(100 * time.Microsecond)
					want := context.Canceled
					if end == "interrupt" {
						p.interrupt()
						want = ErrClosed
					} else {
						cancel()
					}
					select {
					case err := <-errc:
						require.ErrorIs(t, err, want, "iteration %d", iter)
					case <-time.After(5 * time.Second):
						t.Fatalf("iteration %d: the wait was still blocked 5 s after the %s", iter, end)
					}
					close(stop)
					<-kicked
					cancel()
					p.close()
					syscall.Close(fds[0])
					syscall.Close(fds[1])
				}
			})
		}
	}
}

// A NextEvent that holds the Context when Close begins, but has not yet
// made the async fd's poller, gets ErrClosed instead of making one that
// Close's interrupt missed (and parking on it, with Close waiting behind).
// The steps are NextEvent's, with Close run between its use and eventFD.
func TestContextCloseBeforeFirstNextEventsPoller(t *testing.T) {
	var fds [2]int
	require.NoError(t, syscall.Pipe2(fds[:], syscall.O_CLOEXEC))
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	mem, err := cmalloc(unsafe.Sizeof(verbs.Context{}))
	require.NoError(t, err)
	defer cfree(mem)
	raw := (*verbs.Context)(mem)
	*raw = verbs.Context{AsyncFD: int32(fds[0])}
	c := newContext(raw, "fake", true) // borrowed: Close calls no C

	require.NoError(t, c.use()) // NextEvent's use
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	require.Eventually(t, func() bool {
		c.evMu.Lock()
		defer c.evMu.Unlock()
		return c.evClosing
	}, 5*time.Second, time.Millisecond, "Close's interrupt")
	_, err = c.eventFD() // NextEvent's next step
	require.ErrorIs(t, err, ErrClosed)
	c.done()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting 5 s after NextEvent let go")
	}
	_, err = c.NextEvent(context.Background())
	require.ErrorIs(t, err, ErrClosed)
}

// deliver files an event for the waiter, counts another CQ's as pending,
// and drops one of a CQ the channel does not know (closed after its event
// was read, or made outside this package), which a Wait for any CQ must
// not return as a nil *CQ with no error.
func TestCompChannelDeliver(t *testing.T) {
	var rawA, rawB, rawGone verbs.CQ
	a, b := &CQ{}, &CQ{}
	ch := &CompChannel{cqs: map[*verbs.CQ]*CQ{&rawA: a, &rawB: b}, pending: map[*CQ]int{}}

	require.False(t, ch.deliver(&rawGone, nil), "an unknown CQ's event, waiting for any")
	require.Nil(t, ch.waitGot)
	require.False(t, ch.deliver(&rawGone, a), "an unknown CQ's event, waiting for a")
	require.Empty(t, ch.pending)

	a.armed.Store(true)
	require.True(t, ch.deliver(&rawA, nil))
	require.Same(t, a, ch.waitGot)
	require.False(t, a.armed.Load(), "the event disarmed a")

	require.False(t, ch.deliver(&rawB, a), "b's event, waiting for a")
	require.Equal(t, map[*CQ]int{b: 1}, ch.pending)
}

// Sizes C's int would truncate, and an MW range whose end wraps, are
// *AttrErrors before any C call.
func TestSizeAttrErrors(t *testing.T) {
	var ae *AttrError
	_, err := (&Context{}).NewCQ(math.MaxInt32+1, CQOptions{})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "entries", ae.Field)
	require.ErrorAs(t, (&CQ{}).Resize(0), &ae)
	require.ErrorAs(t, (&CQ{}).Resize(1<<32), &ae)

	mw, qp, mr := &MW{typ: verbs.MWType1}, &QP{}, &MR{length: 4096}
	for _, r := range [][2]int{{math.MaxInt, 1}, {1, math.MaxInt}, {4097, 0}, {4000, 97}, {-1, 1}} {
		_, err := mw.Bind(qp, mr, r[0], r[1], 0, 0)
		require.ErrorAs(t, err, &ae, "offset %d length %d", r[0], r[1])
		require.Equal(t, "offset/length", ae.Field)
	}
}

// Counts the uint32 fields of struct ibv_qp_cap and struct ibv_srq_attr
// cannot hold are *AttrErrors naming the field, before the object is even
// used (the PD and SRQ here are closed: a count that got past the check
// would meet ErrClosed). Converted, they wrapped: 2^32 WRs each way became
// none, a negative limit 2^32-1.
func TestCountAttrErrors(t *testing.T) {
	ctx := &Context{}
	pd, cq, srq := &PD{ctx: ctx}, &CQ{ctx: ctx}, &SRQ{}
	pd.closed, srq.closed = true, true
	var ae *AttrError
	for _, c := range []struct {
		field string
		caps  QPCaps
	}{
		{"Caps.MaxSendWR", QPCaps{MaxSendWR: 1 << 32, MaxRecvWR: 1 << 32}},
		{"Caps.MaxSendWR", QPCaps{MaxSendWR: -1, MaxRecvWR: 1}},
		{"Caps.MaxRecvWR", QPCaps{MaxSendWR: 1, MaxRecvWR: -1}},
		{"Caps.MaxSendSGE", QPCaps{MaxSendWR: 1, MaxSendSGE: -1}},
		{"Caps.MaxRecvSGE", QPCaps{MaxRecvWR: 1, MaxRecvSGE: 1 << 32}},
		{"Caps.MaxInlineData", QPCaps{MaxSendWR: 1, MaxInlineData: -1}},
		{"Caps", QPCaps{MaxSendSGE: 1}},
	} {
		_, err := pd.NewQP(QPConfig{Type: RC, SendCQ: cq, Caps: c.caps})
		require.ErrorAs(t, err, &ae, "%+v", c.caps)
		require.Equal(t, c.field, ae.Field, "%+v", c.caps)
		require.ErrorIs(t, err, syscall.EINVAL)
	}
	top := QPCaps{MaxSendWR: math.MaxUint32, MaxRecvWR: math.MaxUint32, MaxSendSGE: math.MaxUint32, MaxRecvSGE: math.MaxUint32, MaxInlineData: math.MaxUint32}
	attr, _, err := QPConfig{Type: RC, SendCQ: cq, Caps: top}.initAttr(pd, "PD.NewQP")
	require.NoError(t, err, "2^32-1 is the device's to refuse")
	require.Equal(t, verbs.QPCap{MaxSendWR: math.MaxUint32, MaxRecvWR: math.MaxUint32, MaxSendSGE: math.MaxUint32, MaxRecvSGE: math.MaxUint32, MaxInlineData: math.MaxUint32}, attr.Cap)

	for _, c := range []struct {
		field string
		cfg   SRQConfig
	}{
		{"MaxWR", SRQConfig{MaxWR: 1 << 32}},
		{"MaxWR", SRQConfig{MaxWR: 0}},
		{"MaxSGE", SRQConfig{MaxWR: 1, MaxSGE: -1}},
		{"MaxSGE", SRQConfig{MaxWR: 1, MaxSGE: 1 << 32}},
	} {
		_, err := pd.NewSRQ(c.cfg)
		require.ErrorAs(t, err, &ae, "%+v", c.cfg)
		require.Equal(t, c.field, ae.Field, "%+v", c.cfg)
	}
	for _, limit := range []int{-1, 1 << 32} {
		require.ErrorAs(t, srq.Arm(limit), &ae, "limit %d", limit)
		require.Equal(t, "limit", ae.Field)
	}
	require.ErrorIs(t, srq.Arm(math.MaxUint32), ErrClosed, "2^32-1 passes the check")
}

// Values the 8- and 16-bit fields, and C's int, cannot hold are
// *AttrErrors naming the field, before the object is used (closed objects
// here) or, for a GID index, before ibv_query_port. Converted, they
// wrapped: a P_Key index of 2^16 became 0, an RDMA read depth of -1 became
// 255, a GID index of 256 became 0, a CQ vector or dma-buf fd of 2^32 became 0.
func TestNarrowFieldAttrErrors(t *testing.T) {
	var ae *AttrError
	closedQP := func(typ QPType) *QP {
		q := &QP{typ: typ}
		q.closed = true
		return q
	}
	field := func(err error, want string, what any) {
		t.Helper()
		require.ErrorAs(t, err, &ae, "%v", what)
		require.Equal(t, want, ae.Field, "%v", what)
	}
	for _, v := range []int{-1, 1 << 16} {
		field(closedQP(UD).ToInit(InitAttr{PKeyIndex: v}), "PKeyIndex", v)
	}
	require.ErrorIs(t, closedQP(UD).ToInit(InitAttr{PKeyIndex: math.MaxUint16}), ErrClosed)
	for _, v := range []int{-1, 256} {
		field(closedQP(RC).ToRTR(RTRAttr{MaxDestRDAtomic: v}), "MaxDestRDAtomic", v)
		field(closedQP(RC).ToRTS(RTSAttr{MaxRDAtomic: v}), "MaxRDAtomic", v)
	}
	require.ErrorIs(t, closedQP(RC).ToRTS(RTSAttr{MaxRDAtomic: 255}), ErrClosed)
	require.ErrorIs(t, closedQP(UC).ToRTS(RTSAttr{MaxRDAtomic: -1}), ErrClosed, "only RC reads the depth")

	// q.ctx is nil: the index must be refused before ibv_query_port,
	// which would panic reaching for the Context.
	q := &QP{typ: RC, raw: &verbs.QP{State: verbs.QPSInit}}
	field(q.ToRTR(RTRAttr{Path: Path{DGID: GID{0xfe, 0x80}, SGIDIndex: 256}, DestQPN: 2}), "Path.SGIDIndex", 256)

	c := &Context{}
	c.closed = true
	for _, v := range []int{-1, 1 << 32} {
		_, err := c.NewCQ(1, CQOptions{Vector: v})
		field(err, "Vector", v)
	}
	pd := &PD{}
	pd.closed = true
	for _, v := range []int{-1, 1 << 32} {
		_, err := pd.RegisterDmabuf(v, 0, 4096, 0, AccessLocalWrite)
		field(err, "fd", v)
	}
}

// ConnConfig's connection parameters that struct rdma_conn_param cannot
// carry are *AttrErrors before Dial, DialEP and ListenEP look for a device:
// a negative read depth (which became 255), a retry count outside 0 to 7
// (which became the default), and caps struct ibv_qp_cap cannot hold (which
// Dial met only after making a PD, as NewCQ's error for the CQ's depth).
func TestConnParamAttrErrors(t *testing.T) {
	var ae *AttrError
	for _, c := range []struct {
		field string
		cfg   ConnConfig
	}{
		{"ResponderResources", ConnConfig{ResponderResources: -1}},
		{"InitiatorDepth", ConnConfig{InitiatorDepth: -1}},
		{"RetryCount", ConnConfig{RetryCount: 8}},
		{"RetryCount", ConnConfig{RetryCount: -2}},
		{"RNRRetryCount", ConnConfig{RNRRetryCount: 8}},
		{"AckTimeout", ConnConfig{AckTimeout: 32}},
		{"Caps.MaxSendWR", ConnConfig{Caps: QPCaps{MaxSendWR: 1 << 32}}},
		{"Caps.MaxRecvSGE", ConnConfig{Caps: QPCaps{MaxSendWR: 1, MaxRecvSGE: -1}}},
	} {
		_, err := DialEP(context.Background(), "192.0.2.1:7471", c.cfg)
		require.ErrorAs(t, err, &ae, "%s", c.field)
		require.Equal(t, c.field, ae.Field)
		_, err = Dial(context.Background(), "192.0.2.1:7471", c.cfg)
		require.ErrorAs(t, err, &ae, "%s", c.field)
		require.Equal(t, c.field, ae.Field)
		require.Equal(t, "Dial", ae.Op)
		_, err = NewConn(c.cfg)
		require.ErrorAs(t, err, &ae, "%s", c.field)
		require.Equal(t, c.field, ae.Field)
		require.Equal(t, "NewConn", ae.Op)
		_, err = ListenEP(context.Background(), "192.0.2.1:0", c.cfg)
		require.ErrorAs(t, err, &ae, "%s", c.field)
		require.Equal(t, c.field, ae.Field)
	}
	for _, cfg := range []ConnConfig{{RetryCount: NoRetry, RNRRetryCount: 7}, {ResponderResources: 1000}} {
		require.NoError(t, cfg.checkParams("DialEP"), "%+v", cfg)
	}
}

// SGE constructors panic on what an SGE's 32-bit length cannot hold, which
// would otherwise become a shorter transfer (or, for a UD receive, less
// room than the GRH).
func TestSGELengthBounds(t *testing.T) {
	mr := &MR{addr: 0x1000, length: 4096, lkey: 7}
	require.Equal(t, verbs.SGE{Addr: 0x1010, Length: 100, LKey: 7}, mr.SGE(16, 100))
	require.NotPanics(t, func() { mr.SGE(0, math.MaxUint32) }, "past the MR: the device's to refuse")
	for _, c := range [][2]int{{0, math.MaxUint32 + 1}, {-1, 1}, {0, -1}} {
		require.Panics(t, func() { mr.SGE(c[0], c[1]) }, "offset %d length %d", c[0], c[1])
	}
	require.Equal(t, uint32(math.MaxUint32), UDRecvSGE(0, math.MaxUint32-uint32(GRHSize), 1).Length)
	require.Panics(t, func() { UDRecvSGE(0, math.MaxUint32-uint32(GRHSize)+1, 1) })
}

// MR.Remote advertises the whole MR, at the address and under the rkey
// peers use; a part of it through Slice.
func TestMRRemote(t *testing.T) {
	mr := &MR{addr: 0x7f0000001000, length: 4096, lkey: 7, rkey: 0x99}
	r := mr.Remote()
	require.Equal(t, uint64(0x7f0000001000), r.Addr())
	require.Equal(t, 4096, r.Len())
	require.Equal(t, uint32(0x99), r.RKey(), "the rkey, not the lkey")
	part, err := r.Slice(4000, 96)
	require.NoError(t, err)
	want, err := NewRemoteBuffer(0x7f0000001000+4000, 96, 0x99)
	require.NoError(t, err)
	require.Equal(t, want, part)
	_, err = r.Slice(4000, 97)
	require.Error(t, err)
}

// prepareThreadWait opens the kicker once, before any thread wait, and
// leaves the fd non-blocking for the netpoller's waits until a thread wait
// comes; after close it refuses.
func TestPollFDPrepareThreadWait(t *testing.T) {
	k := &pipeKicker{}
	p, r, w, read := kickedSocket(t, k)
	require.NoError(t, p.prepareThreadWait())
	require.NoError(t, p.prepareThreadWait())
	require.Equal(t, 1, k.opens)
	require.True(t, p.kicking)
	require.False(t, p.blocking, "blocking before a thread wait")
	// Were the fd blocking, this read would hold the thread past the
	// deadline, until data came.
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.wait(short, read), context.DeadlineExceeded)

	go func() { time.Sleep(20 * time.Millisecond); syscall.Write(w, []byte{1}) }()
	require.NoError(t, p.acquire(context.Background()))
	require.NoError(t, p.waitThreadHeld(context.Background(), kickStep(r, read)))
	p.release()
	require.Equal(t, 1, k.opens)
	require.True(t, p.blocking)

	p.close()
	require.ErrorIs(t, p.prepareThreadWait(), ErrClosed)
}
