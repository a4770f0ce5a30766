// Package testkit holds the helpers the soft-RoCE suites share: tests/rxe (one
// host) and tests/cross (two hosts) make chains, close objects, check a
// QP's state and compare buffers the same way, and describe completions
// alike in their failure messages.
package testkit

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// CloseLater closes c when the test ends, failing it if Close fails (what
// names c in the message). Cleanups run last-registered first, so children
// registered after their parents close before them.
func CloseLater(t testing.TB, what string, c interface{ Close() error }) {
	t.Helper()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing %s: %v", what, err)
		}
	})
}

// RecvChain and SendChain make chains of capacity WRs of up to sge scatter
// entries (SendChain: no inline room), freed when the test ends.
func RecvChain(t testing.TB, capacity, sge int) *hand.RecvChain {
	t.Helper()
	c, err := hand.NewRecvChain(capacity, sge)
	if err != nil {
		t.Fatalf("hand.NewRecvChain(%d, %d): %v", capacity, sge, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func SendChain(t testing.TB, capacity, sge int) *hand.SendChain {
	t.Helper()
	c, err := hand.NewSendChain(capacity, sge, 0)
	if err != nil {
		t.Fatalf("hand.NewSendChain(%d, %d): %v", capacity, sge, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// DescribeWCs summarises completions for a failure message: the first 16,
// each with wr_id, status, opcode, byte_len and QP number.
func DescribeWCs(wcs []hand.WC) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range wcs {
		if i == 16 {
			fmt.Fprintf(&b, " ... %d more", len(wcs)-16)
			break
		}
		w := &wcs[i]
		if i > 0 {
			b.WriteString(" ")
		}
		raw := w.Raw()
		fmt.Fprintf(&b, "{wr_id %#x %s opcode %d len %d qp %d}", w.WRID(), w.StatusString(), raw.Opcode, raw.ByteLen, w.QPNum())
	}
	b.WriteString("]")
	return b.String()
}

// SameBytes fails the test at the first byte where got differs from want
// (what names the buffer).
func SameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %d bytes, first difference at byte %d: got %#02x, want %#02x", what, len(want), i, got[i], want[i])
		}
	}
}

// CheckState fails the test unless the device reports qp in state want.
func CheckState(t testing.TB, qp *hand.QP, want verbs.QPState) {
	t.Helper()
	s, err := qp.State()
	if err != nil {
		t.Fatalf("QP %d state: %v", qp.Num(), err)
	}
	if s != want {
		t.Fatalf("QP %d is in state %d, want %d", qp.Num(), s, want)
	}
}

// ResourceCounts returns the device's object counts as `rdma resource show
// DEV` prints them ("0: rxe0: pd 1 cq 2 qp 2 cm_id 0 mr 1 ctx 1 srq 0"):
// what a test compares before and after to see that everything it made was
// released. It fails the test unless the output holds each of pd, cq, qp,
// cm_id, mr and ctx once: counts it could not read would compare equal,
// empty with empty. srq is read when printed (older kernels count none).
func ResourceCounts(t testing.TB, dev string) map[string]int {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("rdma resource show %s: %v\n%s", dev, err, out)
	}
	counts, err := parseResourceCounts(string(out))
	if err != nil {
		t.Fatalf("rdma resource show %s: %v; it printed:\n%s", dev, err, out)
	}
	return counts
}

// resourceKeys are the counts parseResourceCounts requires.
var resourceKeys = []string{"pd", "cq", "qp", "cm_id", "mr", "ctx"}

var resourceRE = regexp.MustCompile(`(?:^|\s)(pd|cq|qp|cm_id|mr|ctx|srq) (\d+)\b`)

// parseResourceCounts reads one device's summary line.
func parseResourceCounts(out string) (map[string]int, error) {
	counts := map[string]int{}
	for _, m := range resourceRE.FindAllStringSubmatch(out, -1) {
		if _, dup := counts[m[1]]; dup {
			return nil, fmt.Errorf("%s counted twice: more than one device's summary", m[1])
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m[1], m[2], err)
		}
		counts[m[1]] = n
	}
	var missing []string
	for _, k := range resourceKeys {
		if _, ok := counts[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no count of %s", strings.Join(missing, ", "))
	}
	return counts, nil
}
