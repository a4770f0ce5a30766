package rping

import (
	"fmt"

	"github.com/goverbs/goverbs/hand"
)

// The client's advertisement, what it sends before each RDMA operation, is
// struct rping_rdma_info { uint64_t buf; uint32_t rkey; uint32_t size; }
// in network byte order: the address, rkey and length of one of its
// buffers, which is hand.RemoteBuffer's binary form. Its UnmarshalBinary
// refuses any length but 16 and a buffer that wraps the address space.
//
// It is the peer's word, and the server posts an RDMA read or write from
// it. C's rping trusts it: it reads remote_len bytes into its own buffer
// whatever that length is, and writes its whole text into the advertised
// buffer whatever its size, leaving the device (or the peer's memory) to
// catch a lie. This server checks both before posting anything: readFrom
// and writeTo.

// readFrom checks the advertised buffer adv before an RDMA read fetches
// all of it into a local buffer of local bytes: it must be non-empty and
// fit.
func readFrom(adv hand.RemoteBuffer, local int) error {
	switch {
	case adv.Len() == 0:
		return fmt.Errorf("the peer advertised an empty buffer (rkey %#x)", adv.RKey())
	case adv.Len() > local:
		return fmt.Errorf("the peer's buffer is %d bytes, more than the %d of -S", adv.Len(), local)
	}
	return nil
}

// writeTo returns where an RDMA write of n bytes into the advertised
// buffer goes: its first n bytes, which it must hold.
func writeTo(adv hand.RemoteBuffer, n int) (hand.RemoteBuffer, error) {
	dst, err := adv.Slice(0, n)
	if err != nil {
		return hand.RemoteBuffer{}, fmt.Errorf("the peer's buffer is %d bytes, too small for the %d to write back", adv.Len(), n)
	}
	return dst, nil
}
