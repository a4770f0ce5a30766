package hand_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand/internal/fakeprov"
	"github.com/goverbs/goverbs/verberr"
)

// The generated stubs' errors, called as a user of the generated layer
// would, against what the fake provider returns.

// rdma_post_recvv's rdma_seterrno leaves a provider's -ENOMEM (rxe in
// rdma-core 33.2, siw, cxgb4, qedr, erdma, bnxt_re) in errno as is: the
// stub reports ENOMEM, and a failure seen before allocates nothing.
func TestGeneratedCMPostNegativeErrno(t *testing.T) {
	r := sinkRig(t, fakeprov.RC)
	id := r.cmID(t, false)
	sg := new(verbs.SGE) // no Go pointer in it; allocated once, not per call
	*sg = sge(0)
	post := func() error {
		r.fqp.FailRecvCallNegative(0, 0, syscall.ENOMEM)
		return rdmacm.PostRecvv(id, nil, sg, 1)
	}
	err := post()
	require.ErrorIs(t, err, syscall.ENOMEM)
	require.EqualError(t, err, "rdma_post_recvv: cannot allocate memory (ENOMEM)")
	requireNoAllocs(t, "rdmacm.PostRecvv failing with -ENOMEM", func() {
		if err := post(); !errors.Is(err, syscall.ENOMEM) {
			t.Fatal(err)
		}
	})
}

// A provider's negative poll result (mlx5's CQ_POLL_ERR, -2, for a CQE it
// cannot parse) is its own code: verbs.PollCQ, StartPoll and NextPoll
// report it as a code that matches no errno, where it used to read as
// ENOENT, which from StartPoll and NextPoll means an empty CQ (after
// NextPoll, a completion lost unseen). Their positive errnos stay errnos.
func TestGeneratedPollProviderCode(t *testing.T) {
	r := newRig(t, rigOpts{})
	wc := new(verbs.WC)
	var attr verbs.PollCQAttr
	code := func(name string, err error) {
		t.Helper()
		var ve *verberr.Error
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, -2, ve.Code(), name)
		require.Zero(t, ve.Errno(), name)
		require.NotErrorIs(t, err, syscall.ENOENT, "%s: CQ_POLL_ERR reads as an empty CQ", name)
		require.EqualError(t, err, name+": failed: provider code -2")
	}

	r.cq.FailPoll(-2)
	n, err := verbs.PollCQ(r.vcq, 1, wc)
	require.Zero(t, n)
	code("ibv_poll_cq", err)

	require.ErrorIs(t, verbs.StartPoll(r.vcqEx, &attr), syscall.ENOENT, "an empty CQ")
	r.cq.FailStartPollRaw(-2)
	code("ibv_start_poll", verbs.StartPoll(r.vcqEx, &attr))
	r.cq.FailStartPollRaw(int(syscall.EBUSY))
	require.ErrorIs(t, verbs.StartPoll(r.vcqEx, &attr), syscall.EBUSY)

	postRecvs(t, r, 10, 2)
	require.NoError(t, verbs.StartPoll(r.vcqEx, &attr))
	r.cq.FailNextPollRaw(-2)
	code("ibv_next_poll", verbs.NextPoll(r.vcqEx))
	verbs.EndPoll(r.vcqEx)

	// A code seen before allocates nothing, as an errno does.
	requireNoAllocs(t, "verbs.PollCQ failing with a provider code", func() {
		r.cq.FailPoll(-2)
		if _, err := verbs.PollCQ(r.vcq, 1, wc); err == nil {
			t.Fatal("no error")
		}
	})
	requireNoAllocs(t, "verbs.StartPoll failing with a provider code", func() {
		r.cq.FailStartPollRaw(-2)
		if err := verbs.StartPoll(r.vcqEx, &attr); err == nil {
			t.Fatal("no error")
		}
	})
}
