package tooltest

import "testing"

func TestParseSummary(t *testing.T) {
	s := parseSummary("  local address: ...\n16384000 bytes in 4.00 seconds = 32.81 Mbit/sec\n1000 iters in 4.00 seconds = 3995.28 usec/iter\n")
	if !s.ok || s.bytes != 16384000 || s.iters != 1000 || s.seconds != 4 {
		t.Errorf("parseSummary = %+v", s)
	}
	if s := parseSummary("16384000 bytes in 4.00 seconds = 32.81 Mbit/sec\n"); s.ok {
		t.Errorf("parseSummary without the iters line = %+v, want not ok", s)
	}
}

func TestRpingText(t *testing.T) {
	if got := rpingText(0); got != "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr" {
		t.Errorf("rpingText(0) = %q", got)
	}
}

func TestAddrLine(t *testing.T) {
	out := "  local address:  LID 0x0000, QPN 0x000011, PSN 0x5a5a5a, GID ::ffff:192.0.2.1\n  remote address: LID 0x0000, QPN 0x000012\n"
	if got := addrLine(out, "remote address:"); got != "LID 0x0000, QPN 0x000012" {
		t.Errorf("addrLine(remote) = %q", got)
	}
	if got := addrLine(out, "nothing:"); got != "" {
		t.Errorf("addrLine(missing) = %q", got)
	}
}
