package hand_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// The generated stubs' errors, called as a user of the generated layer
// would, against what the fake provider returns.

// rdma_post_recvv's rdma_seterrno leaves a provider's -ENOMEM (rxe in
// rdma-core 33.2, siw, cxgb4, qedr, erdma, bnxt_re) in errno as is: the
// stub reports ENOMEM, and a failure seen before allocates nothing.
func TestGeneratedCMPostNegativeErrno(t *testing.T) {
	r := sinkRig(t, 0)
	id := r.cmID(t, false)
	sg := new(verbs.SGE) // no Go pointer in it; allocated once, not per call
	*sg = sge(0)
	post := func() error {
		r.fqp.FailRecvCallNegative(0, 0, syscall.ENOMEM)
		return rdmacm.PostRecvv(id, nil, sg, 1)
	}
	err := post()
	require.ErrorIs(t, err, syscall.ENOMEM)
	require.EqualError(t, err, "rdma_post_recvv: cannot allocate memory")
	requireNoAllocs(t, "rdmacm.PostRecvv failing with -ENOMEM", func() {
		if err := post(); !errors.Is(err, syscall.ENOMEM) {
			t.Fatal(err)
		}
	})
}
