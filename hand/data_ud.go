package hand

import (
	"errors"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// GRHSize is the room a UD receive buffer keeps in front of the payload: the
// device writes the 40-byte Global Routing Header there when the packet has
// one (IBV_WC_GRH), and leaves it undefined otherwise. byte_len counts it.
const GRHSize = int(unsafe.Sizeof(verbs.GRH{}))

// UDRecvSGE is the scatter entry for a UD receive of up to payload bytes into
// the buffer at addr: GRHSize bytes of GRH room, then the payload.
func UDRecvSGE(addr uint64, payload uint32, lkey uint32) verbs.SGE {
	return verbs.SGE{Addr: addr, Length: payload + uint32(GRHSize), Lkey: lkey}
}

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
func SplitUD(buf []byte, w *WC) (*verbs.GRH, []byte, error) {
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
