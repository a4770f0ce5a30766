package rping

import (
	"encoding/binary"
	"fmt"
)

// Advert is struct rping_rdma_info, what the client sends before each RDMA
// operation: the address, rkey and length of one of its buffers (16 bytes:
// be64 addr, be32 rkey, be32 size).
//
// It is the peer's word, and the server posts an RDMA read or write from
// it. C's rping trusts it: it reads remote_len bytes into its own buffer
// whatever that length is, and writes its whole text into the advertised
// buffer whatever its size, leaving the device (or the peer's memory) to
// catch a lie. This server checks both before posting anything: ReadLen and
// WriteLen.
type Advert struct {
	Addr uint64
	RKey uint32
	Len  uint32
}

// ParseAdvert decodes the 16 bytes of a received advertisement; any other
// length is refused.
func ParseAdvert(b []byte) (Advert, error) {
	if len(b) != infoSize {
		return Advert{}, fmt.Errorf("advertisement of %d bytes, want %d", len(b), infoSize)
	}
	return Advert{Addr: binary.BigEndian.Uint64(b), RKey: binary.BigEndian.Uint32(b[8:]), Len: binary.BigEndian.Uint32(b[12:])}, nil
}

// span refuses an advertised buffer of n bytes at a.Addr that wraps around
// the address space.
func (a Advert) span(n int) error {
	if n > 0 && a.Addr+uint64(n)-1 < a.Addr {
		return fmt.Errorf("the peer's buffer at %#x of %d bytes wraps around the address space", a.Addr, n)
	}
	return nil
}

// ReadLen is the length of the RDMA read that fetches the advertised
// buffer into a local one of local bytes: all of it, which must fit, be
// non-empty and not wrap.
func (a Advert) ReadLen(local int) (int, error) {
	switch {
	case a.Len == 0:
		return 0, fmt.Errorf("the peer advertised an empty buffer (rkey %#x)", a.RKey)
	case int64(a.Len) > int64(local):
		return 0, fmt.Errorf("the peer's buffer is %d bytes, more than the %d of -S", a.Len, local)
	}
	return int(a.Len), a.span(int(a.Len))
}

// WriteLen checks an RDMA write of n bytes into the advertised buffer: it
// must fit in what the peer advertised and not wrap.
func (a Advert) WriteLen(n int) (int, error) {
	if n < 0 || int64(n) > int64(a.Len) {
		return 0, fmt.Errorf("the peer's buffer is %d bytes, too small for the %d to write back", a.Len, n)
	}
	return n, a.span(n)
}
