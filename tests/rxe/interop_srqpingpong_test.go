package rxe

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/internal/pingaddr"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// rdma-core's ibv_srq_pingpong with several QPs against a Go side that
// speaks its side channel through package pingaddr (256 addresses each
// way, the unused ones zero, then "done") and its data path with one RC QP
// per C QP. Each side must learn the other's addresses exactly as the other
// printed them, and the ping-pong must complete on every QP.

const (
	srqQPs   = 4
	srqIters = 40
	srqSize  = 1024
)

func srqArgs(device string, gidIndex, port int) []string {
	return []string{"-d", device, "-g", strconv.Itoa(gidIndex), "-p", strconv.Itoa(port),
		"-q", strconv.Itoa(srqQPs), "-n", strconv.Itoa(srqIters), "-s", strconv.Itoa(srqSize)}
}

func TestInteropSRQPingpongCServerGoClient(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	const port = 18604
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := tooltest.StartC(t, ctx, "C server", "ibv_srq_pingpong", srqArgs(device, gidIndex, port)...)
	if err := listenwait.TCP(ctx, port); err != nil {
		t.Fatalf("ibv_srq_pingpong server: %v; output:\n%s", err, c.Wait().Out)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort(localAddr(), strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	my, rem, err := srqGoSide(ctx, t, device, gidIndex, conn, true)
	conn.Close()
	checkSRQRun(t, c.Wait(), my, rem, err)
}

func TestInteropSRQPingpongGoServerCClient(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	const port = 18605
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	// A client that never connects (it failed, or ctx killed it) ends the
	// Accept with the run.
	if d, ok := ctx.Deadline(); ok {
		ln.SetDeadline(d)
	}
	c := tooltest.StartC(t, ctx, "C client", "ibv_srq_pingpong", append(srqArgs(device, gidIndex, port), localAddr())...)
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		t.Fatalf("accepting the C client's side channel: %v; its output:\n%s", err, c.Wait().Out)
	}
	my, rem, err := srqGoSide(ctx, t, device, gidIndex, conn, false)
	conn.Close()
	checkSRQRun(t, c.Wait(), my, rem, err)
}

// srqGoSide is the Go side of one run on conn: srqQPs RC QPs on one CQ,
// the address exchange in the C tool's order for the role, then its data
// path (a QP sends again once its previous send and a receive are done).
// It returns the addresses sent and received. It gives up when ctx ends.
func srqGoSide(ctx context.Context, t *testing.T, device string, gidIndex int, conn net.Conn, client bool) (my, rem []pingaddr.Dest, err error) {
	t.Helper()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	dev, err := hand.Open(device)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	mr, err := pd.Alloc(srqSize, hand.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	// Enough receives that none is reposted: the peer sends at most
	// srqIters, plus one in flight per QP.
	const rx = srqIters + srqQPs
	cq, err := dev.NewCQ(srqQPs*(rx+1), hand.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	g, err := dev.QueryGID(1, gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	qps := make([]*hand.QP, srqQPs)
	for i := range qps {
		if qps[i], err = pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq,
			Caps: hand.QPCaps{MaxSendWR: 1, MaxRecvWR: rx, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qps[i].Close() })
		my = append(my, pingaddr.Dest{QPN: qps[i].Num(), PSN: hand.RandomPSN(), GID: pingaddr.GID(g)})
	}

	r, w := pingaddr.NewReader(conn), pingaddr.NewWriter(conn)
	if client {
		if err := w.WriteSRQ(my); err != nil {
			return my, nil, err
		}
	}
	if rem, err = r.ReadSRQ(); err != nil {
		return my, rem, err
	}
	if len(rem) != srqQPs {
		return my, rem, fmt.Errorf("the C side sent %d QPs' addresses, want %d", len(rem), srqQPs)
	}
	recv, err := hand.NewRecvChain(rx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	sge := mr.SGE(0, srqSize)
	for i, qp := range qps {
		err := qp.Connect(hand.ConnectAttr{SGIDIndex: gidIndex, PSN: my[i].PSN, MTU: hand.MTU1024,
			Remote: hand.Endpoint{QPN: rem[i].QPN, PSN: rem[i].PSN, GID: hand.GID(rem[i].GID), LID: rem[i].LID},
			RTR:    hand.RTRAttr{MaxDestRDAtomic: 1, MinRNRTimer: 12},
			RTS:    hand.RTSAttr{Timeout: 14, RetryCount: 7, RNRRetry: 7, MaxRDAtomic: 1}})
		if err != nil {
			return my, rem, fmt.Errorf("QP %d: %w", i, err)
		}
		v := recv.Reserve(rx)
		for k := range rx {
			v.Set(k, recvWRID, sge)
		}
		if err := recv.PostRecv(qp); err != nil {
			return my, rem, fmt.Errorf("QP %d: post receives: %w", i, err)
		}
	}
	if client {
		err = w.WriteDone()
	} else if err = w.WriteSRQ(my); err == nil {
		err = r.ReadDone()
	}
	if err != nil {
		return my, rem, err
	}
	return my, rem, srqLoop(ctx, qps, cq, sge, client)
}

const (
	recvWRID = 1
	sendWRID = 2
)

// srqLoop is ibv_srq_pingpong's loop: the client sends first on every QP;
// a QP whose send and receive have both completed sends again, until
// srqIters messages went each way in all.
func srqLoop(ctx context.Context, qps []*hand.QP, cq *hand.CQ, sge hand.SGE, client bool) error {
	send, err := hand.NewSendChain(1, 1, 0)
	if err != nil {
		return err
	}
	defer send.Close()
	post := func(i int) error {
		send.Reserve(1).SetSend(0, sendWRID, hand.Signaled, sge)
		return send.PostSend(qps[i])
	}
	pending := make([]int, len(qps))
	for i := range qps {
		pending[i] = recvWRID
		if client {
			if err := post(i); err != nil {
				return err
			}
			pending[i] |= sendWRID
		}
	}
	wcs := make([]verbs.WC, 16)
	scnt, rcnt := 0, 0
	for rcnt < srqIters || scnt < srqIters {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d sends and %d receives: %w", scnt, rcnt, err)
		}
		n, err := cq.Poll(wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("completion status %d for wr_id %d", wc.Status, wc.WRID)
			}
			i := slices.IndexFunc(qps, func(q *hand.QP) bool { return q.Num() == wc.QPNum })
			if i < 0 {
				return fmt.Errorf("completion on unknown QPN %06x", wc.QPNum)
			}
			switch wc.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending[i] &^= int(wc.WRID)
			if scnt < srqIters && pending[i] == 0 {
				if err := post(i); err != nil {
					return err
				}
				pending[i] = recvWRID | sendWRID
			}
		}
	}
	return nil
}

var srqPrinted = regexp.MustCompile(`(?m)^  (local|remote) address: +(LID .*)$`)

// checkSRQRun checks the C side's run against the Go side's: it succeeded,
// printed the Go side's addresses as remote and the ones the Go side
// received as local, and the summary.
func checkSRQRun(t *testing.T, c tooltest.Run, my, rem []pingaddr.Dest, goErr error) {
	t.Helper()
	t.Logf("%s output:\n%s", c.Name, c.Out)
	if goErr != nil {
		t.Errorf("Go side: %v", goErr)
	}
	if c.Failed() {
		t.Errorf("%s failed: exit %d, %s", c.Name, c.ExitCode, c.Err)
	}
	var local, remote []string
	for _, m := range srqPrinted.FindAllStringSubmatch(c.Out, -1) {
		if m[1] == "local" {
			local = append(local, m[2])
		} else {
			remote = append(remote, m[2])
		}
	}
	str := func(ds []pingaddr.Dest) []string {
		var s []string
		for _, d := range ds {
			s = append(s, d.String())
		}
		return s
	}
	if !slices.Equal(local, str(rem)) {
		t.Errorf("%s printed local addresses %q; the Go side read %q", c.Name, local, str(rem))
	}
	if !slices.Equal(remote, str(my)) {
		t.Errorf("%s printed remote addresses %q; the Go side sent %q", c.Name, remote, str(my))
	}
	if !regexp.MustCompile(`(?m)^` + strconv.Itoa(srqIters) + ` iters in `).MatchString(c.Out) {
		t.Errorf("%s printed no %d-iteration summary", c.Name, srqIters)
	}
}
