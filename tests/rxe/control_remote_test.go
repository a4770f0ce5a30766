package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// hand.RemoteBuffer end to end, as hand's ExampleMR_Remote and
// ExampleRemoteBuffer use it: the server advertises a part of its MR in
// its accept's private data; the client decodes it, writes into a Slice
// of it with immediate data (which the server's receive reports) and reads
// it back; a Slice past the advertised part, though within the MR, is
// refused before anything is posted.
func TestControlCMRemoteBuffer(t *testing.T) {
	_, pd, cq, smr := cmShared(t)
	cmr, err := pd.Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, cmr)

	advertised, err := smr.Remote().Slice(1024, 4096)
	require.NoError(t, err)
	adv, err := advertised.MarshalBinary()
	require.NoError(t, err)
	l := ctlListen(t)
	srvc := ctlServe(t, l, func(*hand.ConnRequest) hand.ConnConfig {
		return hand.ConnConfig{PD: pd, SendCQ: cq, PrivateData: adv}
	})
	ctx := ctlContext(t, 20*time.Second)
	cli, err := hand.Dial(ctx, l.Addr().String(), hand.ConnConfig{PD: pd, SendCQ: cq})
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	srv := <-srvc
	require.NotNil(t, srv)
	ctlCloseLater(t, srv)

	var remote hand.RemoteBuffer
	require.NoError(t, remote.UnmarshalBinary(cli.PeerPrivateData()[:hand.RemoteBufferSize]))
	require.Equal(t, advertised, remote)
	require.Equal(t, smr.Addr()+1024, remote.Addr())
	require.Equal(t, smr.RKey(), remote.RKey())

	recv, err := hand.NewRecvChain(1, 1)
	require.NoError(t, err)
	defer recv.Close()
	recv.Reserve(1).Set(0, 0x5e, smr.SGE(0, 0))
	require.NoError(t, recv.PostRecv(srv.QP()))

	const msg, off = "written into a RemoteBuffer", 100
	copy(cmr.Bytes(), msg)
	dst, err := remote.Slice(off, len(msg))
	require.NoError(t, err)
	send, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer send.Close()
	send.Reserve(1).SetWriteImmTo(0, 0xc1, hand.Signaled, off, cmr.SGE(0, len(msg)), dst)
	require.NoError(t, send.PostSend(cli.QP()))
	var sawWrite, sawRecv bool
	for _, wc := range ctlReap(t, cq, 2) {
		require.Equal(t, verbs.WCSuccess, wc.Status, "WR %#x", wc.WRID)
		switch wc.WRID {
		case 0xc1:
			require.Equal(t, hand.OpcodeRDMAWrite, wc.Opcode)
			sawWrite = true
		case 0x5e:
			require.Equal(t, hand.OpcodeRecvRDMAWithImm, wc.Opcode)
			require.Equal(t, uint32(len(msg)), wc.ByteLen)
			require.Equal(t, uint32(off), wc.ImmData.Native())
			sawRecv = true
		}
	}
	require.True(t, sawWrite && sawRecv, "the write's completion and the server's receive")
	require.Equal(t, msg, string(smr.Bytes()[1024+off:1024+off+len(msg)]), "landed at the advertised part's offset")

	// Read it back into the client's MR, 2048 bytes in.
	send.Reserve(1).SetReadFrom(0, 0xc2, hand.Signaled, cmr.SGE(2048, len(msg)), dst)
	require.NoError(t, send.PostSend(cli.QP()))
	wc := ctlReap(t, cq, 1)[0]
	require.Equal(t, verbs.WCSuccess, wc.Status)
	require.Equal(t, hand.OpcodeRDMARead, wc.Opcode)
	require.Equal(t, msg, string(cmr.Bytes()[2048:2048+len(msg)]))

	// Within the server's MR, past what it advertised: refused here.
	_, err = remote.Slice(4096-8, 16)
	require.Error(t, err)
	require.Panics(t, func() { send.Reserve(1).SetWriteTo(0, 0xc3, hand.Signaled, cmr.SGE(0, 4097), remote) })
	send.Reset() // the refused WR's slot
}
