// Command rcpingpong is rdma-core's ibv_rc_pingpong written in Go with the
// generated bindings alone: package verbs for the verbs, package cmem for
// the memory the device and the C library read. It speaks the C tool's
// protocol, so either side can be the C program.
//
// The server listens on a TCP port; the client connects and sends its
// address (LID, QP number, first packet sequence number, GID) as text, the
// server connects its RC queue pair to it and answers with its own, and
// the client says "done". Then the client sends a message of -s bytes,
// the server answers with one, and so on, -n times each way, each side
// keeping -r receives posted.
//
//	rcpingpong [flags]          server
//	rcpingpong [flags] HOST     client (HOST comes after the flags)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it parses args, runs one ping-pong and returns
// the exit status (0, or 1 with the reason on stderr).
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 1
	}
	if err := pingpong(cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "rcpingpong: %v\n", err)
		return 1
	}
	return 0
}

// config is the command line. Its defaults are ibv_rc_pingpong's.
type config struct {
	host     string // server to connect to; "" to be the server
	port     int    // TCP port of the address exchange
	device   string // "" for the first device
	ibPort   int
	size     int
	mtu      int // path MTU in bytes
	rxDepth  int
	iters    int
	sl       int
	gidIndex int // -1: no GID, for InfiniBand's LID routing
	events   bool
	check    bool
}

// mtus are the path MTUs -m takes, in bytes, and their verbs values.
var mtus = map[int]verbs.MTU{256: verbs.MTU256, 512: verbs.MTU512, 1024: verbs.MTU1024, 2048: verbs.MTU2048, 4096: verbs.MTU4096}

// parseFlags parses the C tool's short flags. Errors are printed to stderr
// with the usage.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("rcpingpong", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.port, "p", 18515, "listen on/connect to TCP `port`")
	fs.StringVar(&cfg.device, "d", "", "use IB `device` (default first device found)")
	fs.IntVar(&cfg.ibPort, "i", 1, "use `port` of the IB device")
	fs.IntVar(&cfg.size, "s", 4096, "`size` of message to exchange")
	fs.IntVar(&cfg.mtu, "m", 1024, "path `MTU`")
	fs.IntVar(&cfg.rxDepth, "r", 500, "number of receives to post at a time")
	fs.IntVar(&cfg.iters, "n", 1000, "number of exchanges")
	fs.IntVar(&cfg.sl, "l", 0, "service level value")
	fs.IntVar(&cfg.gidIndex, "g", -1, "local port GID `index`")
	fs.BoolVar(&cfg.events, "e", false, "sleep on CQ events (default poll)")
	fs.BoolVar(&cfg.check, "c", false, "validate received buffer")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  rcpingpong [flags]        start a server and wait for connection\n"+
			"  rcpingpong [flags] HOST   connect to server at HOST\n\nFlags:\n")
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	if err != nil {
		return cfg, err
	}
	if fs.NArg() > 1 {
		err = fmt.Errorf("one HOST at most, got %q", fs.Args())
	} else {
		cfg.host = fs.Arg(0)
		err = cfg.validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "rcpingpong: %v\n", err)
		fs.Usage()
	}
	return cfg, err
}

// validate refuses values the C types or the verbs cannot carry.
func (cfg config) validate() error {
	switch {
	case cfg.port < 0 || cfg.port > 65535:
		return fmt.Errorf("-p %d: not a TCP port", cfg.port)
	case cfg.ibPort < 1 || cfg.ibPort > 255:
		return fmt.Errorf("-i %d: device ports are numbered from 1 to 255", cfg.ibPort)
	case mtus[cfg.mtu] == 0:
		return fmt.Errorf("-m %d: not one of 256, 512, 1024, 2048, 4096", cfg.mtu)
	// One SGE carries the whole message, and its length is 32 bits.
	case cfg.size < 1 || cfg.size > math.MaxUint32:
		return fmt.Errorf("-s %d: the size must be between 1 and %d", cfg.size, uint32(math.MaxUint32))
	// The CQ holds rx_depth+1 entries, and its size is a C int.
	case cfg.rxDepth < 1 || cfg.rxDepth >= math.MaxInt32:
		return fmt.Errorf("-r %d: the receive depth must be between 1 and %d", cfg.rxDepth, math.MaxInt32-1)
	case cfg.iters < 1:
		return fmt.Errorf("-n %d: at least one exchange", cfg.iters)
	case cfg.sl < 0 || cfg.sl > 15:
		return fmt.Errorf("-l %d: service levels are 0 to 15", cfg.sl)
	case cfg.gidIndex < -1 || cfg.gidIndex > 255:
		return fmt.Errorf("-g %d: GID indexes are 0 to 255 (or -1 for none)", cfg.gidIndex)
	}
	return nil
}

// pingpong runs one ping-pong as the server or the client, printing the
// addresses and the results as the C tool does.
func pingpong(cfg config, out io.Writer) (err error) {
	c, err := open(cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.close()) }()

	// Receives go up before the address does: once the peer has it, it
	// may send at any time.
	if err := c.postRecvs(cfg.rxDepth); err != nil {
		return err
	}
	if cfg.events {
		if err := verbs.ReqNotifyCQ(c.cq, 0); err != nil {
			return err
		}
	}
	local, err := c.localDest(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  local address:  %s\n", local)

	var remote dest
	if cfg.host == "" {
		// The server's QP must be ready to receive before the client
		// learns its address, so it connects between the two messages.
		remote, err = serverExchange(cfg.port, local, func(remote dest) error { return c.connect(cfg, local.psn, remote) })
	} else {
		remote, err = clientExchange(cfg.host, cfg.port, local)
		if err == nil {
			err = c.connect(cfg, local.psn, remote)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  remote address: %s\n", remote)

	if cfg.check && cfg.host != "" {
		markPages(c.buf)
	}
	start := time.Now()
	if err := c.exchange(cfg); err != nil {
		return err
	}
	printResults(out, cfg, time.Since(start))

	if cfg.check && cfg.host == "" {
		bad := unmarkedPages(c.buf)
		for _, p := range bad {
			fmt.Fprintf(out, "invalid data in page %d\n", p)
		}
		if len(bad) > 0 {
			return fmt.Errorf("-c: %d of %d pages lack the client's mark", len(bad), (len(c.buf)+pageSize-1)/pageSize)
		}
	}
	return nil
}

// printResults prints the C tool's two result lines. Both directions
// count: each side sent and received iters messages of size bytes.
func printResults(out io.Writer, cfg config, elapsed time.Duration) {
	usec := float64(elapsed.Microseconds())
	bytes := int64(cfg.size) * int64(cfg.iters) * 2
	fmt.Fprintf(out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, float64(bytes)*8/usec)
	fmt.Fprintf(out, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.iters, usec/1e6, usec/float64(cfg.iters))
}

// pageSize is the unit -c marks, as the C tool's sysconf(_SC_PAGESIZE).
var pageSize = os.Getpagesize()

// markPages is -c on the client: the first byte of every page of buf
// becomes the C tool's mark. The C tool computes it as
// i / page_size % sizeof(char), which is 0 for every page, so the mark is
// a zero byte over the 0x7b filler; another value would make a C server
// report the page as invalid.
func markPages(buf []byte) {
	for i := 0; i < len(buf); i += pageSize {
		buf[i] = 0
	}
}

// unmarkedPages is -c on the server, after the run: the pages whose first
// byte is not the client's mark.
func unmarkedPages(buf []byte) []int {
	var bad []int
	for i := 0; i < len(buf); i += pageSize {
		if buf[i] != 0 {
			bad = append(bad, i/pageSize)
		}
	}
	return bad
}
