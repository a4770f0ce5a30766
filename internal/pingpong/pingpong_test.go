package pingpong

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/pingaddr"
)

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
	// ibv_rc_pingpong's getopt_long forms (package getopt).
	for _, c := range []struct {
		args []string
		want Config
	}{
		{[]string{"-g1", "-n10"}, Config{Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 500, Iters: 10, GIDIndex: 1}},
		{[]string{"-s4096", "192.0.2.1"}, Config{Server: "192.0.2.1", Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 500, Iters: 1000, GIDIndex: -1}},
		{[]string{"-cg", "1"}, Config{Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 500, Iters: 1000, GIDIndex: 1, Check: true}},
		{[]string{"--iter", "10", "--gid=1", "-drxe0"}, Config{Device: "rxe0", Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 500, Iters: 10, GIDIndex: 1}},
		{[]string{"-r", "1", "--rx=2", "-sl", "3"}, Config{Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 2, Iters: 1000, SL: 3, GIDIndex: -1}}, // -sl: the flag package's --sl
	} {
		if cfg, err := ParseArgs(c.args); err != nil || cfg != c.want {
			t.Errorf("ParseArgs(%q) = %+v, %v; want %+v", c.args, cfg, err, c.want)
		}
	}
	for _, args := range [][]string{{"a", "b"}, {"-p", "70000"}, {"-m", "1000"}, {"-i", "0"}, {"-s", "0"}, {"-r", "0"}, {"-n", "0"},
		// C's size, rx_depth and iters are unsigned ints, and the size is
		// one SGE's 32-bit length: more panicked in MR.SGE.
		{"-s", "4294967296"}, {"-s", "8589934592"}, {"-r", "4294967296"}, {"-n", "4294967296"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q): want an error", args)
		}
	}
	// rc_pingpong.c works with rx_depth 1 (it reposts when at most one
	// receive is left, so it reposts each), and so does the engine.
	for _, args := range [][]string{{"-r", "1"}, {"-s", "4294967295"}, {"-n", "4294967295"}} {
		if _, err := ParseArgs(args); err != nil {
			t.Errorf("ParseArgs(%q): %v; ibv_rc_pingpong takes it", args, err)
		}
	}
}

// The side channel end to end over loopback TCP, no device needed: each
// side learns the other's address, and the server connects before it
// answers.
func TestExchange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	gid := pingaddr.GID(netip.MustParseAddr("::ffff:192.0.2.1").As16())
	srvAddr := pingaddr.Dest{QPN: 0x11, PSN: 0x123456, GID: gid}
	cliAddr := pingaddr.Dest{QPN: 0x12, PSN: 0xabcdef, GID: gid}
	type result struct {
		rem       pingaddr.Dest
		connected bool
		err       error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.rem, r.err = serverExchange(Config{Port: port}, srvAddr, func(pingaddr.Dest) error { r.connected = true; return nil })
		done <- r
	}()
	var rem pingaddr.Dest
	for i := 0; ; i++ { // until the server listens
		if rem, err = clientExchange(Config{Server: "127.0.0.1", Port: port}, cliAddr); err == nil || i == 100 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || rem != srvAddr {
		t.Errorf("client got %v, %v; want %v", rem, err, srvAddr)
	}
	if r := <-done; r.err != nil || r.rem != cliAddr || !r.connected {
		t.Errorf("server got %v, %v (connected %v); want %v", r.rem, r.err, r.connected, cliAddr)
	}
}
