package cross

// One host's verbs resources for a test, made with package hand and
// released (and checked to release cleanly) when the test ends; the
// helpers that reap and check completions; the data patterns both hosts
// recompute to check each other's bytes.

import (
	"context"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// rig is a device context, a PD on it and a completion channel that the
// rig's CQs share.
type rig struct {
	ctx *hand.Context
	pd  *hand.PD
	ch  *hand.CompChannel
	gid hand.GID // the GID at the host's GID index: its RoCE v2 IPv4 GID
}

// openRig opens the host's device with hand.Open.
func openRig(t *testing.T, p *Peer) *rig {
	t.Helper()
	ctx, err := hand.Open(p.Device)
	if err != nil {
		t.Fatalf("hand.Open(%s): %v", p.Device, err)
	}
	testkit.CloseLater(t, "the device context", ctx)
	return rigOn(t, p, ctx)
}

// rigOn makes the rig's PD and channel on ctx (which the caller closes)
// and checks that the host's GID index holds the RoCE v2 GID of its
// address.
func rigOn(t *testing.T, p *Peer, ctx *hand.Context) *rig {
	t.Helper()
	r := &rig{ctx: ctx}
	table, err := ctx.GIDTable(1)
	if err != nil {
		t.Fatalf("%s GID table: %v", ctx.Name(), err)
	}
	var have []string
	for _, e := range table {
		have = append(have, e.String())
		if e.Index == p.GIDIndex && e.Type == hand.GIDTypeRoCEv2 && e.GID == hand.GIDFromAddr(p.Addr) {
			r.gid = e.GID
		}
	}
	if r.gid.IsZero() {
		t.Fatalf("RXE_GID_INDEX=%d is not the RoCE v2 GID of %v on %s; its GIDs: %s", p.GIDIndex, p.Addr, ctx.Name(), strings.Join(have, "; "))
	}
	if r.pd, err = ctx.AllocPD(); err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	testkit.CloseLater(t, "the PD", r.pd)
	if r.ch, err = ctx.NewCompChannel(); err != nil {
		t.Fatalf("NewCompChannel: %v", err)
	}
	testkit.CloseLater(t, "the completion channel", r.ch)
	return r
}

// allAccess is what the tests' MRs and QPs grant.
const allAccess = hand.AccessLocalWrite | hand.AccessRemoteWrite | hand.AccessRemoteRead

// mr allocates and registers size bytes with allAccess.
func (r *rig) mr(t *testing.T, size int) *hand.MR {
	t.Helper()
	mr, err := r.pd.Alloc(size, allAccess)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", size, err)
	}
	testkit.CloseLater(t, "an MR", mr)
	return mr
}

// cq is a CQ on the rig's channel with a poller.
type cq struct {
	*hand.CQ
	poller *hand.Poller
}

// cq makes a CQ of at least entries entries.
func (r *rig) cq(t *testing.T, entries int) *cq {
	t.Helper()
	c, err := r.ctx.NewCQ(entries, hand.CQOptions{Channel: r.ch})
	if err != nil {
		t.Fatalf("NewCQ(%d): %v", entries, err)
	}
	testkit.CloseLater(t, "a CQ", c)
	p, err := hand.NewPoller(c, 64)
	if err != nil {
		t.Fatalf("NewPoller: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return &cq{CQ: c, poller: p}
}

// qp makes a QP of typ with send and recv CQs and room for wr WRs each way.
func (r *rig) qp(t *testing.T, typ hand.QPType, send, recv *cq, wr int) *hand.QP {
	t.Helper()
	qp, err := r.pd.NewQP(hand.QPConfig{Type: typ, SendCQ: send.CQ, RecvCQ: recv.CQ, Caps: hand.QPCaps{MaxSendWR: wr, MaxRecvWR: wr}})
	if err != nil {
		t.Fatalf("NewQP(%s): %v", typ, err)
	}
	testkit.CloseLater(t, typ.String()+" QP", qp)
	return qp
}

// reap waits for exactly n completions on c (see some) and returns copies
// of them. More than n completions fail the test.
func (c *cq) reap(t *testing.T, ctx context.Context, n int, what string) []hand.WC {
	t.Helper()
	out := make([]hand.WC, 0, n)
	for len(out) < n {
		out = append(out, c.some(t, ctx, fmt.Sprintf("%s (%d of %d so far: %s)", what, len(out), n, testkit.DescribeWCs(out)))...)
	}
	if len(out) > n {
		t.Fatalf("%s: want %d completions, got %d: %s", what, n, len(out), testkit.DescribeWCs(out))
	}
	return out
}

// some waits for the next completions on c, at least one, and returns
// copies of them. Between empty polls it arms the CQ and waits for its
// event, so the wait ends on a completion or on ctx.
func (c *cq) some(t *testing.T, ctx context.Context, what string) []hand.WC {
	t.Helper()
	armed := false
	for {
		wcs, err := c.poller.Poll()
		switch {
		case err != nil:
			t.Fatalf("%s: poll: %v", what, err)
		case len(wcs) > 0:
			return append([]hand.WC(nil), wcs...)
		case !armed:
			// Arm, then poll again: a completion that came before the arm
			// raises no event.
			if err := c.RequestNotify(false); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			armed = true
		default:
			if err := c.Wait(ctx); err != nil {
				t.Fatalf("%s: waiting for a completion: %v", what, withCause(ctx, err))
			}
			armed = false
		}
	}
}

// withCause adds why ctx ended to err, when it did: the peer's half may
// have ended it (see Peer.Context).
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// mustOK fails the test on a failed completion or one of another opcode.
func mustOK(t *testing.T, what string, wcs []hand.WC, op verbs.WCOpcode) {
	t.Helper()
	for i := range wcs {
		w := &wcs[i]
		if !w.OK() {
			t.Fatalf("%s: wr_id %#x: %s (vendor_err %#x); all: %s", what, w.WRID(), w.StatusString(), w.VendorErr(), testkit.DescribeWCs(wcs))
		}
		if w.Opcode() != op {
			t.Fatalf("%s: wr_id %#x: opcode %d, want %d", what, w.WRID(), w.Opcode(), op)
		}
	}
}

// regionMsg is a region and the SHA-256 of what it holds, as the control
// channel carries them.
type regionMsg struct {
	Region
	Sum string
}

// Seeds of the tests' patterns (seedOf's test argument).
const (
	testCM = iota + 1
	testRC
	testRDMA
	testUD
)

// msgSize is the size of message k: every fourth fills a slot, the rest
// spread over 1..slot bytes, so messages of one and of several packets mix.
func msgSize(k, slot int) int {
	if k%4 == 3 {
		return slot
	}
	return 1 + (k*1237)%slot
}

// pattern returns n bytes of Fill(seed).
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	Fill(b, seed)
	return b
}

// seedOf makes a pattern seed unique to a role, a test and a message.
func seedOf(role Role, test, msg int) uint64 {
	r := uint64(1)
	if role == Client {
		r = 2
	}
	return r<<48 | uint64(test)<<32 | uint64(msg)
}

// rate formats bytes moved in seconds as MB/s, for the logs.
func rate(bytes int64, seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f MB/s", float64(bytes)/seconds/1e6)
}
