package pingaddr

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
)

const (
	// Size is the length of a Dest message: the C tools' buffer is
	// char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"],
	// 51 characters and the NUL, and they always write all of it.
	Size = 52

	// XSRQSize is the length of an XSRQDest message, ibv_xsrq_pingpong's
	// MSG_SIZE: "%04x:%06x:%06x:%06x:%06x:%32s" is 65 characters and the NUL.
	XSRQSize = 66

	// SRQLines is how many Dest messages ibv_srq_pingpong sends and reads
	// each way, its MAX_QP, whatever its -q.
	SRQLines = 256

	// Done is what the rc, uc, ud and srq clients write once they have the
	// server's addresses: sizeof "done", the NUL included.
	Done = "done\x00"

	// End is ibv_xsrq_pingpong's termination message, TERMINATION_MSG_SIZE
	// bytes: "END" and the NUL. The client writes it and reads it back.
	End = "END\x00"
)

// GID is a 16-byte global identifier in network order, as union ibv_gid
// holds it; on RoCE, an IPv6 address or an IPv4-mapped one. It converts to
// and from hand.GID, which has the same layout.
type GID [16]byte

// String formats g as glibc's inet_ntop(AF_INET6) does, which is what the C
// tools print: RFC 5952's text, as netip writes it, but for an address whose
// first six groups are zero and seventh is not, which inet_ntop writes
// IPv4-compatible ("::192.0.2.1") where netip writes "::c000:201". (An
// IPv4-mapped address, "::ffff:192.0.2.1", both write alike.)
func (g GID) String() string {
	if [12]byte(g[:12]) == [12]byte{} && (g[12] != 0 || g[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(g[12:])).String()
	}
	return netip.AddrFrom16(g).String()
}

// InterfaceID is the GID's last 8 bytes as a big-endian number. The C tools
// route globally (set the GRH) exactly when the peer's is not zero.
func (g GID) InterfaceID() uint64 {
	var v uint64
	for _, b := range g[8:] {
		v = v<<8 | uint64(b)
	}
	return v
}

// Dest is one QP's address as ibv_rc_pingpong, ibv_uc_pingpong,
// ibv_ud_pingpong and ibv_srq_pingpong send it (their struct
// pingpong_dest).
type Dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits: the sender's sq_psn, the receiver's rq_psn
	GID GID    // zero when the sender was run without -g
}

// String is the address as the C tools print it ("LID 0x0000, QPN
// 0x000011, PSN 0x5d2c1a, GID ::ffff:192.0.2.1").
func (d Dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", d.LID, d.QPN, d.PSN, d.GID)
}

// Marshal formats d as the C tools' sprintf("%04x:%06x:%06x:%s") does, NUL
// included. It fails only if QPN or PSN does not fit in 24 bits, where the
// C tools would print more digits and overrun their buffer.
func (d Dest) Marshal() ([Size]byte, error) {
	b, err := d.marshal()
	if err != nil {
		return b, fmt.Errorf("pingaddr: %w", err)
	}
	return b, nil
}

// marshal is Marshal with an error that does not say pingaddr.
func (d Dest) marshal() ([Size]byte, error) {
	var b [Size]byte
	if err := destLayout.marshal(b[:0], []uint32{uint32(d.LID), d.QPN, d.PSN}, &d.GID); err != nil {
		return [Size]byte{}, err
	}
	return b, nil
}

// Parse decodes one Dest message of exactly Size bytes, refusing anything
// the C tools' sprintf cannot have produced (see the package doc). Its
// errors are *SyntaxError.
func Parse(msg []byte) (Dest, error) { return parseDest(msg, 0) }

func parseDest(msg []byte, line int) (Dest, error) {
	var n [3]uint32
	var d Dest
	if err := destLayout.parse(msg, line, n[:], &d.GID); err != nil {
		return Dest{}, err
	}
	d.LID, d.QPN, d.PSN = uint16(n[0]), n[1], n[2]
	return d, nil
}

// XSRQDest is what ibv_xsrq_pingpong sends: one per connection, for the
// pair of QPs (an XRC receive QP and an XRC send QP) that serves it.
type XSRQDest struct {
	LID     uint16
	RecvQPN uint32 // the XRC receive QP: the peer's send QP connects to it
	SendQPN uint32 // the send QP: the peer's receive QP connects to it
	PSN     uint32 // both QPs' sq_psn, the peer's rq_psn (C: recv_psn)
	SRQN    uint32 // the XRC SRQ's number, for the peer's remote_srqn
	GID     GID
}

// String is the address as ibv_xsrq_pingpong prints it.
func (d XSRQDest) String() string {
	return fmt.Sprintf("LID %04x, QPN RECV %06x SEND %06x, PSN %06x, SRQN %06x, GID %s",
		d.LID, d.RecvQPN, d.SendQPN, d.PSN, d.SRQN, d.GID)
}

// Marshal formats d as ibv_xsrq_pingpong's "%04x:%06x:%06x:%06x:%06x:%32s"
// does, NUL included. It fails only if a QPN, the PSN or the SRQ number
// does not fit in 24 bits.
func (d XSRQDest) Marshal() ([XSRQSize]byte, error) {
	b, err := d.marshal()
	if err != nil {
		return b, fmt.Errorf("pingaddr: %w", err)
	}
	return b, nil
}

func (d XSRQDest) marshal() ([XSRQSize]byte, error) {
	var b [XSRQSize]byte
	if err := xsrqLayout.marshal(b[:0], []uint32{uint32(d.LID), d.RecvQPN, d.SendQPN, d.PSN, d.SRQN}, &d.GID); err != nil {
		return [XSRQSize]byte{}, err
	}
	return b, nil
}

// ParseXSRQ decodes one XSRQDest message of exactly XSRQSize bytes, as
// strictly as Parse.
func ParseXSRQ(msg []byte) (XSRQDest, error) { return parseXSRQ(msg, 0) }

func parseXSRQ(msg []byte, line int) (XSRQDest, error) {
	var n [5]uint32
	var d XSRQDest
	if err := xsrqLayout.parse(msg, line, n[:], &d.GID); err != nil {
		return XSRQDest{}, err
	}
	d.LID, d.RecvQPN, d.SendQPN, d.PSN, d.SRQN = uint16(n[0]), n[1], n[2], n[3], n[4]
	return d, nil
}

// A SyntaxError says where a peer's message departs from the C format.
type SyntaxError struct {
	Line   int    // the message's place on its channel, from 1 (a Reader counts); 0 from Parse
	Field  string // "LID", "QPN", "PSN", "GID", "RecvQPN", ...; "" for the message as a whole
	Offset int    // the byte of the message at fault
	Text   []byte // the field's bytes, or the whole message's
	Msg    string // what is wrong
}

// Error reads like
//
//	pingaddr: line 3: QPN "00001g": byte 10 is 'g', not a lowercase hex digit
func (e *SyntaxError) Error() string {
	b := []byte("pingaddr: ")
	if e.Line > 0 {
		b = fmt.Appendf(b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b = append(b, e.Field...)
	} else {
		b = append(b, "message"...)
	}
	b = append(b, ' ')
	const quoted = 80 // a Parse caller may hand over any length
	if len(e.Text) > quoted {
		b = strconv.AppendQuote(b, string(e.Text[:quoted]))
		b = append(b, "..."...)
	} else {
		b = strconv.AppendQuote(b, string(e.Text))
	}
	b = append(b, ": "...)
	b = append(b, e.Msg...)
	return string(b)
}

// field is one fixed-width field of lowercase hex digits.
type field struct {
	name   string
	digits int
}

// layout is a message format: numeric fields, then a GID of 32 digits, with
// ':' between them and a NUL after the last. Every field has a fixed width
// because the C format's widths are minimums that in-range values fill
// exactly.
type layout struct {
	fields []field // the numeric ones; the GID follows
	names  string  // "LID:QPN:PSN:GID", for errors
}

var (
	destLayout = layout{fields: []field{{"LID", 4}, {"QPN", 6}, {"PSN", 6}}, names: "LID:QPN:PSN:GID"}
	xsrqLayout = layout{fields: []field{{"LID", 4}, {"RecvQPN", 6}, {"SendQPN", 6}, {"PSN", 6}, {"SRQN", 6}},
		names: "LID:RecvQPN:SendQPN:PSN:SRQN:GID"}
)

const gidDigits = 2 * len(GID{})

func (l *layout) size() int {
	n := gidDigits + 1 // the GID and the NUL
	for _, f := range l.fields {
		n += f.digits + 1 // the field and its ':'
	}
	return n
}

const hexDigits = "0123456789abcdef"

// marshal appends the message to b, which has room for it.
func (l *layout) marshal(b []byte, nums []uint32, gid *GID) error {
	for i, f := range l.fields {
		v := nums[i]
		if v>>(4*f.digits) != 0 {
			return fmt.Errorf("%s %#x does not fit in %d bits", f.name, v, 4*f.digits)
		}
		for s := 4 * (f.digits - 1); s >= 0; s -= 4 {
			b = append(b, hexDigits[v>>s&0xf])
		}
		b = append(b, ':')
	}
	for _, c := range gid {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return nil // the NUL: the caller's buffer is zero there
}

// parse checks msg against l and decodes its numeric fields into nums and
// its GID into gid. line only labels errors.
func (l *layout) parse(msg []byte, line int, nums []uint32, gid *GID) error {
	bad := func(field string, off int, text []byte, format string, args ...any) error {
		return &SyntaxError{Line: line, Field: field, Offset: off, Text: bytes.Clone(text), Msg: fmt.Sprintf(format, args...)}
	}
	size := l.size()
	if len(msg) != size {
		return bad("", 0, msg, "%d bytes, want %d", len(msg), size)
	}
	end := bytes.IndexByte(msg, 0)
	if end < 0 {
		return bad("", size-1, msg, "no NUL: byte %d is %q where the C tools put their NUL", size-1, msg[size-1])
	}
	text := msg[:end]
	if n := bytes.Count(text, []byte{':'}) + 1; n != len(l.fields)+1 {
		return bad("", 0, msg, "%d fields before the NUL at byte %d, want %d (%s)", n, end, len(l.fields)+1, l.names)
	}
	off := 0
	for i := 0; i <= len(l.fields); i++ {
		f := field{"GID", gidDigits}
		if i < len(l.fields) {
			f = l.fields[i]
		}
		t := text[off:]
		if j := bytes.IndexByte(t, ':'); j >= 0 {
			t = t[:j]
		}
		for k, c := range t {
			if !isLowerHex(c) {
				return bad(f.name, off+k, t, "byte %d is %q, not a lowercase hex digit", off+k, c)
			}
		}
		switch {
		case len(t) > f.digits && f.name != "GID":
			return bad(f.name, off, t, "%d hex digits, want %d: more than %d bits", len(t), f.digits, 4*f.digits)
		case len(t) != f.digits && i == len(l.fields):
			return bad(f.name, off, t, "%d hex digits before the NUL at byte %d, want %d", len(t), end, f.digits)
		case len(t) != f.digits:
			return bad(f.name, off, t, "%d hex digits, want %d", len(t), f.digits)
		}
		if i < len(l.fields) {
			var v uint32
			for _, c := range t {
				v = v<<4 | uint32(unhex(c))
			}
			nums[i] = v
		} else {
			for k := range gid {
				gid[k] = unhex(t[2*k])<<4 | unhex(t[2*k+1])
			}
		}
		off += len(t) + 1
	}
	// Every field had its width, so the NUL is the last byte: nothing can
	// follow it.
	return nil
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
