package pingpong

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/hand"
)

// A message as ibv_rc_pingpong 44.0 sends it for rxe0's RoCE v2 IPv4 GID
// (index 1, ::ffff:192.0.2.1), LID 0, QPN 0x11, PSN 0x5d2c1a.
var cMsg = []byte("0000:000011:5d2c1a:00000000000000000000ffffc0000201\x00")

func TestDestWire(t *testing.T) {
	if len(cMsg) != MsgSize || MsgSize != 52 {
		t.Fatalf("MsgSize %d, C message %d bytes: both must be 52", MsgSize, len(cMsg))
	}
	want := Dest{QPN: 0x11, PSN: 0x5d2c1a, GID: hand.GIDFromAddr(netip.MustParseAddr("192.0.2.1"))}
	d, err := ParseDest(cMsg)
	if err != nil {
		t.Fatal(err)
	}
	if d != want {
		t.Errorf("ParseDest = %+v, want %+v", d, want)
	}
	if b := want.Marshal(); string(b[:]) != string(cMsg) {
		t.Errorf("Marshal = %q, want %q", b, cMsg)
	}
	if s, w := want.String(), "LID 0x0000, QPN 0x000011, PSN 0x5d2c1a, GID ::ffff:192.0.2.1"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}
}

func TestParseDestRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"0000:000011:5d2c1a",
		"0000:1000000:5d2c1a:00000000000000000000ffffc0000201", // QPN over 24 bits
		"0000:000011:5d2c1a:00000000000000000000ffffc00002",    // short GID
		"zzzz:000011:5d2c1a:00000000000000000000ffffc0000201",
	} {
		if d, err := ParseDest([]byte(s)); err == nil {
			t.Errorf("ParseDest(%q) = %+v, want an error", s, d)
		}
	}
}

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"192.0.2.1", "-d", "rxe0", "--gid-idx=1", "-n", "10", "-s", "64", "-c"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Server: "192.0.2.1", Port: 18515, Device: "rxe0", IBPort: 1, Size: 64, MTU: 1024,
		RxDepth: 500, Iters: 10, GIDIndex: 1, Check: true}
	if cfg != want {
		t.Errorf("ParseArgs = %+v, want %+v", cfg, want)
	}
	for _, args := range [][]string{{"a", "b"}, {"-p", "70000"}, {"-m", "1000"}, {"-i", "0"}, {"-s", "0"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q): want an error", args)
		}
	}
}
