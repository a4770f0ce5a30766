package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// A type 1 window over part of an MR lets a peer read that part with the
// window's rkey, and nothing outside it.
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

	read := func(addr uint64, wrID uint64) verbs.WC {
		c, err := hand.NewSendChain(1, 1, 0)
		require.NoError(t, err)
		defer c.Free()
		c.Reserve(1).SetRead(0, wrID, hand.Signaled, r.mr.SGE(32768, 17), addr, rkey)
		require.NoError(t, c.PostSend(b))
		return ctlReap(t, r.cq, 1)[0]
	}
	wc = read(r.mr.Addr()+4096, 1)
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, "inside the window", string(r.mr.Bytes()[32768:32768+17]))

	// Binding with length 0 invalidates the window: the old rkey no longer
	// works. (rxe checks a window's accesses against the whole MR, not the
	// window's bounds, so reading outside them is not tested here.)
	old := rkey
	rkey, err = mw.Bind(a, r.mr, 0, 0, 0, 43)
	require.NoError(t, err)
	require.Equal(t, verbs.WCSuccess, ctlReap(t, r.cq, 1)[0].Status, "unbind completion")
	require.NotEqual(t, old, rkey)
	rkey = old
	wc = read(r.mr.Addr()+4096, 2)
	require.Equal(t, verbs.WCRemAccessErr, wc.Status, "read through an invalidated window")

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
