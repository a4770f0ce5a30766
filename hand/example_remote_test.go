package hand_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/hand"
)

// The two sides of an RDMA write, compiled but not run (they need a device;
// tests/rxe runs goverbs-rping, which does the same through the same
// calls, against rdma-core's rping).

// The side whose memory is written: it advertises a buffer in the private
// data of its rdma_cm accept, in rping's 16-byte format, and learns from
// the immediate data when the peer's write has landed.
func ExampleMR_Remote() {
	ctx := context.Background()
	l, err := hand.Listen(ctx, "192.0.2.1:7471")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	req, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := req.Context().AllocPD() // the MR must exist before the accept that advertises it
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	mr, err := pd.Alloc(4096, hand.AccessLocalWrite|hand.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	adv, err := mr.Remote().MarshalBinary() // rkey, address and length: what the peer may write
	if err != nil {
		log.Fatal(err)
	}
	// A write with immediate data consumes a receive, and completes it: it
	// is posted before the accept, so the peer's write finds it.
	recv, _ := hand.NewRecvChain(1, 1)
	defer recv.Close()
	conn, err := req.Accept(ctx, hand.ConnConfig{PD: pd, PrivateData: adv, BeforeConnect: func(c *hand.Conn) error {
		recv.Reserve(1).Set(0, 1, mr.SGE(0, 0))
		return recv.PostRecv(c.QP())
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	poller, _ := hand.NewPoller(conn.RecvCQ(), 1)
	defer poller.Close()
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatal(err)
	}
	off, _ := wcs[0].Imm()
	fmt.Printf("the peer wrote %d bytes at %d: %q\n", wcs[0].ByteLen(), off, mr.Bytes()[off:off+wcs[0].ByteLen()])
}

// The side that writes: it decodes the peer's buffer, takes the part it
// means to write (Slice checks it is within what the peer advertised), and
// posts the write to it.
func ExampleRemoteBuffer() {
	ctx := context.Background()
	conn, err := hand.Dial(ctx, "192.0.2.1:7471", hand.ConnConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	var remote hand.RemoteBuffer
	// The accept's private data is padded with zeros: the first 16 bytes.
	if err := remote.UnmarshalBinary(conn.PeerPrivateData()[:hand.RemoteBufferSize]); err != nil {
		log.Fatal(err) // e.g. "... length: 64 bytes at 0xfffffffffffffff5 run past the end of the 64-bit address space"
	}

	msg := "written by RDMA"
	const off = 100
	dst, err := remote.Slice(off, len(msg))
	if err != nil {
		log.Fatal(err) // the peer's buffer is too small for it
	}
	mr, err := conn.PD().Alloc(4096, hand.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	copy(mr.Bytes(), msg)
	send, _ := hand.NewSendChain(1, 1, 0)
	defer send.Close()
	poller, _ := hand.NewPoller(conn.SendCQ(), 1)
	defer poller.Close()
	// The entry is no longer than dst: SetWriteImmTo panics otherwise.
	send.Reserve(1).SetWriteImmTo(0, 1, hand.Signaled, off, mr.SGE(0, len(msg)), dst)
	if err := send.PostSend(conn.QP()); err != nil {
		log.Fatal(err)
	}
	wcs, err := poller.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := wcs[0].Err(); err != nil {
		log.Fatal(err) // e.g. a remote access error: the peer's device refused the rkey or range
	}
	if err := conn.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
}
