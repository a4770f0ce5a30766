package hand_test

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
)

// pollers returns both pollers over the rig's CQ, so each test runs on both.
func pollers(t *testing.T, r *rig, n int, flags verbs.CreateCQWCFlags) map[string]func() ([]hand.WC, error) {
	t.Helper()
	p, err := hand.NewPollerRaw(r.vcq, n)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	x, err := hand.NewExPollerRaw(r.vcqEx, n, flags)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return map[string]func() ([]hand.WC, error){"poll_cq": p.Poll, "poll_cq_ex": x.Poll}
}

const allFlags = verbs.WCExWithByteLen | verbs.WCExWithImm | verbs.WCExWithQPNum | verbs.WCExWithSrcQP |
	verbs.WCExWithSLID | verbs.WCExWithSL | verbs.WCExWithDLIDPathBits | verbs.WCExWithCompletionTimestamp

func postRecvs(t *testing.T, r *rig, first, n int) {
	t.Helper()
	c, err := hand.NewRecvChain(n, 1)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < n; i++ {
		c.Reserve(1).Set(0, uint64(first+i), sge(i))
	}
	require.NoError(t, c.PostRecvRaw(r.qp))
}

func TestEmptyCQ(t *testing.T) {
	r := newRig(t, rigOpts{})
	for name, poll := range pollers(t, r, 16, allFlags) {
		wcs, err := poll()
		require.NoError(t, err, name)
		require.Empty(t, wcs, name)
	}
}

func TestPollReturnsAtMostN(t *testing.T) {
	r := newRig(t, rigOpts{})
	for name, poll := range pollers(t, r, 16, allFlags) {
		postRecvs(t, r, 100, 40)
		var ids []uint64
		for _, want := range []int{16, 16, 8, 0} {
			wcs, err := poll()
			require.NoError(t, err, name)
			require.Len(t, wcs, want, name)
			for i := range wcs {
				ids = append(ids, wcs[i].WRID())
				require.True(t, wcs[i].OK())
				require.NoError(t, wcs[i].Err())
				require.True(t, wcs[i].IsRecv())
				require.Equal(t, verbs.WCRecv, wcs[i].Opcode())
				require.Equal(t, uint32(64), wcs[i].ByteLen())
				require.Equal(t, r.fqp.Num(), wcs[i].QPNum())
			}
		}
		for i, id := range ids {
			require.Equal(t, uint64(100+i), id, name)
		}
	}
}

func TestEveryErrorStatus(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.fqp.SetRecvCompletion(fakeprov.RecvCompletion{WCFlags: uint32(verbs.WCWithImm), Imm: 1})
	for name, poll := range pollers(t, r, 4, allFlags) {
		for s := verbs.WCLocLenErr; s <= verbs.WCTMRndvIncomplete; s++ {
			r.cq.InjectStatus(1, int(s), 0x100+uint32(s))
			postRecvs(t, r, int(s), 2)
			wcs, err := poll()
			require.NoError(t, err)
			require.Len(t, wcs, 2, "%s status %d", name, s)

			w := &wcs[0]
			require.Equal(t, uint64(s), w.WRID(), "wr_id is trusted")
			require.Equal(t, s, w.Status())
			require.Equal(t, 0x100+uint32(s), w.VendorErr(), "vendor_err is trusted")
			require.Equal(t, r.fqp.Num(), w.QPNum(), "qp_num is trusted")
			require.False(t, w.OK())
			var se hand.StatusError
			require.True(t, errors.As(w.Err(), &se))
			require.Equal(t, s, verbs.WCStatus(se))
			require.NotEmpty(t, w.StatusString())
			require.NotContains(t, w.StatusString(), "unknown", "ibv_wc_status_str knows status %d", s)
			// the fake writes junk where a device leaves values unspecified
			require.Equal(t, hand.OpcodeUnknown, w.Opcode())
			require.Zero(t, w.ByteLen())
			require.Zero(t, w.Flags())
			require.Zero(t, w.SrcQP())
			require.False(t, w.IsRecv())
			require.False(t, w.HasGRH())
			_, ok := w.Imm()
			require.False(t, ok)

			ok2 := &wcs[1]
			require.True(t, ok2.OK(), "injection covers one completion")
			imm, ok := ok2.Imm()
			require.True(t, ok)
			require.Equal(t, uint32(1), imm)
		}
	}
	require.Equal(t, "completion: "+(&hand.WC{}).StatusString(), hand.StatusError(0).Error())
	require.Equal(t, "Work Request Flushed Error", hand.StatusError(verbs.WCWRFlushErr).Error()[len("completion: "):])
}

func TestImmGRHAndSrcQP(t *testing.T) {
	r := newRig(t, rigOpts{typ: fakeprov.UD})
	r.fqp.SetRecvCompletion(fakeprov.RecvCompletion{
		WCFlags: uint32(verbs.WCWithImm), Imm: 0xA1B2C3D4, SrcQP: 0x77, ByteLen: 40 + 5,
	})
	for name, poll := range pollers(t, r, 4, allFlags) {
		postRecvs(t, r, 1, 1)
		wcs, err := poll()
		require.NoError(t, err)
		require.Len(t, wcs, 1)
		w := &wcs[0]
		imm, ok := w.Imm()
		require.True(t, ok, name)
		require.Equal(t, uint32(0xA1B2C3D4), imm, "%s: host order", name)
		require.True(t, w.HasImm())
		require.True(t, w.HasGRH(), "UD receives carry a GRH")
		require.Equal(t, uint32(0x77), w.SrcQP())
		require.Equal(t, verbs.WCGRH|verbs.WCWithImm, w.Flags())

		buf := make([]byte, 64)
		buf[7] = 9 // hop_limit
		copy(buf[40:], "hello")
		grh, payload, err := hand.SplitUD(buf, w)
		require.NoError(t, err)
		require.Equal(t, "hello", string(payload))
		require.NotNil(t, grh)
		require.Equal(t, uint8(9), grh.HopLimit)
		_, _, err = hand.SplitUD(buf[:44], w)
		require.ErrorIs(t, err, hand.ErrUDShort)
	}
	require.Equal(t, verbs.SGE{Addr: 5, Length: 140, LKey: 6}, hand.UDRecvSGE(5, 100, 6))
}

// A UD datagram without a GRH still leaves the buffer's first 40 bytes to
// it: SplitUD returns no GRH and the payload after them. A failed receive
// is ErrUDFailed.
func TestSplitUDWithoutGRHAndFailed(t *testing.T) {
	r := newRig(t, rigOpts{typ: fakeprov.UD})
	r.fqp.SetRecvCompletion(fakeprov.RecvCompletion{ByteLen: 41, NoGRH: true})
	p, err := hand.NewPollerRaw(r.vcq, 4)
	require.NoError(t, err)
	defer p.Close()
	postRecvs(t, r, 0, 1)
	r.cq.InjectStatus(1, int(verbs.WCLocLenErr), 0)
	postRecvs(t, r, 1, 1)
	wcs, err := p.Poll()
	require.NoError(t, err)
	require.Len(t, wcs, 2)
	require.False(t, wcs[0].HasGRH())
	buf := make([]byte, 64)
	buf[hand.GRHSize] = 'x'
	grh, payload, err := hand.SplitUD(buf, &wcs[0])
	require.NoError(t, err)
	require.Nil(t, grh, "IBV_WC_GRH is clear")
	require.Equal(t, []byte("x"), payload, "the payload after the GRH's room")
	_, _, err = hand.SplitUD(make([]byte, 64), &wcs[1])
	require.ErrorIs(t, err, hand.ErrUDFailed)
}

func TestCQFillUp(t *testing.T) {
	for _, name := range []string{"poll_cq", "poll_cq_ex"} {
		r := newRig(t, rigOpts{cqe: 16})
		poll := pollers(t, r, 64, allFlags)[name]
		postRecvs(t, r, 0, 16)
		require.Equal(t, 16, r.cq.Pending())
		require.False(t, r.cq.Overrun(), "a full CQ is not an overrun")
		wcs, err := poll()
		require.NoError(t, err)
		require.Len(t, wcs, 16, name)

		postRecvs(t, r, 16, 20)
		require.True(t, r.cq.Overrun(), "the 17th completion overruns the CQ")
		require.Equal(t, uint64(4), r.cq.Stats().Dropped)
		wcs, err = poll()
		require.NoError(t, err)
		require.Len(t, wcs, 16)
		for i := range wcs {
			require.Equal(t, uint64(16+i), wcs[i].WRID(), "the completions that fit survive")
		}
		wcs, err = poll()
		require.NoError(t, err)
		require.Empty(t, wcs)
	}
}

func TestExPollerSelectsFields(t *testing.T) {
	r := newRig(t, rigOpts{typ: fakeprov.UD})
	r.fqp.SetRecvCompletion(fakeprov.RecvCompletion{WCFlags: uint32(verbs.WCWithImm), Imm: 3, SrcQP: 0x55})
	// pollWith posts n receives and polls them with a new ExPoller
	// reading the fields flags select.
	pollWith := func(flags verbs.CreateCQWCFlags, n int) (*hand.ExPoller, []hand.WC) {
		x, err := hand.NewExPollerRaw(r.vcqEx, 8, flags)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		postRecvs(t, r, 0, n)
		wcs, err := x.Poll()
		require.NoError(t, err)
		require.Len(t, wcs, n)
		return x, wcs
	}
	x, wcs := pollWith(0, 2)
	require.Zero(t, wcs[0].ByteLen(), "not selected")
	require.Zero(t, wcs[0].QPNum(), "not selected")
	require.Zero(t, wcs[0].SrcQP(), "not selected")
	_, ok := wcs[0].Imm()
	require.False(t, ok, "the immediate data was not selected: no (0, true)")
	require.False(t, wcs[0].HasImm(), "nor a flag announcing it")
	require.True(t, wcs[0].HasGRH(), "the other flags stay: wc_flags are always read")
	require.Equal(t, verbs.WCRecv, wcs[0].Opcode(), "the opcode is always read")
	require.Zero(t, x.Timestamp(0))

	_, wcs = pollWith(verbs.WCExWithImm, 1)
	imm, ok := wcs[0].Imm()
	require.True(t, ok)
	require.Equal(t, uint32(3), imm, "selected")

	ts, _ := pollWith(verbs.WCExWithCompletionTimestamp, 3)
	require.NotZero(t, ts.Timestamp(0))
	require.Greater(t, ts.Timestamp(2), ts.Timestamp(1))
}

func TestUseAfterClose(t *testing.T) {
	r := newRig(t, rigOpts{})
	p, err := hand.NewPollerRaw(r.vcq, 1)
	require.NoError(t, err)
	p.Close()
	_, err = p.Poll()
	require.ErrorIs(t, err, hand.ErrClosed)
	x, err := hand.NewExPollerRaw(r.vcqEx, 1, 0)
	require.NoError(t, err)
	x.Close()
	_, err = x.Poll()
	require.ErrorIs(t, err, hand.ErrClosed)
}

func TestConstructorsRejectBadSizes(t *testing.T) {
	_, err := hand.NewRecvChain(0, 1)
	require.Error(t, err)
	_, err = hand.NewSendChain(1, 0, 0)
	require.Error(t, err)
	_, err = hand.NewPollerRaw(nil, 1)
	require.Error(t, err)
	_, err = hand.NewExPollerRaw(nil, 1, 0)
	require.Error(t, err)
}

// PollSpin polls in C until a poll finds completions, at most polls times,
// and returns what that poll returned; both pollers.
func TestPollSpin(t *testing.T) {
	r := newRig(t, rigOpts{})
	p, err := hand.NewPollerRaw(r.vcq, 16)
	require.NoError(t, err)
	defer p.Close()
	x, err := hand.NewExPollerRaw(r.vcqEx, 16, allFlags)
	require.NoError(t, err)
	defer x.Close()
	polls := func() uint64 { return r.cq.Stats().Polls }
	for _, c := range []struct {
		name  string
		spin  func(int) ([]hand.WC, error)
		errno int // what PollError.Ret says of FailPoll(-5)
		close func() error
	}{
		{"poll_cq", p.PollSpin, -5, p.Close},
		{"poll_cq_ex", x.PollSpin, 5, x.Close},
	} {
		// spin polls with c.spin(n), which must not fail, and returns
		// what it reaped and how many polls that took.
		spin := func(n int) ([]hand.WC, uint64) {
			before := polls()
			wcs, err := c.spin(n)
			require.NoError(t, err, c.name)
			return wcs, polls() - before
		}
		wcs, n := spin(8)
		require.Empty(t, wcs, c.name)
		require.Equal(t, uint64(8), n, "%s: an empty CQ is polled polls times", c.name)

		postRecvs(t, r, 100, 3)
		r.cq.HoldPolls(5)
		wcs, n = spin(10)
		require.Len(t, wcs, 3, c.name)
		for i := range wcs {
			require.Equal(t, uint64(100+i), wcs[i].WRID(), c.name)
		}
		require.Equal(t, uint64(6), n, "%s: stops at the first poll that finds completions", c.name)

		postRecvs(t, r, 200, 1)
		r.cq.HoldPolls(5)
		wcs, n = spin(3)
		require.Empty(t, wcs, "%s: the budget ran out first", c.name)
		require.Equal(t, uint64(3), n, c.name)
		wcs, _ = spin(3)
		require.Len(t, wcs, 1, c.name)
		require.Equal(t, uint64(200), wcs[0].WRID(), c.name)

		postRecvs(t, r, 300, 2)
		r.cq.HoldPolls(1)
		r.cq.FailPoll(-5)
		before := polls()
		wcs, err := c.spin(10)
		require.Empty(t, wcs, c.name)
		var pe *hand.PollError
		require.ErrorAs(t, err, &pe, c.name)
		require.Equal(t, c.errno, pe.Ret, c.name)
		require.Equal(t, uint64(2), polls()-before, "%s: stops at the failing poll", c.name)
		wcs, _ = spin(1)
		require.Len(t, wcs, 2, "%s: a failed poll loses no completion", c.name)

		// More polls than C's int holds: not 2^32 -> 0 (nothing polled).
		postRecvs(t, r, 400, 1)
		wcs, _ = spin(1 << 32)
		require.Len(t, wcs, 1, "%s: spin(2^32)", c.name)

		_, err = c.spin(0)
		var ae *hand.AttrError
		require.ErrorAs(t, err, &ae, c.name)
		require.Equal(t, "polls", ae.Field, c.name)

		c.close()
		_, err = c.spin(4)
		require.ErrorIs(t, err, hand.ErrClosed, c.name)
	}
}

// exPolls returns Poll and PollSpin of an extended poller of n entries
// over the rig's CQ, so each test runs on both.
func exPolls(t *testing.T, r *rig, n int) map[string]func() ([]hand.WC, error) {
	t.Helper()
	x, err := hand.NewExPollerRaw(r.vcqEx, n, allFlags)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return map[string]func() ([]hand.WC, error){
		"Poll":     x.Poll,
		"PollSpin": func() ([]hand.WC, error) { return x.PollSpin(4) },
	}
}

// wrIDs polls until a poll finds the CQ empty and returns the wr_ids reaped.
func wrIDs(t *testing.T, poll func() ([]hand.WC, error)) []uint64 {
	t.Helper()
	var ids []uint64
	for {
		wcs, err := poll()
		require.NoError(t, err)
		if len(wcs) == 0 {
			return ids
		}
		for i := range wcs {
			ids = append(ids, wcs[i].WRID())
		}
	}
}

// ibv_start_poll's failure is reported with the raw value the provider
// returned, whatever its sign: mlx5, mlx4 and hns return CQ_POLL_ERR (-2,
// which is also -ENOENT) for a CQE they cannot parse, irdma -EINVAL. The
// poll returns no completion, not the last poll's again, and does not
// panic on a poller smaller than the value.
func TestExPollStartPollFailsRaw(t *testing.T) {
	for _, c := range []struct{ n, ret int }{
		{16, -2},
		{1, -int(syscall.EINVAL)},
		{16, int(syscall.EIO)},
	} {
		for _, name := range []string{"Poll", "PollSpin"} {
			t.Run(fmt.Sprintf("%s/n=%d/ret=%d", name, c.n, c.ret), func(t *testing.T) {
				r := newRig(t, rigOpts{})
				poll := exPolls(t, r, c.n)[name]
				postRecvs(t, r, 10, 3)
				require.Equal(t, []uint64{10, 11, 12}, wrIDs(t, poll))

				postRecvs(t, r, 20, 2)
				r.cq.FailStartPollRaw(c.ret)
				wcs, err := poll()
				require.Nil(t, wcs)
				var pe *hand.PollError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, "ibv_start_poll", pe.Op)
				require.Equal(t, c.ret, pe.Ret, "the raw value")
				require.Equal(t, []uint64{20, 21}, wrIDs(t, poll), "the failed start_poll consumed nothing")
			})
		}
	}
}

// A failure of ibv_next_poll after the first completion: the completion
// read before it comes first, the *PollError at the next call, which polls
// nothing, then what follows the completion the provider consumed with
// the failure (mlx5's is gone).
func TestExPollNextPollFails(t *testing.T) {
	for _, ret := range []int{-2, int(syscall.EIO)} {
		for _, name := range []string{"Poll", "PollSpin"} {
			t.Run(fmt.Sprintf("%s/ret=%d", name, ret), func(t *testing.T) {
				r := newRig(t, rigOpts{})
				poll := exPolls(t, r, 16)[name]
				postRecvs(t, r, 30, 3)
				r.cq.FailNextPollRaw(ret)
				wcs, err := poll()
				require.NoError(t, err)
				require.Len(t, wcs, 1)
				require.Equal(t, uint64(30), wcs[0].WRID())

				before := r.cq.Stats().Polls
				wcs, err = poll()
				require.Nil(t, wcs)
				var pe *hand.PollError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, "ibv_next_poll", pe.Op)
				require.Equal(t, ret, pe.Ret, "the raw value")
				require.Equal(t, before, r.cq.Stats().Polls, "the error comes without a poll")

				require.Equal(t, []uint64{32}, wrIDs(t, poll), "reported once; 31 went with the failure")
			})
		}
	}
}

// PollError unwraps to the errno an extended poll returned (EBUSY, which
// the man page says to retry, among them), and to nothing for a negative
// value, a provider's own code (-2 is not ENOENT: the CQ was not empty),
// or for ibv_poll_cq's negative return.
func TestPollErrorUnwrap(t *testing.T) {
	r := newRig(t, rigOpts{})
	for name, poll := range exPolls(t, r, 4) {
		r.cq.FailStartPollRaw(int(syscall.EBUSY))
		_, err := poll()
		require.ErrorIs(t, err, syscall.EBUSY, name)

		postRecvs(t, r, 0, 2)
		r.cq.FailNextPollRaw(int(syscall.EIO))
		_, err = poll()
		require.NoError(t, err, name)
		_, err = poll()
		require.ErrorIs(t, err, syscall.EIO, name)

		r.cq.FailStartPollRaw(-2)
		_, err = poll()
		var pe *hand.PollError
		require.ErrorAs(t, err, &pe, name)
		require.NotErrorIs(t, err, syscall.ENOENT, name)
		require.Nil(t, errors.Unwrap(err), name)
	}
	p, err := hand.NewPollerRaw(r.vcq, 4)
	require.NoError(t, err)
	defer p.Close()
	r.cq.FailPoll(-int(syscall.EIO))
	_, err = p.Poll()
	var pe *hand.PollError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "ibv_poll_cq", pe.Op)
	require.Nil(t, errors.Unwrap(err), "ibv_poll_cq's return is not an errno")
}

// A poller's size must fit C's int, and its arrays' bytes a uintptr: a
// larger n is EINVAL, not a truncated count or a wrapped size (2^61 WCs
// are 0 bytes mod 2^64).
func TestPollerSizeBound(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, n := range []int{math.MaxInt32 + 1, 1 << 61, math.MaxInt} {
		t.Run(fmt.Sprintf("NewPollerRaw/%d", n), func(t *testing.T) {
			p, err := hand.NewPollerRaw(r.vcq, n)
			if err == nil {
				p.Close()
			}
			require.ErrorIs(t, err, syscall.EINVAL)
		})
		t.Run(fmt.Sprintf("NewExPollerRaw/%d", n), func(t *testing.T) {
			x, err := hand.NewExPollerRaw(r.vcqEx, n, allFlags)
			if err == nil {
				x.Close()
			}
			require.ErrorIs(t, err, syscall.EINVAL)
		})
	}
}
