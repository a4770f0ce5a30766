package pingpong

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/hand"
)

// MsgSize is the length of one side's address on the TCP side channel:
// ibv_rc_pingpong sends sizeof "0000:000000:000000:" plus 32 GID digits,
// with the terminating NUL, whatever the values.
const MsgSize = len("0000:000000:000000:00000000000000000000000000000000") + 1

// doneMsg is what the client sends last, NUL included, as the C tool does.
var doneMsg = []byte("done\x00")

// Dest is what one side tells the other before the QPs connect.
type Dest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID hand.GID
}

// Marshal formats d as ibv_rc_pingpong does ("%04x:%06x:%06x:%s", the GID
// as 32 hex digits of its bytes in order), NUL-padded to MsgSize.
func (d Dest) Marshal() [MsgSize]byte {
	var b [MsgSize]byte
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN, d.PSN, hex.EncodeToString(d.GID[:]))
	copy(b[:MsgSize-1], s)
	return b
}

// ParseDest reads what Marshal (or ibv_rc_pingpong) wrote.
func ParseDest(b []byte) (Dest, error) {
	var d Dest
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	f := strings.Split(string(b), ":")
	if len(f) != 4 {
		return d, fmt.Errorf("peer address %q: want LID:QPN:PSN:GID", b)
	}
	var v [3]uint64
	for i, bits := range [3]int{16, 24, 24} {
		n, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return d, fmt.Errorf("peer address %q: field %d: %w", b, i+1, err)
		}
		v[i] = n
	}
	g, err := hex.DecodeString(f[3])
	if err != nil || len(g) != len(d.GID) {
		return d, fmt.Errorf("peer address %q: GID: want 32 hex digits", b)
	}
	d.LID, d.QPN, d.PSN = uint16(v[0]), uint32(v[1]), uint32(v[2])
	copy(d.GID[:], g)
	return d, nil
}

// String is the GID as inet_ntop(AF_INET6) prints it, as the C tool shows it.
func (d Dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", d.LID, d.QPN, d.PSN, d.GID)
}
