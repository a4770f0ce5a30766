package main

// The verbs side of the ping-pong: the objects it needs, connecting its
// queue pair, and the exchange of messages itself.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/verbs"
)

// Work request IDs, as the C tool numbers them: the ping-pong keeps a mask
// of the kinds it still waits for.
const (
	recvWRID = 1
	sendWRID = 2
)

// workRequests are the one receive and the one send that the ping-pong
// posts again and again, and the scatter entry both use. They live in C
// memory: the library reads them, and cgo would otherwise check (or
// refuse) the Go pointers between them on every post.
type workRequests struct {
	sge     verbs.SGE
	recv    verbs.RecvWR
	send    verbs.SendWR
	badRecv *verbs.RecvWR
	badSend *verbs.SendWR
}

// conn is one side's verbs objects. Fields are nil until made; close
// releases those that were, last made first.
type conn struct {
	ctx     *verbs.Context
	channel *verbs.CompChannel // only with -e
	pd      *verbs.PD
	buf     []byte // the message buffer, in C memory: the device reads and writes it
	mr      *verbs.MR
	cq      *verbs.CQ
	qp      *verbs.QP
	wr      *workRequests // in C memory
	wc      []verbs.WC    // completions, in C memory
	events  uint32        // CQ events taken, to acknowledge before the CQ goes
}

// open makes the verbs objects of a ping-pong, as the C tool's
// pp_init_ctx does, and takes the QP to INIT. On failure it releases what
// it made.
func open(cfg config) (_ *conn, err error) {
	c := &conn{}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.close())
		}
	}()
	if c.ctx, err = openDevice(cfg.device); err != nil {
		return nil, err
	}
	if cfg.events {
		if c.channel, err = verbs.CreateCompChannel(c.ctx); err != nil {
			return nil, err
		}
	}
	if c.pd, err = verbs.AllocPD(c.ctx); err != nil {
		return nil, err
	}
	c.buf = cmem.NewSlice[byte](cfg.size)
	for i := range c.buf {
		c.buf[i] = 0x7b // the C tool's filler: -c looks for bytes the client changed
	}
	if c.mr, err = verbs.RegMRSlice(c.pd, c.buf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if c.cq, err = verbs.CreateCQ(c.ctx, int32(cfg.rxDepth+1), nil, c.channel, 0); err != nil {
		return nil, err
	}
	if err = c.createQP(cfg); err != nil {
		return nil, err
	}
	c.wc = cmem.NewSlice[verbs.WC](2)
	return c, nil
}

// openDevice opens the device named name, or the first one for "".
func openDevice(name string) (*verbs.Context, error) {
	devs, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	defer devs.Free()
	for _, d := range devs {
		if name == "" || cmem.ArrayString(d.Name[:]) == name {
			return verbs.OpenDevice(d)
		}
	}
	if name == "" {
		return nil, errors.New("no RDMA devices found")
	}
	return nil, fmt.Errorf("RDMA device %s not found", name)
}

// createQP creates the RC QP, fills the work requests and takes the QP to
// INIT.
func (c *conn) createQP(cfg config) (err error) {
	initAttr := verbs.QPInitAttr{
		SendCQ: c.cq,
		RecvCQ: c.cq,
		Cap:    verbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
		QPType: verbs.QPTRC,
	}
	if c.qp, err = verbs.CreateQP(c.pd, &initAttr); err != nil {
		return err
	}
	// Like the C tool, send inline when the provider can take the whole
	// message into the work request: the device then need not read the
	// buffer.
	var attr verbs.QPAttr
	if err := verbs.QueryQP(c.qp, &attr, verbs.QPAttrCap, &initAttr); err != nil {
		return err
	}
	flags := verbs.SendSignaled
	if initAttr.Cap.MaxInlineData >= uint32(cfg.size) {
		flags |= verbs.SendInline
	}

	c.wr = cmem.New[workRequests]()
	c.wr.sge = verbs.SGE{Addr: cmem.Addr(c.buf), Length: uint32(cfg.size), LKey: c.mr.LKey}
	c.wr.recv = verbs.RecvWR{WRID: recvWRID, SGList: &c.wr.sge, NumSGE: 1}
	c.wr.send = verbs.SendWR{WRID: sendWRID, SGList: &c.wr.sge, NumSGE: 1, Opcode: verbs.WROpSend, SendFlags: flags}

	attr = verbs.QPAttr{QPState: verbs.QPSInit, PKeyIndex: 0, PortNum: uint8(cfg.ibPort), QPAccessFlags: 0}
	mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags
	if err := verbs.ModifyQP(c.qp, &attr, mask); err != nil {
		return fmt.Errorf("QP to INIT: %w", err)
	}
	return nil
}

// localDest is this side's address: the port's LID, the GID at -g, the QP
// number and a random first PSN.
func (c *conn) localDest(cfg config) (dest, error) {
	var port verbs.PortAttr
	if err := verbs.QueryPort(c.ctx, uint8(cfg.ibPort), &port); err != nil {
		return dest{}, err
	}
	// InfiniBand routes by LID; Ethernet (RoCE) has none and needs -g.
	if uint32(port.LinkLayer) != verbs.LinkLayerEthernet && port.LID == 0 {
		return dest{}, fmt.Errorf("port %d has no LID: is the subnet manager running?", cfg.ibPort)
	}
	d := dest{lid: port.LID, qpn: c.qp.QPNum, psn: rand.Uint32() & 0xffffff}
	if cfg.gidIndex >= 0 {
		var gid verbs.GID
		if err := verbs.QueryGID(c.ctx, uint8(cfg.ibPort), int32(cfg.gidIndex), &gid); err != nil {
			return dest{}, fmt.Errorf("GID %d of port %d: %w", cfg.gidIndex, cfg.ibPort, err)
		}
		d.gid = *gid.Raw()
	}
	return d, nil
}

// connect takes the QP through RTR (it may receive from remote) to RTS (it
// may send, starting at PSN myPSN), with the C tool's attributes.
func (c *conn) connect(cfg config, myPSN uint32, remote dest) error {
	attr := verbs.QPAttr{
		QPState:         verbs.QPSRtr,
		PathMTU:         mtus[cfg.mtu],
		DestQPNum:       remote.qpn,
		RQPSN:           remote.psn,
		MaxDestRDAtomic: 1,
		MinRNRTimer:     12,
		AHAttr:          verbs.AHAttr{DLID: remote.lid, SL: uint8(cfg.sl), PortNum: uint8(cfg.ibPort)},
	}
	// A peer with a GID is routed by it (RoCE always; InfiniBand across
	// subnets); the C tool takes a zero interface ID as "no GID".
	if remote.hasGID() {
		if cfg.gidIndex < 0 {
			return fmt.Errorf("the peer sent GID %s: give -g, the local GID index to route from", netip.AddrFrom16(remote.gid))
		}
		attr.AHAttr.IsGlobal = 1
		attr.AHAttr.GRH.HopLimit = 1
		*attr.AHAttr.GRH.DGID.Raw() = remote.gid
		attr.AHAttr.GRH.SGIDIndex = uint8(cfg.gidIndex)
	}
	mask := verbs.QPAttrState | verbs.QPAttrAv | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN |
		verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
	if err := verbs.ModifyQP(c.qp, &attr, mask); err != nil {
		return fmt.Errorf("QP to RTR: %w", err)
	}

	attr.QPState = verbs.QPSRts
	attr.Timeout = 14
	attr.RetryCnt = 7
	attr.RNRRetry = 7
	attr.SQPSN = myPSN
	attr.MaxRDAtomic = 1
	mask = verbs.QPAttrState | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry |
		verbs.QPAttrSQPSN | verbs.QPAttrMaxQPRDAtomic
	if err := verbs.ModifyQP(c.qp, &attr, mask); err != nil {
		return fmt.Errorf("QP to RTS: %w", err)
	}
	return nil
}

// postRecvs posts the receive n times: every receive lands in the one
// buffer, which is all a ping-pong needs.
func (c *conn) postRecvs(n int) error {
	for i := range n {
		if err := verbs.PostRecv(c.qp, &c.wr.recv, &c.wr.badRecv); err != nil {
			return fmt.Errorf("posted %d of %d receives: %w", i, n, err)
		}
	}
	return nil
}

// exchange is the ping-pong itself, the C tool's loop: a side sends again
// once both its last send and a receive have completed, until it has sent
// and received iters messages. The client sends first.
func (c *conn) exchange(cfg config) error {
	posted := cfg.rxDepth // receives outstanding
	pending := recvWRID   // what must complete before the next send
	if cfg.host != "" {
		if err := verbs.PostSend(c.qp, &c.wr.send, &c.wr.badSend); err != nil {
			return err
		}
		pending |= sendWRID
	}
	sent, received := 0, 0
	for sent < cfg.iters || received < cfg.iters {
		n, err := c.poll(cfg.events)
		if err != nil {
			return err
		}
		for i := range n {
			wc := &c.wc[i]
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("work request %d completed with status %s (%d)",
					wc.WRID, cmem.GoString(verbs.WCStatusStr(wc.Status)), wc.Status)
			}
			switch wc.WRID {
			case sendWRID:
				sent++
			case recvWRID:
				received++
				// Refill before the queue runs dry, as the C tool does:
				// the peer never has more than one send in flight.
				if posted--; posted <= 1 {
					if err := c.postRecvs(cfg.rxDepth - posted); err != nil {
						return err
					}
					posted = cfg.rxDepth
				}
			default:
				return fmt.Errorf("completion of unknown work request %d", wc.WRID)
			}
			pending &^= int(wc.WRID)
			if pending == 0 && sent < cfg.iters {
				if err := verbs.PostSend(c.qp, &c.wr.send, &c.wr.badSend); err != nil {
					return err
				}
				pending = recvWRID | sendWRID
			}
		}
	}
	return nil
}

// poll returns how many completions it put in c.wc. Without -e it spins
// until there is one; with -e it sleeps until the CQ's next event, arms
// the CQ for the one after, and then polls once: arming before polling
// means no completion can arrive unannounced.
func (c *conn) poll(events bool) (int, error) {
	if events {
		cq, err := verbs.CQEvent(c.channel)
		if err != nil {
			return 0, err
		}
		c.events++
		if cq != c.cq {
			return 0, fmt.Errorf("CQ event for unknown CQ %p", cq)
		}
		if err := verbs.ReqNotifyCQ(c.cq, 0); err != nil {
			return 0, err
		}
		return verbs.PollCQ(c.cq, int32(len(c.wc)), &c.wc[0])
	}
	for {
		n, err := verbs.PollCQ(c.cq, int32(len(c.wc)), &c.wc[0])
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// close releases what open made, in reverse order; CQ events must all be
// acknowledged first, or destroying the CQ waits for them forever.
func (c *conn) close() error {
	var errs []error
	if c.events > 0 {
		verbs.ACKCQEvents(c.cq, c.events)
	}
	if c.qp != nil {
		errs = append(errs, verbs.DestroyQP(c.qp))
	}
	if c.cq != nil {
		errs = append(errs, verbs.DestroyCQ(c.cq))
	}
	if c.mr != nil {
		errs = append(errs, verbs.DeregMR(c.mr))
	}
	if c.pd != nil {
		errs = append(errs, verbs.DeallocPD(c.pd))
	}
	if c.channel != nil {
		errs = append(errs, verbs.DestroyCompChannel(c.channel))
	}
	if c.ctx != nil {
		errs = append(errs, verbs.CloseDevice(c.ctx))
	}
	cmem.FreeSlice(c.buf)
	cmem.Free(c.wr)
	cmem.FreeSlice(c.wc)
	return errors.Join(errs...)
}
