package cross

import (
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"testing"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

const (
	rcRounds = 16
	rcChain  = 64   // WRs per chain
	rcSlot   = 4096 // bytes per receive buffer, and the largest message
)

// connectRC makes an RC QP on r, exchanges endpoints with the peer over
// the control channel and connects the QP to the peer's (hand.QP.Connect),
// granting access. It checks that the peer's GID is the RoCE v2 GID of
// its address and that the QP points at the peer.
func connectRC(t *testing.T, p *Peer, r *rig, send, recv *cq, wr int, access hand.Access) *hand.QP {
	t.Helper()
	qp := r.qp(t, hand.RC, send, recv, wr)
	psn := hand.RandomPSN()
	remote := p.ExchangeEndpoint(hand.Endpoint{QPN: qp.Num(), PSN: psn, GID: r.gid})
	if remote.GID != hand.GIDFromAddr(p.PeerAddr) {
		t.Fatalf("the peer's endpoint has GID %v, want the RoCE v2 GID of %v", remote.GID, p.PeerAddr)
	}
	if err := qp.Connect(hand.ConnectAttr{SGIDIndex: p.GIDIndex, Access: access, PSN: psn, Remote: remote}); err != nil {
		t.Fatalf("QP.Connect to %+v: %v", remote, err)
	}
	attr, _, err := qp.Query()
	if err != nil {
		t.Fatalf("QP.Query: %v", err)
	}
	if attr.QPState != verbs.QPSRts || attr.DestQPNum != remote.QPN || attr.AHAttr.GRH.DGID != remote.GID.Raw() ||
		int(attr.AHAttr.GRH.SGIDIndex) != p.GIDIndex || attr.SQPSN != psn || attr.RQPSN != remote.PSN {
		t.Fatalf("QP %d after Connect: state %d dest QPN %d SGID index %d SQ PSN %#x RQ PSN %#x; want RTS, %d, %d, %#x, %#x",
			qp.Num(), attr.QPState, attr.DestQPNum, attr.AHAttr.GRH.SGIDIndex, attr.SQPSN, attr.RQPSN, remote.QPN, p.GIDIndex, psn, remote.PSN)
	}
	t.Logf("RC QP %d (%v, PSN %#x) connected to QP %d (%v, PSN %#x)", qp.Num(), r.gid, psn, remote.QPN, remote.GID, remote.PSN)
	return qp
}

// RC send and receive across the hosts through hand's chains: the QPs are
// connected by exchanging hand.Endpoints over the control channel, then in
// each of rcRounds rounds both sides post a 64-WR RecvChain, meet at a
// barrier, and post a 64-WR SendChain (every eighth WR a send with
// immediate data) at the same time. Every message of 1 to 4096 bytes
// arrives in order, with its length, its immediate data and its bytes.
func TestCrossRCChains(t *testing.T) {
	p := ConnectPeer(t)
	ctx := p.Context()
	r := openRig(t, p)
	scq, rcq := r.cq(t, rcChain), r.cq(t, rcChain)
	qp := connectRC(t, p, r, scq, rcq, rcChain, hand.AccessLocalWrite)
	bufs := r.mr(t, 2*rcChain*rcSlot) // receive slots, then send slots
	buf := bufs.Bytes()
	rc, sc := testkit.RecvChain(t, rcChain, 1), testkit.SendChain(t, rcChain, 1)

	var sent, got int64
	var busy time.Duration // from the barrier to the last completion, each round
	for round := range rcRounds {
		rv := rc.Reserve(rcChain)
		for i := range rcChain {
			rv.Set(i, uint64(round<<16|i), bufs.SGE(i*rcSlot, rcSlot))
		}
		if err := rc.PostRecv(qp); err != nil {
			t.Fatalf("round %d: RecvChain.PostRecv: %v", round, err)
		}
		p.Barrier(fmt.Sprintf("round %d: receives posted", round))

		start := time.Now()
		sv := sc.Reserve(rcChain)
		for i := range rcChain {
			k := round*rcChain + i
			off, n := (rcChain+i)*rcSlot, msgSize(k, rcSlot)
			Fill(buf[off:off+n], seedOf(p.Role, testRC, k))
			if i%8 == 7 {
				sv.SetSendImm(i, uint64(1<<32|k), verbs.SendSignaled, uint32(k), bufs.SGE(off, n))
			} else {
				sv.SetSend(i, uint64(1<<32|k), verbs.SendSignaled, bufs.SGE(off, n))
			}
			sent += int64(n)
		}
		if err := sc.PostSend(qp); err != nil {
			t.Fatalf("round %d: SendChain.PostSend: %v", round, err)
		}
		sends := scq.reap(t, ctx, rcChain, fmt.Sprintf("round %d sends", round))
		mustOK(t, "sends", sends, verbs.WCSend)
		recvs := rcq.reap(t, ctx, rcChain, fmt.Sprintf("round %d receives", round))
		mustOK(t, "receives", recvs, verbs.WCRecv)
		busy += time.Since(start)

		for i := range rcChain {
			k := round*rcChain + i
			n := msgSize(k, rcSlot)
			if s := &sends[i]; s.WRID() != uint64(1<<32|k) {
				t.Fatalf("round %d: send completion %d has wr_id %#x, want %#x", round, i, s.WRID(), 1<<32|k)
			}
			w := &recvs[i]
			if w.WRID() != uint64(round<<16|i) || int(w.ByteLen()) != n || w.QPNum() != qp.Num() {
				t.Fatalf("round %d: receive %d: wr_id %#x byte_len %d qp %d; want %#x, %d, %d (RC receives complete in order)",
					round, i, w.WRID(), w.ByteLen(), w.QPNum(), round<<16|i, n, qp.Num())
			}
			imm, ok := w.Imm()
			if want := i%8 == 7; ok != want || (ok && imm != uint32(k)) {
				t.Fatalf("round %d: receive %d: immediate data %#x (%v), want %v", round, i, imm, ok, want)
			}
			testkit.SameBytes(t, fmt.Sprintf("round %d: message %d from the %s", round, i, p.PeerRole()),
				buf[i*rcSlot:i*rcSlot+n], pattern(seedOf(p.PeerRole(), testRC, k), n))
			got += int64(n)
		}
	}
	// The last receive completion here can come before this side's ACK of
	// it has left: the peer's sends are done only when it has reaped them.
	p.Barrier("done")
	msgs := rcRounds * rcChain
	t.Logf("%d rounds of 64-WR chains: %d messages (%d bytes) sent and %d (%d bytes) received and verified byte for byte; "+
		"%v from barrier to last completion (%.0f messages/s, %s both ways)",
		rcRounds, msgs, sent, msgs, got, busy.Round(time.Millisecond), float64(2*msgs)/busy.Seconds(), rate(sent+got, busy.Seconds()))
}
