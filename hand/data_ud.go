package hand

import (
	"errors"
	"math"
	"net/netip"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// GRHSize is the room a UD receive buffer keeps in front of the payload: the
// device writes the 40-byte Global Routing Header there when the packet has
// one (IBV_WC_GRH), and leaves it undefined otherwise. byte_len counts it.
const GRHSize = int(unsafe.Sizeof(verbs.GRH{}))

// UDRecvSGE is the scatter entry for a UD receive of up to payload bytes into
// the buffer at addr: GRHSize bytes of GRH room, then the payload. It
// panics when the two do not fit an SGE's 32-bit length, which would wrap
// to less than the GRH.
func UDRecvSGE(addr uint64, payload uint32, lkey uint32) SGE {
	if payload > math.MaxUint32-uint32(GRHSize) {
		panic(errUDPayload) // a value made once: UDRecvSGE stays inlined
	}
	return verbs.SGE{Addr: addr, Length: payload + uint32(GRHSize), LKey: lkey}
}

var errUDPayload = errors.New("goverbs: UDRecvSGE: the payload and the 40-byte GRH room do not fit an SGE's 32-bit length")

// Errors of SplitUD; preallocated, so a failed split does not allocate.
var (
	ErrUDFailed = errors.New("goverbs: UD receive completion has an error status")
	ErrUDShort  = errors.New("goverbs: UD receive byte_len shorter than the GRH or longer than the buffer")
)

// SplitUD splits the receive buffer buf of a successful UD receive
// completion w into the GRH (nil when w has no IBV_WC_GRH) and the payload
// (the byte_len - GRHSize bytes after the GRH room). Both alias buf, which
// must be the memory the WR's scatter entry pointed at (registered memory,
// outside the Go heap). It does not allocate.
func SplitUD(buf []byte, w *WC) (*GRH, []byte, error) {
	if !w.OK() {
		return nil, nil, ErrUDFailed
	}
	n := int(w.ByteLen())
	if n < GRHSize || n > len(buf) {
		return nil, nil, ErrUDShort
	}
	var grh *verbs.GRH
	if w.HasGRH() {
		grh = (*verbs.GRH)(unsafe.Pointer(&buf[0]))
	}
	return grh, buf[GRHSize:n], nil
}

// ErrGRHUnknown is what GRHSource returns for a GRH area it cannot read.
var ErrGRHUnknown = errors.New("goverbs: UD receive: the GRH area holds neither a GRH nor an IPv6 or IPv4 header")

// GRHSource returns the source address of a UD receive from the 40-byte
// GRH area SplitUD returned (nil when the completion had no IBV_WC_GRH).
// The area has one of three layouts, told apart as libibverbs'
// ibv_init_ah_from_wc tells them:
//
//   - InfiniBand and RoCE v1: a GRH (IP version 6 in its first 4 bits), the
//     source GID at bytes 8-23.
//   - RoCE v2 over IPv6: the packet's IPv6 header, which has the GRH's
//     layout: the source address at bytes 8-23.
//   - RoCE v2 over IPv4: 20 bytes the device leaves undefined (zero on
//     rxe), then the 20-byte IPv4 header: the source address at bytes
//     32-35. It is this layout when the first 4 bits are not 6 and byte 20
//     says version 4; or when they are 6 (undefined bytes) and byte 20
//     starts a 20-byte IPv4 header with a valid checksum. Read as a GRH,
//     this area gives a SGID like ::4500:434 (the IPv4 header's first
//     bytes), which is why the GRH's SGID must not be used as is.
//
// A GID that maps an IPv4 address (RoCE v1 over IPv4) is returned as that
// IPv4 address, as GID.Addr does. It does not allocate.
func GRHSource(grh *GRH) (netip.Addr, error) {
	if grh == nil {
		return netip.Addr{}, ErrGRHUnknown
	}
	b := (*[GRHSize]byte)(unsafe.Pointer(grh))
	ip4 := b[20:40]
	v4 := netip.AddrFrom4([4]byte(ip4[12:16]))
	switch {
	case b[0]>>4 != 6 && ip4[0]>>4 == 4:
		return v4, nil
	case b[0]>>4 != 6:
		return netip.Addr{}, ErrGRHUnknown
	case ip4[0] == 0x45 && ipv4Checksum(ip4) == 0:
		// The undefined first 20 bytes happened to read as IPv6: the
		// IPv4 header's checksum decides, as in libibverbs.
		return v4, nil
	}
	return netip.AddrFrom16([16]byte(b[8:24])).Unmap(), nil
}

// ipv4Checksum is the ones' complement sum of an IPv4 header; 0 when the
// header's checksum field is right.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
