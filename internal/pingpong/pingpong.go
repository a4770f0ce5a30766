// Package pingpong is goverbs-pingpong: an RC ping-pong over verbs that
// speaks ibv_rc_pingpong's protocol, so a Go side and a C side (rdma-core's
// libibverbs/examples/rc_pingpong.c) can be either end.
//
// The protocol: the server listens on TCP port 18515; the client connects
// and sends its address as text (a pingaddr.Dest), the server connects its
// QP to it and answers with its own, the client sends "done". Both sides keep
// rx_depth receives posted; the client sends first, and each side sends
// again once its previous send and a receive have completed, until each
// has sent and received -n messages of -s bytes.
//
// The data path uses hand's fast paths (a RecvChain, a SendChain, a
// Poller, all in C memory) and does not allocate. Not implemented from
// the C tool: -e (completion events), -o/-O/-P (ODP), -t (timestamps),
// -j (device memory), -N (new post send API). With -c a bad page makes the
// program exit with status 1, where the C tool only prints it.
package pingpong

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/internal/pingaddr"
)

// Work request IDs, as the C tool numbers them; pending is a mask of them.
const (
	recvWRID = 1
	sendWRID = 2
)

// Config is the command line.
type Config struct {
	Server   string // host to connect to; "" to be the server
	Port     int    // TCP port of the side channel
	Device   string // "" for the first device
	IBPort   int
	Size     int
	MTU      int // path MTU in bytes
	RxDepth  int
	Iters    int
	SL       int
	GIDIndex int  // -1: no GID (InfiniBand LID routing)
	Check    bool // -c: the client marks each page, the server checks the marks
}

// Result is what a run measured.
type Result struct {
	Elapsed      time.Duration
	Bytes        int64 // size * iters * 2, as the C tool counts
	Sent, Recvd  int   // completed sends and receives
	RecvBytes    int64 // bytes the receive completions reported
	InvalidPages []int // -c on the server: pages whose mark was wrong
}

var mtus = map[int]hand.MTU{256: hand.MTU256, 512: hand.MTU512, 1024: hand.MTU1024, 2048: hand.MTU2048, 4096: hand.MTU4096}

// ParseArgs parses ibv_rc_pingpong's command line as its getopt_long does
// (package getopt): short and long flags (-p/--port, -d/--ib-dev,
// -i/--ib-port, -s/--size, -m/--mtu, -r/--rx-depth, -n/--iters, -l/--sl,
// -g/--gid-idx, -c/--chk), letters grouped and values attached (-cg1),
// long names abbreviated (--iter), anywhere around at most one host
// argument.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{Port: 18515, IBPort: 1, Size: 4096, MTU: 1024, RxDepth: 500, Iters: 1000, GIDIndex: -1}
	fs := flag.NewFlagSet("goverbs-pingpong", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	both := func(short, long string, p *int, usage string) {
		fs.IntVar(p, short, *p, usage)
		fs.IntVar(p, long, *p, usage)
	}
	both("p", "port", &cfg.Port, "TCP port")
	fs.StringVar(&cfg.Device, "d", "", "device")
	fs.StringVar(&cfg.Device, "ib-dev", "", "device")
	both("i", "ib-port", &cfg.IBPort, "port of the device")
	both("s", "size", &cfg.Size, "message size")
	both("m", "mtu", &cfg.MTU, "path MTU")
	both("r", "rx-depth", &cfg.RxDepth, "receives to post at a time")
	both("n", "iters", &cfg.Iters, "exchanges")
	both("l", "sl", &cfg.SL, "service level")
	both("g", "gid-idx", &cfg.GIDIndex, "local GID index")
	fs.BoolVar(&cfg.Check, "c", false, "validate received buffer")
	fs.BoolVar(&cfg.Check, "chk", false, "validate received buffer")
	if err := getopt.Parse(fs, args); err != nil {
		return cfg, err
	}
	hosts := fs.Args()
	switch {
	case len(hosts) > 1:
		return cfg, fmt.Errorf("one host at most, got %q", hosts)
	case cfg.Port < 0 || cfg.Port > 65535:
		return cfg, fmt.Errorf("-p %d: not a TCP port", cfg.Port)
	case cfg.IBPort < 1 || cfg.IBPort > 255:
		return cfg, fmt.Errorf("-i %d: ports are numbered from 1", cfg.IBPort)
	case mtus[cfg.MTU] == 0:
		return cfg, fmt.Errorf("-m %d: one of 256, 512, 1024, 2048, 4096", cfg.MTU)
	case cfg.Size < 1 || int64(cfg.Size) > math.MaxUint32:
		// C's size is an unsigned int, and one SGE's length (32 bits)
		// carries the whole message.
		return cfg, fmt.Errorf("-s %d: the message size must be between 1 and %d (an SGE's 32-bit length)", cfg.Size, uint32(math.MaxUint32))
	case cfg.RxDepth < 1 || int64(cfg.RxDepth) > math.MaxUint32 || cfg.Iters < 1 || int64(cfg.Iters) > math.MaxUint32:
		// rx_depth and iters are unsigned ints in C. A receive queue of
		// one works: each receive is reposted before the answer that lets
		// the peer send again (engine.loop).
		return cfg, fmt.Errorf("-r %d, -n %d: both must be between 1 and %d", cfg.RxDepth, cfg.Iters, uint32(math.MaxUint32))
	}
	if len(hosts) == 1 {
		cfg.Server = hosts[0]
	}
	return cfg, nil
}

const usage = `Usage:
  goverbs-pingpong            start a server and wait for connection
  goverbs-pingpong <host>     connect to server at <host>

Options:
  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value
  -g, --gid-idx=<gid index> local port gid index
  -c, --chk              validate received buffer
`

// Main runs the command with args (without the program name) and returns
// its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "goverbs-pingpong: %v\n%s", err, usage)
		return 1
	}
	res, err := Run(cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "goverbs-pingpong: %v\n", err)
		return 1
	}
	usec := float64(res.Elapsed.Microseconds())
	fmt.Fprintf(stdout, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", res.Bytes, usec/1e6, float64(res.Bytes)*8/usec)
	fmt.Fprintf(stdout, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.Iters, usec/1e6, usec/float64(cfg.Iters))
	for _, p := range res.InvalidPages {
		fmt.Fprintf(stdout, "invalid data in page %d\n", p)
	}
	if len(res.InvalidPages) > 0 {
		return 1
	}
	return 0
}

// closer collects the Close calls of a run, done in reverse order.
type closer []func() error

func (c *closer) add(f func() error) { *c = append(*c, f) }

// close runs the closers, last added first. Its receiver is a pointer so
// that "defer cl.close(&err)", evaluated while cl is still empty, sees what
// is added later (with a value receiver it closed nothing at all: found by
// TestBadPeerPingpongGarbageLine, whose resource counts stayed up).
func (c *closer) close(err *error) {
	for i := len(*c) - 1; i >= 0; i-- {
		*err = errors.Join(*err, (*c)[i]())
	}
}

// Run runs one ping-pong, printing the two address lines to out.
func Run(cfg Config, out io.Writer) (res Result, err error) {
	var cl closer
	defer cl.close(&err)
	dev, err := hand.Open(cfg.Device)
	if err != nil {
		return res, err
	}
	cl.add(dev.Close)
	pd, err := dev.AllocPD()
	if err != nil {
		return res, err
	}
	cl.add(pd.Close)
	mr, err := pd.Alloc(cfg.Size, hand.AccessLocalWrite)
	if err != nil {
		return res, err
	}
	cl.add(mr.Close)
	buf := mr.Bytes()
	for i := range buf {
		buf[i] = 0x7b
	}
	cq, err := dev.NewCQ(cfg.RxDepth+1, hand.CQOptions{})
	if err != nil {
		return res, err
	}
	cl.add(cq.Close)
	qp, err := pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: cq,
		Caps: hand.QPCaps{MaxSendWR: 1, MaxRecvWR: cfg.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return res, err
	}
	cl.add(qp.Close)
	if err := qp.ToInit(hand.InitAttr{Port: cfg.IBPort}); err != nil {
		return res, err
	}

	e, err := newEngine(qp, cq, mr, cfg)
	if err != nil {
		return res, err
	}
	defer e.free()
	if n := e.postRecv(cfg.RxDepth); n < cfg.RxDepth {
		return res, fmt.Errorf("couldn't post receive (%d): %w", n, e.err)
	}
	e.routs = cfg.RxDepth

	pa, err := dev.QueryPort(cfg.IBPort)
	if err != nil {
		return res, err
	}
	my := pingaddr.Dest{LID: pa.LID, QPN: qp.Num(), PSN: hand.RandomPSN()}
	if uint32(pa.LinkLayer) != hand.LinkLayerEthernet && my.LID == 0 {
		return res, errors.New("couldn't get local LID")
	}
	if cfg.GIDIndex >= 0 {
		g, err := dev.QueryGID(cfg.IBPort, cfg.GIDIndex)
		if err != nil {
			return res, fmt.Errorf("can't read sgid of index %d: %w", cfg.GIDIndex, err)
		}
		my.GID = pingaddr.GID(g)
	}
	fmt.Fprintf(out, "  local address:  %s\n", my)

	var rem pingaddr.Dest
	if cfg.Server != "" {
		rem, err = clientExchange(cfg, my)
	} else {
		rem, err = serverExchange(cfg, my, func(rem pingaddr.Dest) error { return connect(qp, cfg, my, rem) })
	}
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "  remote address: %s\n", rem)
	if cfg.Server != "" {
		if err := connect(qp, cfg, my, rem); err != nil {
			return res, err
		}
	}

	e.pending = recvWRID
	if cfg.Server != "" {
		if cfg.Check {
			for i := 0; i < len(buf); i += os.Getpagesize() {
				buf[i] = 0
			}
		}
		if err := e.postSend(); err != nil {
			return res, fmt.Errorf("couldn't post send: %w", err)
		}
		e.pending |= sendWRID
	}
	start := time.Now()
	if err := e.loop(); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	res.Bytes = int64(cfg.Size) * int64(cfg.Iters) * 2
	res.Sent, res.Recvd, res.RecvBytes = e.scnt, e.rcnt, e.rbytes
	if cfg.Server == "" && cfg.Check {
		for i := 0; i < len(buf); i += os.Getpagesize() {
			if buf[i] != 0 {
				res.InvalidPages = append(res.InvalidPages, i/os.Getpagesize())
			}
		}
	}
	return res, nil
}

// connect moves the QP from INIT to RTS towards rem with the C tool's
// attributes.
func connect(qp *hand.QP, cfg Config, my, rem pingaddr.Dest) error {
	path := hand.Path{Port: cfg.IBPort, DLID: rem.LID, SL: uint8(cfg.SL)}
	// The C tool routes globally when the peer's interface ID is set.
	if rem.GID.InterfaceID() != 0 {
		path.DGID, path.SGIDIndex, path.HopLimit = hand.GID(rem.GID), cfg.GIDIndex, 1
	}
	err := qp.ToRTR(hand.RTRAttr{Path: path, DestQPN: rem.QPN, RQPSN: rem.PSN, MTU: mtus[cfg.MTU],
		MaxDestRDAtomic: 1, MinRNRTimer: 12})
	if err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	err = qp.ToRTS(hand.RTSAttr{SQPSN: my.PSN, Timeout: 14, RetryCount: 7, RNRRetry: 7, MaxRDAtomic: 1})
	if err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

func clientExchange(cfg Config, my pingaddr.Dest) (pingaddr.Dest, error) {
	addr := net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return pingaddr.Dest{}, fmt.Errorf("couldn't connect to %s: %w", addr, err)
	}
	defer conn.Close()
	w := pingaddr.NewWriter(conn)
	if err := w.WriteDest(my); err != nil {
		return pingaddr.Dest{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	rem, err := pingaddr.NewReader(conn).ReadDest()
	if err != nil {
		return rem, fmt.Errorf("couldn't read remote address: %w", err)
	}
	if err := w.WriteDone(); err != nil {
		return rem, fmt.Errorf("couldn't write done: %w", err)
	}
	return rem, nil
}

// serverExchange waits for one client, reads its address, connects (as the
// C server does, before answering) and sends its own.
func serverExchange(cfg Config, my pingaddr.Dest, connect func(pingaddr.Dest) error) (pingaddr.Dest, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.Port))
	if err != nil {
		return pingaddr.Dest{}, fmt.Errorf("couldn't listen to port %d: %w", cfg.Port, err)
	}
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return pingaddr.Dest{}, fmt.Errorf("accept: %w", err)
	}
	defer conn.Close()
	r := pingaddr.NewReader(conn)
	rem, err := r.ReadDest()
	if err != nil {
		return rem, fmt.Errorf("couldn't read remote address: %w", err)
	}
	if err := connect(rem); err != nil {
		return rem, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	if err := pingaddr.NewWriter(conn).WriteDest(my); err != nil {
		return rem, fmt.Errorf("couldn't send local address: %w", err)
	}
	// The client's "done": it has our address.
	if err := r.ReadDone(); err != nil {
		return rem, fmt.Errorf("couldn't read done: %w", err)
	}
	return rem, nil
}
