package rxe

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// RecvChain.PostRecvv on a Conn whose QP was made on an SRQ
// (ConnConfig.SRQ) reaches the SRQ. rdma_post_recvv posts to id->srq, which
// only rdma_create_srq sets; hand makes the SRQ itself, so id->srq is NULL
// and librdmacm alone would post to the QP, which refuses it (EINVAL).
// Injected: three receives posted with PostRecvv on the server's Conn.
// Measured: the client's three sends arrive in the SRQ's buffers, and
// PostRecv on the QP itself is refused by name.
func TestControlCMPostRecvvSRQ(t *testing.T) {
	l := ctlListen(t)
	type server struct {
		conn *hand.Conn
		mr   *hand.MR
		cq   *hand.CQ
	}
	srvc := make(chan server, 1)
	go func() {
		defer close(srvc)
		ctx := ctlContext(t, 20*time.Second)
		req, err := l.Accept(ctx)
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		cctx := req.Context()
		pd, err := cctx.AllocPD()
		if err == nil {
			ctlCloseLater(t, pd)
		}
		var srq *hand.SRQ
		if err == nil {
			if srq, err = pd.NewSRQ(hand.SRQConfig{MaxWR: 16, MaxSGE: 1}); err == nil {
				ctlCloseLater(t, srq)
			}
		}
		var cq *hand.CQ
		if err == nil {
			if cq, err = cctx.NewCQ(32, hand.CQOptions{}); err == nil {
				ctlCloseLater(t, cq)
			}
		}
		var mr *hand.MR
		if err == nil {
			if mr, err = pd.Alloc(3*1024, hand.AccessLocalWrite); err == nil {
				ctlCloseLater(t, mr)
			}
		}
		if err != nil {
			t.Errorf("server resources: %v", err)
			req.Reject(nil)
			return
		}
		c, err := req.Accept(ctx, hand.ConnConfig{PD: pd, SendCQ: cq, SRQ: srq})
		if err != nil {
			t.Errorf("ConnRequest.Accept: %v", err)
			return
		}
		srvc <- server{c, mr, cq}
	}()
	cli, err := hand.Dial(ctlContext(t, 20*time.Second), l.Addr().String(), hand.ConnConfig{})
	require.NoError(t, err)
	ctlCloseLater(t, cli)
	srv, ok := <-srvc
	require.True(t, ok, "the server did not accept")
	ctlCloseLater(t, srv.conn)

	rc, err := hand.NewRecvChain(3, 1)
	require.NoError(t, err)
	defer rc.Close()
	v := rc.Reserve(3)
	for i := range 3 {
		v.Set(i, uint64(100+i), srv.mr.SGE(i*1024, 1024))
	}
	require.NoError(t, rc.PostRecvv(srv.conn), "PostRecvv to a Conn with an SRQ")

	// Posting to the QP of an SRQ is refused before C, with the reason.
	rc.Reserve(1).Set(0, 199, srv.mr.SGE(0, 16))
	err = rc.PostRecv(srv.conn.QP())
	var attr *hand.AttrError
	require.ErrorAs(t, err, &attr)
	require.ErrorIs(t, err, syscall.EINVAL)
	t.Log(err)

	cmr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
	require.NoError(t, err)
	ctlCloseLater(t, cmr)
	for i := range 3 {
		msg := fmt.Sprintf("to the SRQ, message %d", i)
		copy(cmr.Bytes()[i*64:], msg)
		ctlPostSend(t, cli.QP(), cmr, uint64(i), i*64, len(msg))
	}
	for _, wc := range ctlReap(t, cli.SendCQ(), 3) {
		require.Equal(t, hand.StatusSuccess, wc.Status, "client send %d", wc.WRID)
	}
	got := ctlReap(t, srv.cq, 3)
	for i, wc := range got {
		require.Equal(t, hand.StatusSuccess, wc.Status)
		require.Equal(t, uint64(100+i), wc.WRID, "the SRQ's receives complete in order")
		want := fmt.Sprintf("to the SRQ, message %d", i)
		require.Equal(t, want, string(srv.mr.Bytes()[i*1024:i*1024+int(wc.ByteLen)]))
		require.Equal(t, srv.conn.QP().Num(), wc.QPNum)
	}
	t.Logf("3 messages received through PostRecvv into SRQ buffers of QP %d", srv.conn.QP().Num())
}

// The rdma_create_ep server posts its receives between GetRequest and
// Accept, as rdma_server does, so a client that sends the moment DialEP
// returns finds them, even with no RNR retries at all. Injected: both
// sides' RNRRetryCount = NoRetry, 8 sends posted at once by the client.
// Measured: all 8 arrive. The control, a server that posts only once the
// client's first send has failed, shows that without the early posts that
// send fails with RNR_RETRY_EXC_ERR under the same retry count.
func TestControlCMEPPostBeforeAccept(t *testing.T) {
	const msgs = 8
	for _, early := range []bool{true, false} {
		t.Run(map[bool]string{true: "posted before accept", false: "posted late"}[early], func(t *testing.T) {
			l := cmepListen(t, hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: msgs, MaxRecvWR: msgs}, RNRRetryCount: hand.NoRetry})
			mr, err := l.PD().Alloc(msgs*256, hand.AccessLocalWrite)
			require.NoError(t, err)
			ctlCloseLater(t, mr)
			srvc := make(chan *hand.Conn, 1)
			// Late: the server posts once the test has seen the client's
			// first send fail (sawFailure), and says how that went (posted).
			sawFailure, posted := make(chan struct{}), make(chan error, 1)
			go func() {
				defer close(srvc)
				ctx := ctlContext(t, 20*time.Second)
				req, err := l.GetRequest(ctx)
				if err != nil {
					t.Errorf("GetRequest: %v", err)
					return
				}
				post := func() error {
					rc, err := hand.NewRecvChain(msgs, 1)
					if err != nil {
						return err
					}
					defer rc.Close()
					v := rc.Reserve(msgs)
					for i := range msgs {
						v.Set(i, uint64(i), mr.SGE(i*256, 256))
					}
					return rc.PostRecv(req.Conn().QP())
				}
				if early {
					if err := post(); err != nil {
						t.Errorf("posting before accept: %v", err)
						req.Reject(nil)
						return
					}
				}
				c, err := req.Accept(ctx)
				if err != nil {
					t.Errorf("EPRequest.Accept: %v", err)
					return
				}
				srvc <- c
				if !early {
					select {
					case <-sawFailure:
						posted <- post()
					case <-ctx.Done():
						posted <- ctx.Err()
					}
				}
			}()
			cli, err := hand.DialEP(ctlContext(t, 20*time.Second), l.Addr().String(),
				hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: msgs, MaxRecvWR: 1}, RNRRetryCount: hand.NoRetry})
			require.NoError(t, err)
			ctlCloseLater(t, cli)
			cmr, err := cli.PD().Alloc(4096, hand.AccessLocalWrite)
			require.NoError(t, err)
			ctlCloseLater(t, cmr)
			sc, err := hand.NewSendChain(msgs, 1, 0)
			require.NoError(t, err)
			defer sc.Close()
			v := sc.Reserve(msgs)
			for i := range msgs {
				msg := fmt.Sprintf("early message %d", i)
				copy(cmr.Bytes()[i*64:], msg)
				v.SetSend(i, uint64(i), hand.Signaled, cmr.SGE(i*64, len(msg)))
			}
			require.NoError(t, sc.PostSend(cli.QP()), "the client sends the moment DialEP returns")
			wcs := ctlReap(t, cli.SendCQ(), 1)
			srv := <-srvc
			require.NotNil(t, srv)
			ctlCloseLater(t, srv)
			if !early {
				require.Equal(t, hand.StatusRNRRetryExcErr, wcs[0].Status,
					"a send that met no receive, with no RNR retries, must fail: got %s", wcStatus(wcs[0].Status))
				close(sawFailure)
				require.NoError(t, <-posted, "posting after the failure")
				t.Logf("control: with no receive posted, the client's first send completed with %s", wcStatus(wcs[0].Status))
				return
			}
			wcs = append(wcs, ctlReap(t, cli.SendCQ(), msgs-1)...)
			for _, wc := range wcs {
				require.Equal(t, hand.StatusSuccess, wc.Status, "send %d: %s", wc.WRID, wcStatus(wc.Status))
			}
			got := ctlReap(t, srv.RecvCQ(), msgs)
			for i, wc := range got {
				require.Equal(t, hand.StatusSuccess, wc.Status)
				require.Equal(t, uint64(i), wc.WRID)
				require.Equal(t, fmt.Sprintf("early message %d", i), string(mr.Bytes()[i*256:i*256+int(wc.ByteLen)]))
			}
			t.Logf("%d sends posted at once by the client, with RNR retry 0: all received", msgs)
		})
	}
}

// wcStatus names a completion status for a message.
func wcStatus(s hand.WCStatus) string { return hand.StatusError(s).Error() }
