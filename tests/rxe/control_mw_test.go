package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A type 1 window over part of an MR lets a peer read that part with the
// window's rkey, and binding it with length 0 invalidates it: a read with
// the rkey that bind returned fails with IBV_WC_REM_ACCESS_ERR. rxe (Linux
// 6.1, the VM's) does not enforce the window's bounds: it checks a
// window's accesses against the whole MR, so a read outside the window,
// inside the MR, succeeds; the test requires that, so that a kernel that
// enforces them is noticed (and this said otherwise).
func TestControlMemoryWindow(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	mw, err := r.pd.NewMW(verbs.MWType1)
	if requireNotSupportedBefore(t, err, "ibv_alloc_mw") {
		return
	}
	ctlCloseLater(t, mw)
	before := mw.RKey()

	copy(r.mr.Bytes()[4096:], "inside the window")
	rkey, err := mw.Bind(a, r.mr, 4096, 4096, hand.AccessRemoteRead, 42)
	require.NoError(t, err)
	wc := ctlReap(t, r.cq, 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status, "bind completion")
	require.Equal(t, uint64(42), wc.WRID)
	require.NotEqual(t, before, rkey, "each bind makes a new rkey")
	require.Equal(t, rkey, mw.RKey())

	// read has b RDMA-read 17 bytes at addr with key into offset 32768.
	read := func(addr uint64, key uint32, wrID uint64) verbs.WC {
		c, err := hand.NewSendChain(1, 1, 0)
		require.NoError(t, err)
		defer c.Close()
		c.Reserve(1).SetRead(0, wrID, hand.Signaled, r.mr.SGE(32768, 17), addr, key)
		require.NoError(t, c.PostSend(b))
		return ctlReap(t, r.cq, 1)[0]
	}
	wc = read(r.mr.Addr()+4096, rkey, 1)
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, "inside the window", string(r.mr.Bytes()[32768:32768+17]))

	copy(r.mr.Bytes()[1024:], "outside the window")
	wc = read(r.mr.Addr()+1024, rkey, 2)
	require.Equal(t, verbs.WCSuccess, wc.Status,
		"rxe let a window's rkey read anywhere in the MR; now it refuses outside the window (%s): require that here and in the comment", hand.StatusError(wc.Status))
	require.Equal(t, "outside the windo", string(r.mr.Bytes()[32768:32768+17]))

	// Binding with length 0 invalidates the window: the rkey that bind
	// returns (each bind makes a new one) reads nothing.
	old := rkey
	rkey, err = mw.Bind(a, r.mr, 0, 0, 0, 43)
	require.NoError(t, err)
	require.Equal(t, verbs.WCSuccess, ctlReap(t, r.cq, 1)[0].Status, "unbind completion")
	require.NotEqual(t, old, rkey)
	wc = read(r.mr.Addr()+4096, rkey, 3)
	require.Equal(t, verbs.WCRemAccessErr, wc.Status, "read through an invalidated window: %s", hand.StatusError(wc.Status))

	_, err = mw.Bind(a, r.mr, 60000, 10000, hand.AccessRemoteRead, 43)
	var ae *hand.AttrError
	require.ErrorAs(t, err, &ae, "window past the MR's end")

	mw2, err := r.pd.NewMW(verbs.MWType2)
	require.NoError(t, err)
	_, err = mw2.Bind(a, r.mr, 0, 4096, hand.AccessRemoteRead, 44)
	require.ErrorAs(t, err, &ae, "type 2 windows bind through a work request")
	require.NoError(t, mw2.Close())
	require.NoError(t, mw2.Close())
	_, err = mw2.Bind(a, r.mr, 0, 4096, hand.AccessRemoteRead, 45)
	require.ErrorIs(t, err, hand.ErrClosed)
}
