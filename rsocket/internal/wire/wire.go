// Package wire encodes and decodes what rsocket peers exchange: the
// connection data carried as rdma_cm private data, the 32-bit immediate
// data of every RDMA write with immediate, and the buffer advertisements
// (struct rs_sge) a receiver writes into its peer's target list. Every
// decoder checks each field it returns and says which field was wrong.
package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Version is the only connection data version rsocket has defined.
const Version = 1

// Connection data flags.
const (
	// FlagNet says the sender is big-endian: the buffer advertisements it
	// writes into its peer's target list, and expects to find in its own,
	// are in network byte order. Without it they are little-endian.
	FlagNet = 1 << 0
	// FlagIOMap says the sender knows the iomap layout (a table of
	// TargetIOMapSize entries right after its target list); the size is
	// what says whether it offers one.
	FlagIOMap = 1 << 1
)

// ConnDataLen is the length of the connection data on the wire.
const ConnDataLen = 40

// SGELen is the length of a buffer advertisement (struct rs_sge).
const SGELen = 16

// MaxTargetSGL is the most target list entries a peer may declare; rsocket
// uses 2. The bound keeps the list's span within reason.
const MaxTargetSGL = 256

// SGE is a remote buffer: address, rkey and length.
type SGE struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// ConnData is struct rs_conn_data: what each side sends with rdma_connect
// and rdma_accept.
type ConnData struct {
	Version uint8
	Flags   uint8
	// Credits are the data messages the sender can receive at once: its
	// receive queue.
	Credits uint16
	// TargetIOMapSize is the sender's iomap table size, in rsocket's
	// 8-bit scale (0: none).
	TargetIOMapSize uint8
	// TargetSGL is the sender's target list: Length entries of SGELen
	// bytes where the peer writes buffer advertisements.
	TargetSGL SGE
	// DataBuf is the first buffer the peer may write data into: half of
	// the sender's receive buffer, which starts at DataBuf.Addr and is
	// 2*DataBuf.Length long.
	DataBuf SGE
}

// Append appends the wire form of d (all fields big-endian, whatever
// FlagNet says) to b.
func (d *ConnData) Append(b []byte) []byte {
	b = append(b, d.Version, d.Flags)
	b = binary.BigEndian.AppendUint16(b, d.Credits)
	b = append(b, 0, 0, 0, d.TargetIOMapSize)
	b = appendSGE(b, binary.BigEndian, d.TargetSGL)
	return appendSGE(b, binary.BigEndian, d.DataBuf)
}

func appendSGE(b []byte, o binary.AppendByteOrder, s SGE) []byte {
	b = o.AppendUint64(b, s.Addr)
	b = o.AppendUint32(b, s.Key)
	return o.AppendUint32(b, s.Length)
}

func readSGE(b []byte, o binary.ByteOrder) SGE {
	return SGE{Addr: o.Uint64(b), Key: o.Uint32(b[8:]), Length: o.Uint32(b[12:])}
}

// FieldError is a peer's field that failed a check.
type FieldError struct {
	What   string // the message: "connection data", "immediate data", ...
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("rsocket peer: %s: %s: %s", e.What, e.Field, e.Reason)
}

func connErr(field, format string, args ...any) error {
	return &FieldError{What: "connection data", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseConnData decodes and checks the connection data at the start of
// private data b (rdma_cm pads private data with zeros, so b may be
// longer). It refuses a short b, a version other than 1, no credits, a
// target list of no entries or more than MaxTargetSGL or one that wraps
// the address space, and an empty data buffer or one whose receive buffer
// (twice its length) wraps. Unknown flag bits and the reserved bytes are
// ignored, as rsocket ignores them.
func ParseConnData(b []byte) (ConnData, error) {
	var d ConnData
	if len(b) < ConnDataLen {
		return d, connErr("length", "%d bytes, want at least %d", len(b), ConnDataLen)
	}
	d.Version, d.Flags = b[0], b[1]
	d.Credits = binary.BigEndian.Uint16(b[2:])
	d.TargetIOMapSize = b[7]
	d.TargetSGL = readSGE(b[8:], binary.BigEndian)
	d.DataBuf = readSGE(b[24:], binary.BigEndian)
	if d.Version != Version {
		return d, connErr("version", "%d, want %d", d.Version, Version)
	}
	if d.Credits == 0 {
		return d, connErr("credits", "0: the peer could receive nothing")
	}
	if n := d.TargetSGL.Length; n == 0 || n > MaxTargetSGL {
		return d, connErr("target_sgl.length", "%d entries, want 1 to %d", n, MaxTargetSGL)
	}
	if d.TargetSGL.Addr > math.MaxUint64-uint64(d.TargetSGL.Length)*SGELen {
		return d, connErr("target_sgl.addr", "%#x with %d entries wraps the address space", d.TargetSGL.Addr, d.TargetSGL.Length)
	}
	if d.DataBuf.Length == 0 {
		return d, connErr("data_buf.length", "0: no room to send into")
	}
	if d.DataBuf.Addr > math.MaxUint64-2*uint64(d.DataBuf.Length) {
		return d, connErr("data_buf.addr", "%#x with a receive buffer of 2*%d bytes wraps the address space", d.DataBuf.Addr, d.DataBuf.Length)
	}
	return d, nil
}

// Op is the operation in the top 3 bits of the immediate data.
type Op uint8

// The operations. RS_OP_WRITE (2) marks rsocket's own direct writes, which
// carry no immediate data; it and the reserved values never arrive from a
// well-behaved peer.
const (
	OpData     Op = 0
	OpWrite    Op = 2
	OpSGL      Op = 4
	OpIOMapSGL Op = 6
	OpCtrl     Op = 7
)

func (o Op) String() string {
	switch o {
	case OpData:
		return "data"
	case OpWrite:
		return "write"
	case OpSGL:
		return "sgl"
	case OpIOMapSGL:
		return "iomap_sgl"
	case OpCtrl:
		return "ctrl"
	}
	return fmt.Sprintf("reserved op %d", uint8(o))
}

// Control codes of OpCtrl.
const (
	CtrlDisconnect = 0
	CtrlKeepalive  = 1
	CtrlShutdown   = 2
)

// MaxImmData is the largest value the low 29 bits carry.
const MaxImmData = 1<<29 - 1

// Imm makes the immediate data of op with data (masked to 29 bits).
func Imm(op Op, data uint32) uint32 { return uint32(op)<<29 | data&MaxImmData }

// SplitImm splits immediate data into its op and data.
func SplitImm(imm uint32) (Op, uint32) { return Op(imm >> 29), imm & MaxImmData }

// Msg is a decoded, checked immediate data.
type Msg struct {
	Op   Op
	Data uint32 // data: bytes written; sgl: the credit sequence; ctrl: the code
}

func immErr(field, format string, args ...any) error {
	return &FieldError{What: "immediate data", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseImm decodes and checks immediate data as a receiver that offered no
// iomap sees it: a data length must be at most room (the bytes advertised
// and not yet written); an sgl credit sequence at most maxCredits ahead of
// sent (the sender's count of data messages, in 16 bits; Data keeps the
// value as sent, to be read as 16 bits); a control code
// one of rsocket's three. The write, iomap and reserved ops are refused.
func ParseImm(imm uint32, room uint32, sent uint16, maxCredits uint16) (Msg, error) {
	op, data := SplitImm(imm)
	m := Msg{Op: op, Data: data}
	switch op {
	case OpData:
		if data > room {
			return m, immErr("length", "%d bytes, but %d were advertised and not yet written", data, room)
		}
	case OpSGL:
		// rsocket sends its 16-bit count plus its queue size unreduced
		// (up to 2*65535) and reads the sum back as 16 bits.
		if data >= 1<<17 {
			return m, immErr("credits", "%#x is more than a 16-bit count plus a 16-bit queue size", data)
		}
		if ahead := uint16(data) - sent; ahead > maxCredits {
			return m, immErr("credits", "sequence %d is %d past the %d messages sent, more than the %d receives the peer declared", data, ahead, sent, maxCredits)
		}
	case OpCtrl:
		if data > CtrlShutdown {
			return m, immErr("control", "unknown control code %d", data)
		}
	case OpIOMapSGL:
		return m, immErr("op", "iomap update, but no iomap was offered")
	default:
		return m, immErr("op", "%s is not sent over the wire", op)
	}
	return m, nil
}

// AppendSGE appends a buffer advertisement in the byte order bigEndian
// says (the receiving peer's: FlagNet of its connection data).
func AppendSGE(b []byte, s SGE, bigEndian bool) []byte {
	if bigEndian {
		return appendSGE(b, binary.BigEndian, s)
	}
	return appendSGE(b, binary.LittleEndian, s)
}

// Region is a peer's receive buffer: where its buffer advertisements may
// point.
type Region struct {
	Addr, Len uint64
	Key       uint32
}

// RecvBuffer is the receive buffer d declares: DataBuf's start, twice its
// length (rsocket advertises it by halves), under its key.
func (d *ConnData) RecvBuffer() Region {
	return Region{Addr: d.DataBuf.Addr, Len: 2 * uint64(d.DataBuf.Length), Key: d.DataBuf.Key}
}

// ParseSGE decodes a buffer advertisement a peer wrote into this side's
// target list (in this side's byte order: bigEndian) and checks it against
// the peer's receive buffer r (CheckSGE).
func ParseSGE(b []byte, bigEndian bool, r Region) (SGE, error) {
	if len(b) < SGELen {
		return SGE{}, &FieldError{What: "buffer advertisement", Field: "length", Reason: fmt.Sprintf("%d bytes, want %d", len(b), SGELen)}
	}
	var s SGE
	if bigEndian {
		s = readSGE(b, binary.BigEndian)
	} else {
		s = readSGE(b, binary.LittleEndian)
	}
	return s, CheckSGE(s, r)
}

// CheckSGE checks that advertisement s is not empty and lies within the
// peer's receive buffer r, under its key.
func CheckSGE(s SGE, r Region) error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{What: "buffer advertisement", Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if s.Key != r.Key {
		return bad("key", "%#x, but the peer's receive buffer has key %#x", s.Key, r.Key)
	}
	if s.Length == 0 {
		return bad("length", "0")
	}
	if s.Addr < r.Addr || s.Addr-r.Addr > r.Len || uint64(s.Length) > r.Len-(s.Addr-r.Addr) {
		return bad("addr", "[%#x, +%d) is not within the peer's receive buffer [%#x, +%d)", s.Addr, s.Length, r.Addr, r.Len)
	}
	return nil
}

// ScaleToValue decodes rsocket's 8-bit scale (iomap sizes): values up to
// 128 are themselves, above that the low 7 bits times 256.
func ScaleToValue(v uint8) int {
	if v <= 128 {
		return int(v)
	}
	return int(v&^128) << 8
}
