// Package rping is goverbs-rping, rdma-core's rping (librdmacm/examples/
// rping.c) over goverbs' rdma_cm and fast paths.
//
// The protocol, one ping: the client sends the address, rkey and length of
// its ping buffer (16 bytes: be64 addr, be32 rkey, be32 size); the server
// RDMA-reads it and answers with a 16-byte "go ahead" send; the client
// sends its sink buffer's address the same way; the server RDMA-writes the
// ping text (up to its NUL) there and says "go ahead" again. The ping text
// is "rdma-ping-N: " followed by letters rotating from 'A' to 'z', NUL
// terminated. The client stops after -C pings (0: forever) and
// disconnects; the server serves one client until it disconnects.
//
// What the server trusts of the client: nothing it posts from. Each
// advertisement must be 16 bytes (a completion of any other length ends the
// session, as in rping), and its buffer must fit the server's -S buffer for
// the read, hold the text for the write, and not wrap the address space
// (hand.RemoteBuffer, advert.go), or the session ends with an error before anything is
// posted. The rkey is the client's to get right: a wrong one fails the
// operation at the client's device, never touching the server's memory.
//
// Flags as rping's: -s|-c, -a addr, -p port (7174), -C count, -S size (26
// to 65535, default 64), -v (print the ping data: "ping data: ..." on the
// client, "server ping data: ..." on the server), -V (the client compares
// what came back with what it sent), -d (debug lines). Not implemented:
// -P (persistent server), -q (self-made QP), -I (client source address).
package rping

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/getopt"
)

// Config is the command line.
type Config struct {
	Server   bool   // -s; else -c
	Addr     string // -a
	Port     int    // -p
	Count    int    // -C: pings; 0 forever
	Size     int    // -S
	Verbose  bool   // -v
	Validate bool   // -V
	Debug    bool   // -d
}

const (
	infoSize = 16 // struct rping_rdma_info
	minSize  = len("2147483647") + 1 + len("rdma-ping-%d: ") + 1
	maxSize  = 64*1024 - 1
	sqDepth  = 16
)

// ParseArgs parses rping's flags as its getopt does (package getopt):
// letters grouped and values attached (-svV, -S64, -a192.0.2.1).
func ParseArgs(args []string) (Config, error) {
	cfg := Config{Port: 7174, Size: 64}
	fs := flag.NewFlagSet("goverbs-rping", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var server, client bool
	fs.BoolVar(&server, "s", false, "server side")
	fs.BoolVar(&client, "c", false, "client side")
	fs.StringVar(&cfg.Addr, "a", "", "address")
	fs.IntVar(&cfg.Port, "p", cfg.Port, "port")
	fs.IntVar(&cfg.Count, "C", 0, "ping count")
	fs.IntVar(&cfg.Size, "S", cfg.Size, "ping data size")
	fs.BoolVar(&cfg.Verbose, "v", false, "display ping data")
	fs.BoolVar(&cfg.Validate, "V", false, "validate ping data")
	fs.BoolVar(&cfg.Debug, "d", false, "debug printfs")
	if err := getopt.Parse(fs, args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case server == client:
		return cfg, errors.New("give one of -s and -c")
	case client && cfg.Addr == "":
		return cfg, errors.New("-c needs -a addr")
	case cfg.Size < minSize || cfg.Size > maxSize:
		return cfg, fmt.Errorf("invalid size %d (valid range is %d to %d)", cfg.Size, minSize, maxSize)
	case cfg.Count < 0:
		return cfg, fmt.Errorf("invalid count %d", cfg.Count)
	case cfg.Port < 0 || cfg.Port > 65535:
		return cfg, fmt.Errorf("invalid port %d", cfg.Port)
	}
	cfg.Server = server
	if cfg.Addr == "" {
		cfg.Addr = "0.0.0.0"
	}
	return cfg, nil
}

const usage = `goverbs-rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
goverbs-rping -c [-vVd] [-S size] [-C count] -a addr [-p port]
	-c		client side
	-s		server side
	-v		display ping data to stdout
	-V		validate ping data
	-d		debug printfs
	-S size 	ping data size
	-C count	ping count times
	-a addr		address
	-p port		port
`

// Main runs the command and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "goverbs-rping: %v\n%s", err, usage)
		return 1
	}
	if err := Run(context.Background(), cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "goverbs-rping: %v\n", err)
		return 1
	}
	return 0
}

// Run runs one client or server session.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	addr := net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port))
	ccfg := hand.ConnConfig{
		Caps:               hand.QPCaps{MaxSendWR: sqDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1},
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
	}
	if !cfg.Server {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := hand.Dial(dctx, addr, ccfg)
		cancel()
		if err != nil {
			return err
		}
		return runClient(ctx, cfg, conn, stdout, stderr)
	}
	l, err := hand.Listen(ctx, addr)
	if err != nil {
		return err
	}
	defer l.Close()
	if cfg.Debug {
		fmt.Fprintf(stdout, "listening on %s\n", l.Addr())
	}
	req, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	// rping's server posts its receive before rdma_accept; hand makes the
	// QP inside Accept, so a fast client's first send may meet an RNR NAK
	// and be retried (rping's rnr_retry_count is 7: forever).
	conn, err := req.Accept(ctx, ccfg)
	if err != nil {
		return err
	}
	return runServer(ctx, cfg, conn, stdout, stderr)
}

// Work request IDs.
const (
	wrRecv = iota + 1
	wrSend
	wrRDMA
)

// session is one connection's buffers and fast-path objects.
type session struct {
	conn *hand.Conn
	qp   *hand.QP
	cq   *hand.CQ
	ctl  *hand.MR // [0,16) receives the peer's info, [16,32) is what we send
	// info is the last info received, copied from ctl before its receive
	// is posted again: a peer's next message may land there at once.
	info [infoSize]byte
	// early is a message that came while the session waited for another
	// completion (a peer that sends its next advertisement before the
	// go-ahead), kept for the next wait for a receive, as rping's server,
	// whose completion handler only records what arrived, would take it.
	early    [infoSize]byte
	hasEarly bool
	buf      *hand.MR // rping's rdma_buf: the RDMA sink
	start    *hand.MR // the client's ping buffer (rping's start_buf)
	recv     *hand.RecvChain
	send     *hand.SendChain
	poller   *hand.Poller
}

func newSession(conn *hand.Conn, size int, client bool) (s *session, err error) {
	s = &session{conn: conn, qp: conn.QP(), cq: conn.SendCQ()}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	// Each buffer gets the access its one use needs and no more: the
	// server's buf is never advertised (it is the destination of the
	// server's read and the source of its write), the client's start is
	// advertised only for the server to read and its buf only for the
	// server to write, so a peer holding one rkey cannot do the other.
	bufAccess := hand.AccessLocalWrite
	if client {
		bufAccess |= hand.AccessRemoteWrite
	}
	pd := conn.PD()
	if s.ctl, err = pd.Alloc(2*infoSize, hand.AccessLocalWrite); err != nil {
		return s, err
	}
	if s.buf, err = pd.Alloc(size, bufAccess); err != nil {
		return s, err
	}
	if client {
		if s.start, err = pd.Alloc(size, hand.AccessRemoteRead); err != nil {
			return s, err
		}
	}
	if s.recv, err = hand.NewRecvChain(1, 1); err != nil {
		return s, err
	}
	if s.send, err = hand.NewSendChain(1, 1, 0); err != nil {
		return s, err
	}
	if s.poller, err = hand.NewPoller(s.cq, 1); err != nil {
		return s, err
	}
	return s, s.postRecv()
}

// close frees the session and closes the connection (after the MRs, which
// live on its PD).
func (s *session) close() error {
	var errs []error
	for _, mr := range []*hand.MR{s.start, s.buf, s.ctl} {
		if mr != nil {
			errs = append(errs, mr.Close())
		}
	}
	if s.recv != nil {
		s.recv.Close()
	}
	if s.send != nil {
		s.send.Close()
	}
	if s.poller != nil {
		s.poller.Close()
	}
	errs = append(errs, s.conn.Close())
	return errors.Join(errs...)
}

func (s *session) postRecv() error {
	s.recv.Reserve(1).Set(0, wrRecv, s.ctl.SGE(0, infoSize))
	if err := s.recv.PostRecv(s.qp); err != nil {
		s.recv.Reset()
		return err
	}
	return nil
}

// sendInfo sends adv as rping's 16 bytes, from ctl[16:32]; a server's "go
// ahead" is the zero RemoteBuffer, 16 zero bytes, as rping's is.
func (s *session) sendInfo(adv hand.RemoteBuffer) error {
	// Appended in place: the slice has room for the 16 bytes and no more.
	if _, err := adv.AppendBinary(s.ctl.Bytes()[infoSize : infoSize : 2*infoSize]); err != nil {
		return err
	}
	s.send.Reserve(1).SetSend(0, wrSend, hand.Signaled, s.ctl.SGE(infoSize, infoSize))
	return s.post()
}

func (s *session) post() error {
	if err := s.send.PostSend(s.qp); err != nil {
		s.send.Reset()
		return err
	}
	return nil
}

// errFlushed is a receive flushed by the disconnect.
var errFlushed = errors.New("work request flushed")

// waitFor waits for the next completion of opcode want, skipping send
// completions, and returns its byte count. A received message is checked
// to be rping's 16 bytes and copied to s.info, and the receive is posted
// again. One message received while it waits for something else is kept
// for the next wait for a receive (s.early); a second is an error.
func (s *session) waitFor(ctx context.Context, want hand.WCOpcode) (uint32, error) {
	if want == hand.OpcodeRecv && s.hasEarly {
		s.info, s.hasEarly = s.early, false
		return infoSize, nil
	}
	for {
		wcs, err := s.poller.Poll()
		if err != nil {
			return 0, err
		}
		if len(wcs) == 0 {
			if err := s.cq.RequestNotify(false); err != nil {
				return 0, err
			}
			if wcs, err = s.poller.Poll(); err != nil {
				return 0, err
			}
			if len(wcs) == 0 {
				if err := s.cq.Wait(ctx); err != nil {
					return 0, err
				}
				continue
			}
		}
		w := &wcs[0]
		if w.Status() == hand.StatusWRFlushErr {
			return 0, errFlushed
		}
		if !w.OK() {
			return 0, fmt.Errorf("cq completion failed status %d (%s)", w.Status(), w.StatusString())
		}
		op := w.Opcode()
		if op == hand.OpcodeSend && want != hand.OpcodeSend {
			continue
		}
		n := w.ByteLen()
		early := op == hand.OpcodeRecv && want != hand.OpcodeRecv
		if op != want && !early {
			return 0, fmt.Errorf("completion opcode %d, want %d", op, want)
		}
		if op == hand.OpcodeRecv {
			if n != infoSize {
				return n, fmt.Errorf("received bogus data, size %d", n)
			}
			if early && s.hasEarly {
				return n, fmt.Errorf("a second message before completion opcode %d", want)
			}
			dst := &s.info
			if early {
				dst, s.hasEarly = &s.early, true
			}
			copy(dst[:], s.ctl.Bytes())
			if err := s.postRecv(); err != nil {
				return n, fmt.Errorf("post recv error: %w", err)
			}
			if early {
				continue
			}
		}
		return n, nil
	}
}

// fillPing writes ping's text into b: "rdma-ping-N: ", then letters from
// first, 'A' after 'z', and a NUL in the last byte. It returns the first
// letter of the next ping. It does not allocate.
func fillPing(b []byte, ping int, first byte) byte {
	n := copy(b, "rdma-ping-")
	n += len(strconv.AppendInt(b[n:n], int64(ping), 10))
	n += copy(b[n:], ": ")
	c := first
	for i := n; i < len(b); i++ {
		b[i] = c
		if c++; c > 'z' {
			c = 'A'
		}
	}
	b[len(b)-1] = 0
	if first++; first > 'z' {
		first = 'A'
	}
	return first
}

// cstr is b up to its first NUL.
func cstr(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

func runClient(ctx context.Context, cfg Config, conn *hand.Conn, stdout, stderr io.Writer) (err error) {
	s, err := newSession(conn, cfg.Size, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	start, sink := s.start.Bytes(), s.buf.Bytes()
	letter := byte('A')
	for ping := 0; cfg.Count == 0 || ping < cfg.Count; ping++ {
		letter = fillPing(start, ping, letter)

		if err := s.sendInfo(s.start.Remote()); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if _, err := s.waitFor(ctx, hand.OpcodeRecv); err != nil {
			return fmt.Errorf("ping %d: waiting for the server's read: %w", ping, err)
		}
		if err := s.sendInfo(s.buf.Remote()); err != nil {
			return fmt.Errorf("post send error: %w", err)
		}
		if _, err := s.waitFor(ctx, hand.OpcodeRecv); err != nil {
			return fmt.Errorf("ping %d: waiting for the server's write: %w", ping, err)
		}
		if cfg.Validate && string(start) != string(sink) {
			return fmt.Errorf("data mismatch! ping %d", ping)
		}
		if cfg.Verbose {
			fmt.Fprintf(stdout, "ping data: %s\n", cstr(sink))
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.Disconnect(dctx); err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	fmt.Fprintln(stderr, "client DISCONNECT EVENT...")
	return nil
}

// clientGone ends a server session cleanly: the client disconnected, and
// step is the wait that found it so.
type clientGone struct{ step string }

func (g *clientGone) Error() string { return "the client disconnected (" + g.step + ")" }

// discWatch is the server's watch for the client's disconnect: c delivers
// what conn.WaitDisconnect returned, which also cancels the server's waits.
type discWatch struct {
	c     <-chan error
	grace time.Duration // how long end waits for c after a wait the disconnect may have ended
	done  bool          // c has delivered
	err   error         // what it delivered
}

// returned reports whether WaitDisconnect has returned, waiting up to wait
// for it.
func (w *discWatch) returned(wait time.Duration) bool {
	if w.done {
		return true
	}
	select {
	case w.err = <-w.c:
		w.done = true
	default:
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case w.err = <-w.c:
				w.done = true
			case <-t.C:
			}
		}
	}
	return w.done
}

// end is how a session step that failed with err ends: in a *clientGone
// if the client has disconnected (a flushed WR or a cancelled wait is the
// disconnect's doing, so for those it waits up to grace for the watch's
// word), else in err, joined by WaitDisconnect's own failure when that is
// what cancelled the wait (not when the server's ctx ended both).
func (w *discWatch) end(ctx context.Context, step string, err error) error {
	var wait time.Duration
	if errors.Is(err, errFlushed) || errors.Is(err, context.Canceled) {
		wait = w.grace
	}
	if w.returned(wait) {
		if w.err == nil {
			return &clientGone{step}
		}
		if ctx.Err() == nil {
			return fmt.Errorf("%s: %w; waiting for the client's disconnect: %w", step, err, w.err)
		}
	}
	return fmt.Errorf("%s: %w", step, err)
}

func runServer(ctx context.Context, cfg Config, conn *hand.Conn, stdout, stderr io.Writer) (err error) {
	s, err := newSession(conn, cfg.Size, false)
	if err != nil {
		return err // newSession closed conn
	}
	// The client ends the session by disconnecting: watch for it, and
	// stop waiting for completions when it comes.
	wctx, cancel := context.WithCancel(ctx)
	disc := make(chan error, 1)
	go func() {
		disc <- conn.WaitDisconnect(wctx)
		cancel()
	}()
	w := &discWatch{c: disc, grace: 5 * time.Second}
	defer func() {
		cancel()
		w.returned(time.Hour) // the cancel ends it
		var gone *clientGone
		if errors.As(err, &gone) {
			// rping returns 0 whenever the client has disconnected,
			// whichever wait saw it.
			fmt.Fprintln(stderr, "server DISCONNECT EVENT...")
			if gone.step != waitReadAdv {
				fmt.Fprintf(stderr, "the client disconnected in the middle of a ping (%s)\n", gone.step)
			}
			err = nil
		}
		err = errors.Join(err, s.close())
	}()
	end := func(step string, err error) error { return w.end(ctx, step, err) }
	sink := s.buf.Bytes()
	for {
		if _, err := s.waitFor(wctx, hand.OpcodeRecv); err != nil {
			return end(waitReadAdv, err)
		}
		var adv hand.RemoteBuffer
		if err := adv.UnmarshalBinary(s.info[:]); err != nil {
			return fmt.Errorf("RDMA_READ_ADV: %w", err)
		}
		if cfg.Debug {
			fmt.Fprintf(stdout, "Received rkey %x addr %x len %d from peer\n", adv.RKey(), adv.Addr(), adv.Len())
		}
		if err := readFrom(adv, len(sink)); err != nil {
			return fmt.Errorf("RDMA_READ_ADV: %w", err)
		}
		s.send.Reserve(1).SetReadFrom(0, wrRDMA, hand.Signaled, s.buf.SGE(0, adv.Len()), adv)
		if err := s.post(); err != nil {
			return end("post send error", err)
		}
		if _, err := s.waitFor(wctx, hand.OpcodeRDMARead); err != nil {
			return end("wait for RDMA_READ_COMPLETE", err)
		}
		if cfg.Verbose {
			fmt.Fprintf(stdout, "server ping data: %s\n", cstr(sink))
		}
		if err := s.sendInfo(hand.RemoteBuffer{}); err != nil {
			return end("post send error", err)
		}
		if _, err := s.waitFor(wctx, hand.OpcodeRecv); err != nil {
			return end("wait for RDMA_WRITE_ADV", err)
		}
		if err := adv.UnmarshalBinary(s.info[:]); err != nil {
			return fmt.Errorf("RDMA_WRITE_ADV: %w", err)
		}
		// Echo the text and its NUL, as rping does, into no more than the
		// client advertised.
		dst, err := writeTo(adv, min(len(cstr(sink))+1, len(sink)))
		if err != nil {
			return fmt.Errorf("RDMA_WRITE_ADV: %w", err)
		}
		s.send.Reserve(1).SetWriteTo(0, wrRDMA, hand.Signaled, s.buf.SGE(0, dst.Len()), dst)
		if err := s.post(); err != nil {
			return end("post send error", err)
		}
		if _, err := s.waitFor(wctx, hand.OpcodeRDMAWrite); err != nil {
			return end("wait for RDMA_WRITE_COMPLETE", err)
		}
		if err := s.sendInfo(hand.RemoteBuffer{}); err != nil {
			return end("post send error", err)
		}
	}
}

// waitReadAdv is the server's wait between pings, where a client that
// is done disconnects.
const waitReadAdv = "wait for RDMA_READ_ADV"
