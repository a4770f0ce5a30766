package rsocket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/rsocket/internal/wire"
)

// Sizes, as rsocket's defaults (librdmacm reads its own from
// /etc/rdma/rsocket/*_default; goverbs takes Config's).
const (
	defaultQueue  = 384     // send and receive queue (credits)
	defaultBuffer = 1 << 17 // send and receive buffer
	defaultInline = 64
	ctrlSlots     = 4    // control messages in flight (RS_QP_CTRL_SIZE)
	sndLowat      = 2048 // a send waits for this much send buffer (RS_SNDLOWAT)
	firstXfer     = 2048 // a write's first message (RS_OLAP_START_SIZE), doubling
	maxXfer       = 65536
	targetEntries = 2 // this side's target list (RS_SGL_SIZE)
	recvWRFlag    = 1 << 63
)

var hostBig = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// Conn is an rsocket stream connection. It implements net.Conn; one
// goroutine may Read while another Writes, and Close, CloseWrite and the
// deadline setters may be called from any goroutine at any time.
type Conn struct {
	hc           *hand.Conn
	laddr, raddr *net.TCPAddr

	rmu, wmu sync.Mutex // one Read, one Write at a time

	// mu guards the protocol state below, the send chain and the posts.
	mu            sync.Mutex
	sbuf, rbuf    *hand.MR // sbuf: sbufSize bytes, then ctrlSlots*16 for advertisements
	tgt           *hand.MR // this side's target list: targetEntries * 16
	sc            *hand.SendChain
	sgl           [2]hand.SGE
	qSize         int // receive queue (credits given)
	sbufSize      int
	rbufSize      int
	inline        int
	sqeAvail      int
	ctrlSeq       uint32
	ctrlMax       uint32
	sbufAvail     int
	sbufHead      int
	sseqNo        uint16
	sends         sendLog // sends not known complete
	sseqComp      uint16
	target        wire.SGE // the peer's buffer being written, what is left of it
	targetIdx     int      // the next entry of the target list to take
	remoteSGL     wire.SGE // the peer's target list
	remoteIdx     uint32
	peerBig       bool
	peerRbuf      wire.Region
	peerCredits   uint16
	rbufOffset    int    // where the next unread byte is
	rbufAvail     int    // read, not yet advertised again
	rbufFree      int    // offset of the next half to advertise
	room          uint32 // advertised to the peer, not yet written
	rseqNo        uint16 // data messages read
	rseqComp      uint16
	ring          []uint32 // lengths of the messages not read yet
	ringHead      int
	ringN         int
	peerShutWrite bool  // the peer sent shutdown: Read ends with io.EOF
	peerClosed    bool  // the peer sent disconnect
	shutWrite     bool  // CloseWrite or Close
	closed        bool  // Close
	disconnectDue bool  // Close found every control slot in flight: the disconnect goes once one frees
	err           error // the connection failed
	sendsDone     chan struct{}

	// A blocked Read or Write (or CloseWrite) waits on its wake channel
	// alone, for completions, Close and its deadline all send there: a
	// receive from one channel costs a third of a select of three.
	readWake, writeWake chan struct{}
	rdl, wdl            deadline
	closeOnce           sync.Once
	closeErr            error
	loopDone            chan struct{}
	watchCancel         context.CancelFunc
	poller              *hand.Poller
	rc                  *hand.RecvChain
	ka                  keepAlive // guarded by mu
}

// Config sizes a connection. The zero value is rsocket's defaults.
type Config struct {
	// QueueSize is the send and receive queue depth, and so the data
	// messages the peer may send before it hears from this side: 0 means
	// 384, as rsocket.
	QueueSize int
	// BufferSize is the size of the send and of the receive buffer: 0
	// means 128 KiB, as rsocket. At least 4 KiB, even.
	BufferSize int
	// KeepAlive is the idle time (no send or receive completed) after
	// which the connection probes the peer, and again every KeepAlive
	// while idle: 0 means 15 s, as net.Dialer's, and a negative value
	// turns probing off (a peer that vanishes then leaves a blocked Read
	// waiting until its deadline). A probe is rsocket's keepalive, a
	// 0-byte RDMA write the peer's transport acknowledges and its
	// program never sees. A probe unacknowledged after another KeepAlive
	// plus the path's local ACK timeout (2.1 s on soft-RoCE) fails the
	// connection (the peer's host is down, or the link cut, with no
	// disconnect): blocked and later calls return an error matching
	// syscall.ETIMEDOUT that says the peer stopped answering, at most
	// 2*KeepAlive + one ACK timeout after the peer's last answer: about
	// 32 s by default. docs/rsocket.md has the details.
	KeepAlive time.Duration
}

func (cfg Config) sizes() (q, buf int, err error) {
	q, buf = cfg.QueueSize, cfg.BufferSize
	if q == 0 {
		q = defaultQueue
	}
	if buf == 0 {
		buf = defaultBuffer
	}
	if q < 16 || q > 0xfffe-ctrlSlots {
		return 0, 0, fmt.Errorf("rsocket: QueueSize %d: want 16 to %d", q, 0xfffe-ctrlSlots)
	}
	if buf < 2*sndLowat || buf%2 != 0 || buf > 1<<30 {
		return 0, 0, fmt.Errorf("rsocket: BufferSize %d: want an even size from %d to 1 GiB", buf, 2*sndLowat)
	}
	return q, buf, nil
}

// newConn is a Conn to be connected with cfg's sizes; handConfig returns
// the hand.ConnConfig whose BeforeConnect makes its buffers and whose
// private data is its connection data, filled in then.
func newConn(cfg Config) (*Conn, hand.ConnConfig, error) {
	q, buf, err := cfg.sizes()
	if err != nil {
		return nil, hand.ConnConfig{}, err
	}
	c := &Conn{qSize: q, sbufSize: buf, rbufSize: buf, ka: keepAlive{period: cfg.keepAlivePeriod()},
		readWake: make(chan struct{}, 1), writeWake: make(chan struct{}, 1),
		loopDone: make(chan struct{}), sendsDone: make(chan struct{})}
	c.rdl.init(func() { notify(c.readWake) })
	c.wdl.init(func() { notify(c.writeWake) })
	priv := make([]byte, wire.ConnDataLen)
	hc := hand.ConnConfig{
		Caps: hand.QPCaps{MaxSendWR: q, MaxRecvWR: q + ctrlSlots, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: defaultInline},
		// Transport and RNR retries at 7, as rdma_connect in rsocket (RNR
		// forever: control messages may come when every receive holds
		// unread data). Not every send is signaled, unlike rsocket's: see
		// sendLog.
		RetryCount: 7, RNRRetryCount: 7,
		PrivateData:  priv,
		AfterFailure: func(*hand.Conn) { c.freeAll() },
		BeforeConnect: func(h *hand.Conn) error {
			if err := c.prepare(h); err != nil {
				c.freeAll()
				return err
			}
			// The slice hand sends from shares priv's array.
			d := c.connData()
			copy(priv, d.Append(nil))
			return nil
		},
	}
	return c, hc, nil
}

// prepare makes the buffers and chains on h's PD and posts the receives.
func (c *Conn) prepare(h *hand.Conn) error {
	pd := h.PD()
	var err error
	if c.sbuf, err = pd.Alloc(c.sbufSize+ctrlSlots*wire.SGELen, hand.AccessLocalWrite); err != nil {
		return err
	}
	if c.rbuf, err = pd.Alloc(c.rbufSize, hand.AccessLocalWrite|hand.AccessRemoteWrite); err != nil {
		return err
	}
	if c.tgt, err = pd.Alloc(targetEntries*wire.SGELen, hand.AccessLocalWrite|hand.AccessRemoteWrite); err != nil {
		return err
	}
	c.inline = min(h.QP().Caps().MaxInlineData, defaultInline)
	if c.sc, err = hand.NewSendChain(1, 2, 0); err != nil {
		return err
	}
	n := c.qSize + ctrlSlots
	if c.rc, err = hand.NewRecvChain(n, 1); err != nil {
		return err
	}
	if err := c.postRecvs(h.QP(), n); err != nil {
		return err
	}
	if c.poller, err = hand.NewPoller(h.RecvCQ(), 32); err != nil {
		return err
	}
	c.sqeAvail = c.qSize - ctrlSlots
	c.ctrlMax = ctrlSlots
	c.sbufAvail = c.sbufSize
	c.sends = newSendLog(c.qSize)
	half := c.rbufSize / 2
	c.rbufFree, c.rbufAvail, c.room = half, half, uint32(half)
	c.rseqComp = uint16(c.qSize / 2)
	c.ring = make([]uint32, c.qSize)
	return nil
}

// postRecvs posts n receives without a scatter list: rsocket's messages
// are RDMA writes, whose immediate data alone comes to the receive.
func (c *Conn) postRecvs(qp *hand.QP, n int) error {
	v := c.rc.Reserve(n)
	for i := range n {
		w := v.WR(i)
		w.WRID = recvWRFlag
		w.NumSGE = 0
	}
	return c.rc.PostRecv(qp)
}

func (c *Conn) connData() wire.ConnData {
	d := wire.ConnData{
		Version: wire.Version,
		// FlagIOMap with an iomap size of 0, as rsocket with its default
		// configuration: the layout is known, no table is offered.
		Flags:     wire.FlagIOMap,
		Credits:   uint16(c.qSize),
		TargetSGL: wire.SGE{Addr: c.tgt.Addr(), Key: c.tgt.RKey(), Length: targetEntries},
		DataBuf:   wire.SGE{Addr: c.rbuf.Addr(), Key: c.rbuf.RKey(), Length: uint32(c.rbufSize / 2)},
	}
	if hostBig {
		d.Flags |= wire.FlagNet
	}
	return d
}

// start takes the peer's connection data and starts the connection's
// completion loop and its watch of rdma_cm's disconnect.
func (c *Conn) start(h *hand.Conn, peer wire.ConnData) {
	c.hc = h
	c.laddr = net.TCPAddrFromAddrPort(h.LocalAddr())
	c.raddr = net.TCPAddrFromAddrPort(h.RemoteAddr())
	c.remoteSGL = peer.TargetSGL
	c.remoteIdx = 1 // the peer's entry 0 holds the buffer of the connection data
	c.peerBig = peer.Flags&wire.FlagNet != 0
	c.peerRbuf = peer.RecvBuffer()
	c.peerCredits = peer.Credits
	c.sseqComp = peer.Credits
	c.target = peer.DataBuf
	c.targetIdx = 1
	ctx, cancel := context.WithCancel(context.Background())
	c.watchCancel = cancel
	go c.loop()
	go c.watch(ctx)
	c.mu.Lock()
	c.updateCredits() // advertise the second half of the receive buffer
	c.startKeepAlive()
	c.mu.Unlock()
}

// watch waits for rdma_cm's DISCONNECTED. hand then moves the QP to the
// error state, which flushes the receives; the loop reads the flush as a
// reset unless the peer said goodbye first.
func (c *Conn) watch(ctx context.Context) {
	c.hc.WaitDisconnect(ctx)
}

// loop reaps the connection's completions, parked on the netpoller
// between them, until the CQ is closed.
func (c *Conn) loop() {
	defer close(c.loopDone)
	for {
		wcs, err := c.poller.Wait(context.Background())
		if err != nil {
			c.mu.Lock()
			if !c.closed {
				c.failLocked(fmt.Errorf("rsocket: completion queue: %w", err))
			}
			c.mu.Unlock()
			c.wake()
			return
		}
		c.mu.Lock()
		c.keepAliveSeen()
		reposts := 0
		for i := range wcs {
			if c.handle(&wcs[i]) {
				reposts++
			}
		}
		if reposts > 0 && c.err == nil && !c.closed {
			if err := c.postRecvs(c.hc.QP(), reposts); err != nil {
				c.failLocked(fmt.Errorf("rsocket: posting receives: %w", err))
			}
		}
		c.updateCredits()
		c.checkSendsDone()
		c.mu.Unlock()
		c.wake()
	}
}

func (c *Conn) wake() {
	notify(c.readWake)
	notify(c.writeWake)
}

// notify leaves a wake on ch, unless one is there already.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// failLocked records the connection's first failure.
func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
}

// handle takes one completion; it reports a receive to post again.
func (c *Conn) handle(wc *hand.WC) bool {
	id := wc.WRID()
	if id&recvWRFlag != 0 {
		if !wc.OK() {
			if !c.peerClosed && !c.closed {
				c.failLocked(&net.OpError{Op: "read", Net: "tcp", Source: c.laddr, Addr: c.raddr,
					Err: fmt.Errorf("%w (receive completion: %s)", syscall.ECONNRESET, wc.StatusString())})
			}
			return false
		}
		imm, ok := wc.Imm()
		if !ok {
			c.failLocked(c.opErr("read", &wire.FieldError{What: "message", Field: "opcode", Reason: "a receive without immediate data (message mode, iWARP's, is not supported)"}))
			return true
		}
		m, err := wire.ParseImm(imm, c.room, c.sseqNo, c.peerCredits)
		if err != nil {
			c.failLocked(c.opErr("read", err))
			return true
		}
		switch m.Op {
		case wire.OpData:
			if c.ringN == len(c.ring) {
				c.failLocked(c.opErr("read", &wire.FieldError{What: "immediate data", Field: "credits", Reason: fmt.Sprintf("a data message past the %d credits given", len(c.ring))}))
				return true
			}
			c.ring[(c.ringHead+c.ringN)%len(c.ring)] = m.Data
			c.ringN++
			c.room -= m.Data
		case wire.OpSGL:
			c.sseqComp = uint16(m.Data)
		case wire.OpCtrl:
			switch m.Data {
			case wire.CtrlDisconnect:
				c.peerClosed = true
			case wire.CtrlShutdown:
				if c.shutWrite {
					c.peerClosed = true
				} else {
					c.peerShutWrite = true
				}
			}
		}
		return true
	}
	kind, n, ok := c.sends.through(id)
	if !ok {
		c.failLocked(fmt.Errorf("rsocket: a send completion (%s) with work request id %#x, of no send posted", wc.StatusString(), id))
		return false
	}
	for range n {
		if s := c.sends.pop(); s.kind == sendData {
			c.sqeAvail++
			c.sbufAvail += int(s.bytes)
		} else {
			c.ctrlMax++
		}
	}
	// A flushed send is not the failure itself: the QP went to the error
	// state, which flushes the receives too, and their completions, in
	// order behind the peer's last messages, tell a disconnect (the
	// peer's goodbye came first: io.EOF) from a reset. The flushed send
	// may be reaped before that goodbye.
	if !wc.OK() && !c.closed && wc.Status() != hand.StatusWRFlushErr {
		c.failLocked(c.sendFailed(wc, kind))
	}
	return false
}

// checkSendsDone, once Close began, posts the disconnect it left due and
// closes sendsDone when nothing is left for Close to wait for: every send
// completed, or the connection failed, or the peer closed (it reads
// nothing more, and sends it acknowledged unsignaled may never complete).
func (c *Conn) checkSendsDone() {
	if !c.closed {
		return
	}
	if c.disconnectDue && c.ctrlAvail() && c.err == nil && !c.peerClosed {
		c.disconnectDue = false
		if err := c.postCtrl(wire.CtrlDisconnect); err != nil {
			c.failLocked(err)
		}
	}
	if c.allSendsDone() || c.err != nil || c.peerClosed {
		select {
		case <-c.sendsDone:
		default:
			close(c.sendsDone)
		}
	}
}

func (c *Conn) allSendsDone() bool {
	return c.sqeAvail == c.qSize-ctrlSlots && c.ctrlMax-c.ctrlSeq == ctrlSlots
}

func (c *Conn) ctrlAvail() bool { return c.ctrlSeq != c.ctrlMax }

// takeCtrl takes a control slot for a control message of kind (the
// caller checked ctrlAvail), logs the send and returns its work request id.
func (c *Conn) takeCtrl(kind sendKind) uint64 {
	c.ctrlSeq++
	return c.sends.add(sent{kind: kind})
}

// updateCredits advertises the half of the receive buffer that was read,
// or new credits, when either is due (rsocket's rs_update_credits).
func (c *Conn) updateCredits() {
	half := c.rbufSize / 2
	if c.err != nil || c.closed || c.hc == nil || !c.ctrlAvail() {
		return
	}
	if c.rbufAvail < half && int16(c.rseqNo-c.rseqComp) < 0 {
		return
	}
	id := c.takeCtrl(sendCtrl)
	c.rseqComp = c.rseqNo + uint16(c.qSize/2)
	imm := wire.Imm(wire.OpSGL, uint32(c.rseqNo+uint16(c.qSize)))
	v := c.sc.Reserve(1)
	if c.rbufAvail >= half {
		slot := c.sbufSize + wire.SGELen*int(c.ctrlSeq%ctrlSlots)
		adv := wire.SGE{Addr: c.rbuf.Addr() + uint64(c.rbufFree), Key: c.rbuf.RKey(), Length: uint32(half)}
		wire.AppendSGE(c.sbuf.Bytes()[slot:slot], adv, c.peerBig)
		flags := hand.Signaled
		if c.inline >= wire.SGELen {
			flags |= hand.Inline
		}
		v.SetWriteImm(0, id, flags, imm, c.sbuf.SGE(slot, wire.SGELen),
			c.remoteSGL.Addr+uint64(c.remoteIdx)*wire.SGELen, c.remoteSGL.Key)
		c.rbufAvail -= half
		c.rbufFree = (c.rbufFree + half) % c.rbufSize
		c.room += uint32(half)
		c.remoteIdx = (c.remoteIdx + 1) % c.remoteSGL.Length
	} else {
		v.SetWriteImm(0, id, hand.Signaled, imm, hand.SGE{}, 0, 0)
		v.WR(0).NumSGE = 0
	}
	if err := c.sc.PostSend(c.hc.QP()); err != nil {
		c.sc.Reset()
		c.failLocked(fmt.Errorf("rsocket: posting a buffer advertisement: %w", err))
	}
}

// postCtrl sends control code code; the caller checked ctrlAvail.
func (c *Conn) postCtrl(code uint32) error {
	id := c.takeCtrl(sendCtrl)
	imm := wire.Imm(wire.OpCtrl, code)
	v := c.sc.Reserve(1)
	v.SetWriteImm(0, id, hand.Signaled, imm, hand.SGE{}, 0, 0)
	v.WR(0).NumSGE = 0
	if err := c.sc.PostSend(c.hc.QP()); err != nil {
		c.sc.Reset()
		return err
	}
	return nil
}

// takeTarget takes the next buffer the peer advertised in the target
// list, if it has written one there.
func (c *Conn) takeTarget() (bool, error) {
	b := c.tgt.Bytes()[c.targetIdx*wire.SGELen : (c.targetIdx+1)*wire.SGELen]
	lenp := (*uint32)(unsafe.Pointer(&b[12]))
	if atomic.LoadUint32(lenp) == 0 {
		return false, nil
	}
	s, err := wire.ParseSGE(b, hostBig, c.peerRbuf)
	if err != nil {
		return false, err
	}
	atomic.StoreUint32(lenp, 0) // taken: the peer writes this entry again only once it is used up
	c.target = s
	c.targetIdx = (c.targetIdx + 1) % targetEntries
	return true, nil
}

func (c *Conn) canSend() (bool, error) {
	if c.sqeAvail == 0 || c.sbufAvail < sndLowat || c.sseqNo == c.sseqComp {
		return false, nil
	}
	if c.target.Length == 0 {
		return c.takeTarget()
	}
	return true, nil
}

// Read reads data the peer wrote. It returns io.EOF once the peer has
// closed its side (CloseWrite or Close) and everything before was read.
func (c *Conn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.ringN == 0 {
		switch {
		case c.closed:
			return 0, c.opErr("read", net.ErrClosed)
		case c.err != nil:
			return 0, c.err
		case c.peerShutWrite || c.peerClosed:
			return 0, io.EOF
		case len(b) == 0:
			return 0, nil
		}
		if err := c.waitLocked(c.readWake, &c.rdl, "read"); err != nil {
			return 0, err
		}
	}
	n := 0
	for n < len(b) && c.ringN > 0 {
		m := int(c.ring[c.ringHead])
		size := min(len(b)-n, m)
		if size == m {
			c.ringHead = (c.ringHead + 1) % len(c.ring)
			c.ringN--
			c.rseqNo++
		} else {
			c.ring[c.ringHead] -= uint32(size)
		}
		for size > 0 {
			k := copy(b[n:n+size], c.rbuf.Bytes()[c.rbufOffset:c.rbufSize])
			n += k
			size -= k
			c.rbufAvail += k
			c.rbufOffset = (c.rbufOffset + k) % c.rbufSize
		}
	}
	c.updateCredits()
	return n, nil
}

// waitLocked waits, with mu released, for a wake on ch: completions
// reaped, Close (the caller sees closed) or dl passing, which it returns as
// an error. A wake may be stale (left by an earlier event): the caller
// checks what it waits for again.
func (c *Conn) waitLocked(ch chan struct{}, dl *deadline, op string) error {
	if dl.passed() {
		return c.opErr(op, os.ErrDeadlineExceeded)
	}
	c.mu.Unlock()
	<-ch
	c.mu.Lock()
	passed := dl.passed()
	if passed || c.closed || c.err != nil {
		// For good: pass the wake on to a CloseWrite and a Write both
		// waiting on ch.
		notify(ch)
	}
	if passed {
		return c.opErr(op, os.ErrDeadlineExceeded)
	}
	return nil
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}

// Write writes b to the peer, returning once all of it is in the send
// buffer or posted, or with an error and the count written.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, olen := 0, firstXfer
	for n < len(b) {
		switch {
		case c.closed:
			return n, c.opErr("write", net.ErrClosed)
		case c.err != nil:
			return n, c.err
		case c.shutWrite:
			return n, c.opErr("write", syscall.EPIPE)
		case c.peerClosed:
			return n, c.opErr("write", syscall.ECONNRESET)
		}
		ok, err := c.canSend()
		if err != nil {
			c.failLocked(c.opErr("write", err))
			continue
		}
		if !ok {
			if err := c.waitLocked(c.writeWake, &c.wdl, "write"); err != nil {
				return n, err
			}
			continue
		}
		left := len(b) - n
		x := left
		if olen < left {
			x = olen
			if olen < maxXfer {
				olen <<= 1
			}
		}
		x = min(x, c.sbufAvail, int(c.target.Length))
		if err := c.postData(b[n : n+x]); err != nil {
			c.failLocked(c.opErr("write", err))
			continue
		}
		n += x
	}
	return n, nil
}

// postData copies p into the send buffer and writes it to the peer's
// buffer with immediate data.
func (c *Conn) postData(p []byte) error {
	x := len(p)
	sb := c.sbuf.Bytes()
	k := copy(sb[c.sbufHead:c.sbufSize], p)
	c.sgl[0] = c.sbuf.SGE(c.sbufHead, k)
	nsge := 1
	if k < x {
		copy(sb, p[k:])
		c.sgl[1] = c.sbuf.SGE(0, x-k)
		nsge = 2
	}
	c.sbufHead = (c.sbufHead + x) % c.sbufSize
	c.sseqNo++
	c.sqeAvail--
	c.sbufAvail -= x
	flags := hand.SendFlags(0)
	if x <= c.inline {
		flags = hand.Inline
	}
	// Signaled once the send queue or buffer is less than half free
	// (sendLog): a Write that runs out waits for this completion.
	if c.sqeAvail < (c.qSize-ctrlSlots)/2 || c.sbufAvail < c.sbufSize/2 {
		flags |= hand.Signaled
	}
	imm := wire.Imm(wire.OpData, uint32(x))
	id := c.sends.add(sent{kind: sendData, bytes: uint32(x)})
	v := c.sc.Reserve(1)
	v.SetWriteImm(0, id, flags, imm, c.sgl[0], c.target.Addr, c.target.Key)
	if nsge == 2 {
		v.SetSGL(0, c.sgl[:2])
	}
	c.target.Addr += uint64(x)
	c.target.Length -= uint32(x)
	if err := c.sc.PostSend(c.hc.QP()); err != nil {
		c.sc.Reset()
		return err
	}
	return nil
}

// CloseWrite shuts down the writing side: the peer's Read returns io.EOF
// once it has read what was written before. rsocket's shutdown(SHUT_WR).
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	if c.shutWrite {
		return nil
	}
	c.shutWrite = true
	if c.err != nil || c.peerClosed {
		return nil
	}
	code := uint32(wire.CtrlShutdown)
	if c.peerShutWrite {
		code = wire.CtrlDisconnect
	}
	for !c.ctrlAvail() && c.err == nil && !c.closed {
		if err := c.waitLocked(c.writeWake, &c.wdl, "close"); err != nil {
			return err
		}
	}
	if c.err != nil || c.closed {
		return c.err
	}
	if err := c.postCtrl(code); err != nil {
		c.failLocked(c.opErr("close", err))
		return c.err
	}
	c.wake() // a blocked Write ends with EPIPE
	return nil
}

// closeWait bounds how long Close waits for its disconnect message and
// the sends before it to be acknowledged.
const closeWait = 2 * time.Second

// Close sends rsocket's disconnect, waits (at most 2 s) until the peer
// has acknowledged it and everything written before, and tears the
// connection down. Blocked Read and Write calls return net.ErrClosed.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		// The disconnect is signaled, so its completion means every
		// send before it completed too (sendLog).
		c.disconnectDue = c.err == nil && !c.peerClosed
		c.closed = true
		c.shutWrite = true
		c.stopKeepAlive()
		c.wake()
		c.checkSendsDone()
		c.mu.Unlock()
		t := time.NewTimer(closeWait)
		select {
		case <-c.sendsDone:
		case <-t.C:
		}
		t.Stop()
		// No Read or Write is left using the buffers.
		c.rmu.Lock()
		c.wmu.Lock()
		c.rdl.stop()
		c.wdl.stop()
		err := c.freeBuffers()
		c.watchCancel()
		c.closeErr = errors.Join(err, c.hc.Close())
		<-c.loopDone
		c.poller.Close()
		c.rc.Close()
		c.wmu.Unlock()
		c.rmu.Unlock()
	})
	return c.closeErr
}

// freeBuffers deregisters and frees the buffers and chains but the
// poller's and the receive chain (the loop's, closed after it).
func (c *Conn) freeBuffers() error {
	var errs []error
	for _, mr := range []*hand.MR{c.sbuf, c.rbuf, c.tgt} {
		if mr != nil {
			errs = append(errs, mr.Close())
		}
	}
	if c.sc != nil {
		errs = append(errs, c.sc.Close())
	}
	return errors.Join(errs...)
}

// freeAll frees what prepare made, on a connection that never started.
func (c *Conn) freeAll() {
	c.freeBuffers()
	if c.poller != nil {
		c.poller.Close()
	}
	if c.rc != nil {
		c.rc.Close()
	}
}

// LocalAddr returns the local address, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read calls, pending ones
// included: past it they return an error matching
// os.ErrDeadlineExceeded whose Timeout method reports true. The zero time
// means none.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rdl.set(t); return nil }

// SetWriteDeadline is SetReadDeadline for Write (and CloseWrite's wait
// for room to send its message).
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// deadline is a deadline waiters select on: its channel closes when the
// deadline passes, and is made anew when the deadline moves out of the
// past (as net.Pipe's). Its passing also calls onPass, if set, for waiters
// that wait elsewhere.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
	onPass func()
}

func (d *deadline) init(onPass func()) {
	d.cancel = make(chan struct{})
	d.onPass = onPass
}

// pass closes ch, the deadline's channel, and calls onPass.
func (d *deadline) pass(ch chan struct{}) {
	close(ch)
	if d.onPass != nil {
		d.onPass()
	}
}

// passed reports whether the deadline has passed.
func (d *deadline) passed() bool { return isClosed(d.wait()) }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer's func is closing it, or has
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { d.pass(ch) })
		return
	}
	if !closed {
		d.pass(d.cancel)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
