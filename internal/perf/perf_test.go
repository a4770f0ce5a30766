package perf

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/hand"
)

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-t", "read_bw", "-d", "rxe0", "-x", "1", "-F", "192.0.2.1", "-l", "8"})
	want := Config{Mode: ReadBW, Server: "192.0.2.1", Port: 18515, Device: "rxe0", IBPort: 1, GIDIndex: 1,
		Size: 65536, Iters: 5000, PostList: 8, CQMod: 8, TxDepth: 128, RxDepth: 512, Loop: GoLoop, Spin: 16, Wait: ThreadWait, WaitMin: 16}
	if err != nil || cfg != want {
		t.Errorf("ParseArgs = %+v, %v; want %+v", cfg, err, want)
	}
	cfg, err = ParseArgs([]string{"-t", "send_lat"})
	if err != nil || cfg.Size != 2 || cfg.Iters != 1000 {
		t.Errorf("send_lat defaults: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-n", "5", "-s", "1"})
	if err != nil || cfg.Iters != 5 || cfg.Size != 1 {
		t.Errorf("-n 5 -s 1 (perftest's least): %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-s", "2147483647"})
	if err != nil || cfg.Size != 2147483647 {
		t.Errorf("-s 2147483647 (perftest's most): %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-l", "8", "-Q", "4"})
	if err != nil || cfg.CQMod != 4 {
		t.Errorf("-l 8 -Q 4: %+v, %v", cfg, err)
	}
	for _, mode := range []string{"write_bw", "send_lat"} { // as tests/rxe runs them
		cfg, err = ParseArgs([]string{"-t", mode, "-n", "300", "-l", "4", "-Q", "8"})
		if err != nil || cfg.PostList != 4 || cfg.CQMod != 8 {
			t.Errorf("-t %s -n 300 -l 4 -Q 8: %+v, %v", mode, cfg, err)
		}
	}
	cfg, err = ParseArgs([]string{"-Q", "1000", "-tx-depth", "64"})
	if err != nil || cfg.CQMod != 64 {
		t.Errorf("CQ moderation is not capped at the send queue depth: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-t", "send_bw", "-loop", "cgo", "-e"})
	if err != nil || cfg.Loop != CgoLoop || !cfg.Events || cfg.Wait != ThreadWait {
		t.Errorf("-loop cgo -e: %+v, %v", cfg, err)
	}
	for loop, want := range map[string]Loop{"c": CLoop, "cgo": CgoLoop} {
		cfg, err = ParseArgs([]string{"-t", "write_bw", "-loop", loop})
		if err != nil || cfg.Loop != want {
			t.Errorf("-loop %s: %+v, %v", loop, cfg, err)
		}
	}
	cfg, err = ParseArgs([]string{"-t", "send_lat", "-e"})
	if err != nil || !cfg.Events || cfg.Wait != ThreadWait {
		t.Errorf("-e: %+v, %v; want it to wait on the thread", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-e", "-wait", "netpoll", "-sysmon-nap"})
	if err != nil || !cfg.Events || cfg.Wait != NetpollWait || !cfg.SysmonNap {
		t.Errorf("-e -wait netpoll -sysmon-nap: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-e", "-wait", "cq-thread"})
	if err != nil || !cfg.Events || cfg.Wait != CQThreadWait {
		t.Errorf("-e -wait cq-thread: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-spin", "1"})
	if err != nil || cfg.Spin != 1 {
		t.Errorf("-spin 1: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-e", "-wait-min", "1"})
	if err != nil || cfg.WaitMin != 1 {
		t.Errorf("-wait-min 1: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-gomaxprocs", "2"})
	if err != nil || cfg.GoMaxProcs != 2 || cfg.LockThread {
		t.Errorf("-gomaxprocs 2: %+v, %v", cfg, err)
	}
	cfg, err = ParseArgs([]string{"-lock-thread"})
	if err != nil || !cfg.LockThread {
		t.Errorf("-lock-thread: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{{"-t", "atomic_bw"}, {"a", "b"}, {"-s", "-1"}, {"-l", "0"}, {"-spin", "0"},
		{"-loop", "rust"}, {"-t", "send_lat", "-loop", "c"}, {"-e", "-wait", "spin"},
		{"-t", "send_bw", "-loop", "c", "-e"}, {"-t", "send_lat", "-loop", "cgo"}, {"-t", "send_bw", "-loop", "cgo", "-e", "-wait", "netpoll"}, {"-t", "send_bw", "-loop", "cgo", "-e", "-wait", "cq-thread"}, {"-gomaxprocs", "-1"}, {"-wait-min", "0"}, {"-wait-min", "17"},
		{"-n", "0"}, {"-s", "0"}, {"-t", "send_lat", "-n", "0"}, {"-t", "send_lat", "-s", "0"}, {"-n", "-5"}, {"-n", "4"},
		{"-s", "2147483648"}, {"-s", "4294967296"}, {"-n", "4294967297"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q): want an error", args)
		}
	}
}

// -Q's default is perftest's (force_dependecies, perftest 4.5-0.20): 100,
// but 1 (every WR signaled) above 8192 bytes unless -e; capped at the send
// queue; the post list with -l. An explicit -Q stands at any size.
func TestCQModDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-t", "write_bw"}, 1}, // the bandwidth modes' default -s is 65536
		{[]string{"-t", "write_bw", "-s", "65536"}, 1},
		{[]string{"-t", "read_bw", "-s", "8193"}, 1},
		{[]string{"-t", "send_bw", "-s", "65536", "-loop", "c"}, 1},
		{[]string{"-t", "write_bw", "-s", "8192"}, 100},
		{[]string{"-t", "write_bw", "-s", "64"}, 100},
		{[]string{"-t", "send_bw", "-s", "65536", "-e"}, 100}, // perftest keeps it with events
		{[]string{"-t", "send_bw", "-s", "4096", "-tx-depth", "64"}, 64},
		{[]string{"-t", "write_bw", "-s", "65536", "-Q", "100"}, 100},
		{[]string{"-t", "write_bw", "-s", "65536", "-Q", "1"}, 1},
		{[]string{"-t", "write_bw", "-s", "65536", "-l", "8"}, 8}, // the list's last WR, at any size
		{[]string{"-t", "write_bw", "-s", "64", "-l", "8"}, 8},
		{[]string{"-t", "write_bw", "-s", "65536", "-l", "8", "-Q", "4"}, 4},
		{[]string{"-t", "send_lat"}, 100}, // send_lat signals every send whatever -Q says
		{[]string{"-t", "send_lat", "-s", "65536"}, 1},
	} {
		cfg, err := ParseArgs(c.args)
		if err != nil {
			t.Errorf("ParseArgs(%q): %v", c.args, err)
			continue
		}
		if cfg.CQMod != c.want {
			t.Errorf("ParseArgs(%q): CQ moderation %d, perftest's is %d", c.args, cfg.CQMod, c.want)
		}
	}
}

// perftest's getopt_long forms (package getopt): letters grouped, values
// attached, its long names and their prefixes, the host anywhere; the
// flag package's forms that goverbs-perfcompare writes stand.
func TestParseArgsGetopt(t *testing.T) {
	want := Config{Mode: WriteBW, Server: "192.0.2.1", Port: 18515, Device: "rxe0", IBPort: 1, GIDIndex: 1,
		Size: 4096, Iters: 300, PostList: 4, CQMod: 8, TxDepth: 64, RxDepth: 512, Loop: CLoop, Spin: 16, Wait: ThreadWait, WaitMin: 16}
	for _, args := range [][]string{
		{"-twrite_bw", "-drxe0", "-x1", "-s4096", "-n300", "-l4", "-Q8", "-tx-depth", "64", "-loop", "c", "192.0.2.1"},
		{"192.0.2.1", "-t", "write_bw", "--ib-dev=rxe0", "--gid", "1", "--size", "4096", "--iter=300", "--post", "4", "--cq", "8", "--tx=64", "-loop=c"},
		{"-Fx1", "-twrite_bw", "-drxe0", "--size=4096", "-n", "300", "-l", "4", "-Q", "8", "-tx-depth=64", "-loop", "c", "--", "192.0.2.1"},
	} {
		if cfg, err := ParseArgs(args); err != nil || cfg != want {
			t.Errorf("ParseArgs(%q) = %+v, %v; want %+v", args, cfg, err, want)
		}
	}
	// A size or iterations given by the long name is given: no default.
	if cfg, err := ParseArgs([]string{"--size", "1", "--iters", "5", "-e"}); err != nil || cfg.Size != 1 || cfg.Iters != 5 || !cfg.Events {
		t.Errorf("--size 1 --iters 5 -e: %+v, %v", cfg, err)
	}
	if cfg, err := ParseArgs([]string{"-s", "65536", "--cq-mod", "100"}); err != nil || cfg.CQMod != 100 {
		t.Errorf("-s 65536 --cq-mod 100: %+v, %v; want -Q 100 as asked", cfg, err)
	}
	if _, err := ParseArgs([]string{"--po", "4"}); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("--po 4: %v; want it refused as ambiguous (--port, --post_list)", err)
	}
}

func TestPeerWire(t *testing.T) {
	p := peer{Endpoint: hand.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: hand.GIDFromAddr(netip.MustParseAddr("192.0.2.1"))},
		Addr: 0x7f0000001000, RKey: 0x1234}
	b := p.marshal()
	if len(b) != peerSize {
		t.Fatalf("marshal: %d bytes, want %d", len(b), peerSize)
	}
	var q peer
	if err := q.unmarshal(b, 65536); err != nil || q != p {
		t.Errorf("unmarshal = %+v, %v; want %+v", q, err, p)
	}
}

// The tables use perftest's column names.
func TestReports(t *testing.T) {
	var b bytes.Buffer
	cfg := Config{Size: 4096, Iters: 1000}
	reportBW(&b, cfg, time.Second, 8<<20)
	if !strings.Contains(b.String(), "BW average[MB/sec]   MsgRate[Mpps]") ||
		!strings.Contains(b.String(), " 4096       1000             8.00               3.91") {
		t.Errorf("bandwidth report:\n%s", b.String())
	}
	b.Reset()
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(2*(i+1)) * time.Microsecond // one-way 1..100 us
	}
	// perftest's statistics: the two longest (100, 99) are left out of the
	// median (of 98: the mean of the 49th and 50th), the average (of 1..98)
	// and the deviation; t_max is the second longest (99); the 99th
	// percentile is the sorted whole at ceil(0.99*98) = 98 (99 us).
	lat[10], lat[99] = lat[99], lat[10] // the order they came in does not matter
	reportLat(&b, Config{Size: 64, Iters: 100}, lat)
	f := strings.Fields(strings.Split(b.String(), "\n")[2])
	if len(f) != 9 || f[2] != "1.00" || f[3] != "99.00" || f[4] != "49.50" || f[5] != "49.50" || f[7] != "99.00" {
		t.Errorf("latency report row %q", f)
	}
	b.Reset()
	reportLat(&b, Config{Size: 64, Iters: 1}, lat[:1]) // fewer than the tail: nothing left out
	if f := strings.Fields(strings.Split(b.String(), "\n")[2]); len(f) != 9 || f[2] != f[3] || f[3] != f[4] {
		t.Errorf("one round trip: latency report row %q", f)
	}
}

// A peer that exits before a sync (its run failed, or it was stopped)
// closes the side channel: the error names the sync and says the peer
// closed it, where it used to be a bare "EOF".
func TestSyncPeerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, step := range []string{"the start sync", "the end sync"} {
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close() // gone before its sync byte
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		err = sync(c, make([]byte, 1), step)
		c.Close()
		// Our byte may reach the closed socket first, and the kernel
		// answer it with a reset.
		if err == nil || !strings.Contains(err.Error(), "the peer ") || !strings.Contains(err.Error(), "the side channel before "+step+" (") {
			t.Errorf("sync with a peer that closed: %v; want it to say the peer closed the side channel before %s", err, step)
		}
	}
}
