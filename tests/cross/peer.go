// Package cross holds the integration tests that need two hosts: two
// soft-RoCE VMs that `make rxe-pair-test` boots (internal/cmd/rxevm with two hosts),
// each with its own kernel and its own rxe device on a virtio NIC, linked
// by a qemu UDP socket. The same test binary runs on both hosts at the same
// time, one process per host; the environment tells each process its role
// (RXE_ROLE: server on host a, client on host b), its address and its
// peer's (see RequirePeer). Everywhere else the cross-host tests skip; the
// unit tests of the package's own helpers run anywhere. Both roles can
// also share one single-host VM, as two processes with RXE_ADDR and
// RXE_PEER_ADDR both the VM's address (QPs on one rxe device talk), which
// is handy for debugging but is not the cross-host test.
//
// Every test is one function that does the server's or the client's half,
// by role, and talks to the same test on the other host over a control
// channel (ConnectPeer): a TCP connection per test on which the two halves
// check they run the same test, exchange what RDMA needs out of band
// (endpoints, memory regions, checksums, tool results) and meet at
// barriers, and at the end of which each learns whether the other failed.
// Both hosts must therefore run the same tests in the same order, and no
// test in the package may be parallel.
//
// This file is the package's only non-test code: the host environment and
// the control channel, for every test here, fault tests included. The
// package does not boot or kill VMs (internal/cmd/rxevm does) and does not set up
// RDMA resources (each test does, with package hand).
package cross

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/hand"
)

// Role is a host's part in every test.
type Role string

const (
	Server Role = "server" // host a: listens, on the control channel and in the tests
	Client Role = "client" // host b: dials
)

// Host is this host's environment, as internal/cmd/rxevm sets it in two-host mode.
type Host struct {
	Name     string     // RXE_HOST: "a" or "b", for messages
	Role     Role       // RXE_ROLE
	Addr     netip.Addr // RXE_ADDR: this host's IPv4 address, on Netdev
	PeerAddr netip.Addr // RXE_PEER_ADDR: the other host's
	Device   string     // RXE_DEVICE: the rxe device on Netdev ("rxe0")
	GIDIndex int        // RXE_GID_INDEX: the RoCE v2 IPv4 GID of Addr on port 1
	Netdev   string     // RXE_NETDEV: the network interface under Device
}

// IsServer reports the server role.
func (h Host) IsServer() bool { return h.Role == Server }

// PeerRole is the other host's role.
func (h Host) PeerRole() Role {
	if h.IsServer() {
		return Client
	}
	return Server
}

// ServerAddr is the server host's address: Addr on the server, PeerAddr on
// the client.
func (h Host) ServerAddr() netip.Addr {
	if h.IsServer() {
		return h.Addr
	}
	return h.PeerAddr
}

// skipMessage is what a test outside a two-host VM pair skips with.
const skipMessage = "needs a peer host with its own soft-RoCE device: GOVERBS_IN_VM=1 and RXE_PEER_ADDR are not both set, " +
	"so this is not one of the two-host soft-RoCE VMs; run `make rxe-pair-test`, which boots two (internal/cmd/rxevm) " +
	"and runs this package on both at once"

// RequirePeer returns this host's environment. Outside a two-host VM pair
// (GOVERBS_IN_VM is not 1, or RXE_PEER_ADDR is unset) it skips the test,
// saying which make target runs it. Inside, it fails the test when a
// variable is missing or invalid, or the device is not there.
func RequirePeer(t testing.TB) Host {
	t.Helper()
	if os.Getenv("GOVERBS_IN_VM") != "1" || os.Getenv("RXE_PEER_ADDR") == "" {
		t.Skip(skipMessage)
	}
	h, err := hostFromEnv(os.Getenv)
	if err != nil {
		t.Fatalf("in a two-host soft-RoCE VM (RXE_PEER_ADDR is set), but %v: internal/cmd/rxevm sets these in two-host mode", err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", h.Device)); err != nil {
		t.Fatalf("host %s: device %s is missing (%v): see rxevm's guest setup output", h.Name, h.Device, err)
	}
	return h
}

// hostFromEnv reads and validates the variables, reporting every problem.
func hostFromEnv(getenv func(string) string) (Host, error) {
	var errs []error
	str := func(key string) string {
		v := getenv(key)
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", key))
		}
		return v
	}
	addr := func(key string) netip.Addr {
		v := str(key)
		if v == "" {
			return netip.Addr{}
		}
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			errs = append(errs, fmt.Errorf("%s=%q is not an IPv4 address", key, v))
		}
		return a
	}
	h := Host{
		Name:     str("RXE_HOST"),
		Role:     Role(str("RXE_ROLE")),
		Addr:     addr("RXE_ADDR"),
		PeerAddr: addr("RXE_PEER_ADDR"),
		Device:   str("RXE_DEVICE"),
		Netdev:   str("RXE_NETDEV"),
	}
	if h.Role != "" && h.Role != Server && h.Role != Client {
		errs = append(errs, fmt.Errorf("RXE_ROLE=%q is neither %q nor %q", h.Role, Server, Client))
	}
	if v := str("RXE_GID_INDEX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("RXE_GID_INDEX=%q is not a GID index", v))
		}
		h.GIDIndex = n
	}
	return h, errors.Join(errs...)
}

// ControlPort is the TCP port the server host's control listener takes on
// its Addr, once per process.
const ControlPort = 7400

// Budget bounds each test's use of the control channel: every read and
// write on it must be done within Budget of ConnectPeer (or by the test
// binary's -test.timeout, if nearer), and Context ends then too.
const Budget = 2 * time.Minute

// endGrace is how long the end-of-test exchange waits for the peer beyond
// the budget: the peer may still be in a wait that its own budget ends.
const endGrace = 30 * time.Second

// Peer is one test's control channel to the same test on the other host.
// It embeds this host's environment.
//
// Its methods fail the test (t.Fatal) when the channel breaks, when a
// deadline passes, when the peer sends something else than expected, and
// when the peer's half of the test has ended (failed or not) while this
// side waits for it; like t.Fatal they must be called from the test's
// goroutine. Messages are values encoding/json encodes, each with a label
// that the receiving side names too, so that two halves that disagree fail
// at once and say where.
type Peer struct {
	Host
	t        *testing.T
	peerHost string // "host b", from the peer's hello; "the client host" before
	conn     net.Conn
	enc      *json.Encoder
	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time

	// A goroutine reads every message into in, so that the peer's end word
	// ends ctx even while the test waits for something else; it closes in
	// after the end word or on readErr.
	in      chan envelope
	readErr error
	quit    chan struct{} // closed by end: the reader stops handing over

	greeted   bool // the hellos went through
	peerEnded bool // the peer's end word was taken from in
	broken    bool // a read or write failed: the stream is unusable
	abandoned bool
}

// envelope is one message on the channel.
type envelope struct {
	Kind   string          `json:"kind"`            // "hello", "msg", "barrier" or "end"
	Label  string          `json:"label,omitempty"` // hello: the test's name; msg: its label; barrier: its name
	Host   string          `json:"host,omitempty"`  // hello
	Role   Role            `json:"role,omitempty"`  // hello
	Body   json.RawMessage `json:"body,omitempty"`  // msg
	Failed bool            `json:"failed,omitempty"`
}

// ConnectPeer calls RequirePeer and opens the test's control channel: the
// server accepts on Addr:ControlPort, the client dials
// PeerAddr:ControlPort. Each side sends the test's name (t.Name()) and its
// role, and the test fails unless the peer's name is the same and its role
// the other.
//
// When the test ends (t.Cleanup, after the cleanups the test registers
// later), each side tells the other whether it failed and waits for the
// other's word: a failure on one host fails the test on the other too, and
// neither host starts the next test while the other is still in this one.
// A side that fails sends its word at once, which ends the other side's
// Context: its waits end instead of running out the budget.
//
// The resources a test makes after ConnectPeer close (their cleanups run
// first) before that exchange: a test whose peer uses this side's QP or
// memory until the end, with RDMA reads or writes or sends still to be
// acknowledged, meets the peer at a Barrier before it returns.
//
// Once the hosts are out of step (a test could not reach its peer, met
// another test, saw the channel break, or abandoned its peer), every later
// ConnectPeer of the process fails at once, saying why.
func ConnectPeer(t *testing.T) *Peer {
	t.Helper()
	h := RequirePeer(t)
	p := &Peer{Host: h, t: t, peerHost: "the " + string(h.PeerRole()) + " host", deadline: time.Now().Add(Budget),
		in: make(chan envelope, 256), quit: make(chan struct{})}
	if d, ok := t.Deadline(); ok && d.Before(p.deadline) {
		p.deadline = d
	}
	ctx, cancel := context.WithDeadline(t.Context(), p.deadline)
	t.Cleanup(cancel)
	p.ctx, p.cancel = context.WithCancelCause(ctx)

	if lost := lostReason(); lost != "" {
		t.Fatalf("no control channel: %s; the hosts are out of step, so every later test fails at once", lost)
	}
	var err error
	if h.IsServer() {
		p.conn, err = accept(h.Addr, p.deadline)
	} else {
		p.conn, err = dial(h.PeerAddr, p.deadline)
	}
	if err != nil {
		setLost(fmt.Sprintf("%s could not reach the peer: %v", t.Name(), err))
		t.Fatalf("control channel of host %s (%s): %v", h.Name, h.Role, err)
	}
	if err := p.conn.SetDeadline(p.deadline); err != nil {
		p.conn.Close()
		t.Fatalf("control channel: %v", err)
	}
	p.enc = json.NewEncoder(p.conn)
	go p.reader(json.NewDecoder(p.conn))
	t.Cleanup(p.end)

	p.write(envelope{Kind: "hello", Label: t.Name(), Host: h.Name, Role: h.Role})
	hello := p.read("the peer's hello")
	if hello.Host != "" {
		p.peerHost = "host " + hello.Host
	}
	var mismatch string
	switch {
	case hello.Kind != "hello":
		mismatch = fmt.Sprintf("the first message from the peer is a %q, not a hello", hello.Kind)
	case hello.Label != t.Name():
		mismatch = fmt.Sprintf("host %s runs %s but host %s runs %s: both hosts must run the same tests in the same order (the same binary and -test.run on both)",
			h.Name, t.Name(), hello.Host, hello.Label)
	case hello.Role != h.PeerRole():
		mismatch = fmt.Sprintf("host %s is the %s, and so is %s: RXE_ROLE must differ", h.Name, h.Role, p.peerName())
	}
	if mismatch != "" {
		setLost(t.Name() + ": " + mismatch)
		t.Fatalf("control channel: %s", mismatch)
	}
	p.greeted = true
	control.Lock()
	control.met = true
	control.Unlock()
	return p
}

// reader hands every message to in until the peer's end word or an error.
// A failed end word, or the stream breaking, also ends the Peer's context,
// so that a test waiting for a completion or an event the peer will no
// longer cause stops waiting. (A clean end word does not: the peer's half
// is done, and this side may still have waits of its own to finish.)
func (p *Peer) reader(dec *json.Decoder) {
	defer close(p.in)
	for {
		var e envelope
		if err := dec.Decode(&e); err != nil {
			p.readErr = err
			p.cancel(fmt.Errorf("the control channel to the %s broke: %w", p.PeerRole(), err))
			return
		}
		if e.Kind == "end" && e.Failed {
			p.cancel(fmt.Errorf("the %s half of this test failed", p.PeerRole()))
		}
		select {
		case p.in <- e:
		case <-p.quit:
			return
		}
		if e.Kind == "end" {
			return
		}
	}
}

// control is the process's side of the control channel, which its tests
// use one at a time.
var control struct {
	sync.Mutex
	ln   *net.TCPListener // the server's listener, made by the first test
	met  bool             // a test has met its peer: the server's listener is up
	lost string           // why the hosts are out of step, once they are
}

// setLost records that the hosts are out of step: later tests fail at
// once instead of each waiting out its budget. The server closes its
// listener, so the client's later dials fail at once too.
func setLost(why string) {
	control.Lock()
	defer control.Unlock()
	if control.lost == "" {
		control.lost = why
	}
	if control.ln != nil {
		control.ln.Close()
	}
}

func lostReason() string {
	control.Lock()
	defer control.Unlock()
	return control.lost
}

// accept takes the next control connection on the process's listener,
// which it makes on the first call.
func accept(addr netip.Addr, deadline time.Time) (net.Conn, error) {
	control.Lock()
	defer control.Unlock()
	if control.ln == nil {
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, ControlPort)))
		if err != nil {
			return nil, err
		}
		control.ln = ln
	}
	if err := control.ln.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c, err := control.ln.AcceptTCP()
	if err != nil {
		return nil, fmt.Errorf("no client connected to %v: %w", control.ln.Addr(), err)
	}
	c.SetNoDelay(true)
	return c, nil
}

// dialRetry is the pause between two dials the server refused.
const dialRetry = 100 * time.Millisecond

// dial connects to the server's control listener. The server process
// starts at the same moment as this one, so its listener may not be up
// yet for the first test: until a test of this process has met its peer,
// dial retries every dialRetry until the deadline (the package's one
// polling wait, bounded by the budget). After that, the listener was up,
// and a refused dial means the server has gone or given up: dial fails at
// once.
func dial(peer netip.Addr, deadline time.Time) (net.Conn, error) {
	ap := netip.AddrPortFrom(peer, ControlPort)
	control.Lock()
	retry := !control.met
	control.Unlock()
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", ap.String())
		if err == nil {
			return c, nil
		}
		if !retry {
			return nil, fmt.Errorf("the server's listener at %v, up for earlier tests, is gone: %w", ap, err)
		}
		if time.Until(deadline) < dialRetry {
			return nil, fmt.Errorf("no server at %v by the deadline: %w", ap, err)
		}
		time.Sleep(dialRetry)
	}
}

// Context returns a context for the test's own waits. It ends at the
// test's control budget (see Budget), when the test ends, as soon as the
// peer's half of the test has failed, or when the channel breaks (the
// peer abandoned it, or its host died): context.Cause then says which.
func (p *Peer) Context() context.Context { return p.ctx }

// Deadline is when the test's control budget runs out.
func (p *Peer) Deadline() time.Time { return p.deadline }

func (p *Peer) write(e envelope) {
	p.t.Helper()
	if err := p.enc.Encode(e); err != nil {
		p.fail(err)
		p.t.Fatalf("control channel to %s: sending %s %q: %v", p.peerName(), e.Kind, e.Label, err)
	}
}

// read returns the next message, what naming what is awaited. The peer's
// end word fails the test: the peer left while this side waits.
func (p *Peer) read(what string) envelope {
	p.t.Helper()
	e, ok := <-p.in
	if !ok {
		err := p.readErr
		p.fail(err)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			p.t.Fatalf("control channel to %s: waiting for %s: no word by the deadline (%v after the test began)", p.peerName(), what, Budget)
		}
		p.t.Fatalf("control channel to %s: waiting for %s: %v", p.peerName(), what, err)
	}
	if e.Kind == "end" {
		p.peerEnded = true
		if e.Failed {
			p.t.Fatalf("the %s half of this test failed on %s (its log says why) while this side waited for %s", p.PeerRole(), p.peerName(), what)
		}
		p.t.Fatalf("%s ended this test while this side waited for %s: the two halves disagree", p.peerName(), what)
	}
	return e
}

// fail marks the stream unusable after err, which puts the hosts out of
// step: the peer may have gone, or be stuck in this test.
func (p *Peer) fail(err error) {
	p.broken = true
	setLost(fmt.Sprintf("%s lost its control channel to %s: %v", p.t.Name(), p.peerName(), err))
}

// peerName names the peer host in messages.
func (p *Peer) peerName() string { return p.peerHost }

// Send sends v, labelled label. The peer must Recv it under the same label.
func (p *Peer) Send(label string, v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatalf("control channel: encoding %q: %v", label, err)
	}
	p.write(envelope{Kind: "msg", Label: label, Body: b})
}

// Recv receives the peer's next message into v (a pointer); the test fails
// unless that message is labelled label.
func (p *Peer) Recv(label string, v any) {
	p.t.Helper()
	e := p.read(fmt.Sprintf("%q", label))
	if e.Kind != "msg" || e.Label != label {
		p.t.Fatalf("control channel: waiting for message %q from %s, got %s %q: the two halves disagree", label, p.peerName(), e.Kind, e.Label)
	}
	if err := json.Unmarshal(e.Body, v); err != nil {
		p.t.Fatalf("control channel: decoding %q from %s: %v", label, p.peerName(), err)
	}
}

// Exchange sends mine and receives the peer's into theirs (a pointer), both
// labelled label: both sides call it at the same point.
func (p *Peer) Exchange(label string, mine, theirs any) {
	p.t.Helper()
	p.Send(label, mine)
	p.Recv(label, theirs)
}

// Barrier returns when both sides have reached Barrier(name).
func (p *Peer) Barrier(name string) {
	p.t.Helper()
	p.write(envelope{Kind: "barrier", Label: name})
	e := p.read(fmt.Sprintf("barrier %q", name))
	if e.Kind != "barrier" || e.Label != name {
		p.t.Fatalf("control channel: at barrier %q, %s sent %s %q: the two halves disagree", name, p.peerName(), e.Kind, e.Label)
	}
}

// Abandon closes the channel without the end-of-test exchange, for a test
// in which the peer is meant to vanish (a fault test that has the harness
// kill the other host). The Peer must not be used afterwards, and every
// later test of the process fails at once: it has no peer to meet.
func (p *Peer) Abandon() {
	p.abandoned = true
	setLost(p.t.Name() + " abandoned its peer")
	p.conn.Close()
}

// end is the end-of-test exchange (see ConnectPeer).
func (p *Peer) end() {
	t := p.t
	defer func() {
		close(p.quit)
		p.conn.Close()
	}()
	if p.abandoned || p.broken {
		return // the test failed already, saying why
	}
	// Extending the deadline extends the reader's pending read too.
	if err := p.conn.SetDeadline(time.Now().Add(max(time.Until(p.deadline), 0) + endGrace)); err != nil {
		t.Errorf("control channel: %v", err)
		return
	}
	failed := t.Failed()
	if err := p.enc.Encode(envelope{Kind: "end", Failed: failed}); err != nil {
		setLost(fmt.Sprintf("%s could not send its end-of-test word to %s: %v", t.Name(), p.peerName(), err))
		t.Errorf("control channel to %s: sending the end of the test: %v", p.peerName(), err)
		return
	}
	if p.peerEnded {
		return // taken (and reported) while this side waited for something else
	}
	for e := range p.in {
		if e.Kind == "end" {
			if e.Failed {
				t.Errorf("the %s half of this test failed on %s: its log says why", p.PeerRole(), p.peerName())
			}
			return
		}
		if !failed {
			// This side finished without reading it: the halves disagree.
			t.Errorf("control channel: %s sent %s %q, which this side never read", p.peerName(), e.Kind, e.Label)
		}
	}
	setLost(fmt.Sprintf("%s got no end-of-test word from %s: %v", t.Name(), p.peerName(), p.readErr))
	t.Errorf("control channel to %s: no end-of-test word from it: %v", p.peerName(), p.readErr)
}

// ExchangeEndpoint sends this side's endpoint in its wire format
// (hand.Endpoint.MarshalBinary) and returns the peer's.
func (p *Peer) ExchangeEndpoint(mine hand.Endpoint) hand.Endpoint {
	p.t.Helper()
	b, err := mine.MarshalBinary()
	if err != nil {
		p.t.Fatalf("hand.Endpoint.MarshalBinary: %v", err)
	}
	var theirs []byte
	p.Exchange("endpoint", b, &theirs)
	var e hand.Endpoint
	if err := e.UnmarshalBinary(theirs); err != nil {
		p.t.Fatalf("the endpoint from %s: %v", p.peerName(), err)
	}
	return e
}

// Region is what a peer needs to RDMA-read or -write a memory region.
type Region struct {
	Addr uint64
	RKey uint32
	Len  int
}

// RegionOf is mr's Region.
func RegionOf(mr *hand.MR) Region { return Region{Addr: mr.Addr(), RKey: mr.RKey(), Len: mr.Len()} }

// Sum is the hex SHA-256 of b, to compare buffers across hosts.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Fill writes a pattern into b that both hosts can recompute from seed
// and that differs between seeds and between offsets: a misplaced or
// stale byte shows.
func Fill(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range b {
		if i%8 == 0 {
			// xorshift64*: a new word every 8 bytes.
			x ^= x >> 12
			x ^= x << 25
			x ^= x >> 27
		}
		b[i] = byte((x * 0x2545f4914f6cdd1d) >> (8 * (i % 8)))
	}
}
