package hand

import (
	"encoding/binary"
	"fmt"
	"math"
	"syscall"
)

// RemoteBuffer is memory a peer has registered and advertised for RDMA
// reads and writes: the address of its first byte (as the peer's work
// requests see it), its length and the rkey that grants access to it.
// A program makes one from its own MR (MR.Remote) to send to the peer;
// the peer decodes it (UnmarshalBinary) and posts RDMA writes and reads to
// it (SendWRs.SetWriteTo, SetWriteImmTo, SetReadFrom).
//
// Its fields are unexported so that every RemoteBuffer keeps the one
// invariant the data path relies on: its bytes do not run past the end of
// the 64-bit address space. The zero value is an empty buffer at address 0.
//
// What is checked where:
//   - UnmarshalBinary: exactly RemoteBufferSize bytes, and a buffer that
//     does not wrap the address space. A length of 0 is accepted: it is
//     the empty buffer Slice(n, 0) makes, and a zero-length RDMA operation
//     touches no memory. A program that needs bytes checks Len.
//   - Slice: the part asked for lies within the buffer.
//   - SetWriteTo, SetWriteImmTo, SetReadFrom: the local scatter entry is
//     no longer than the buffer, so a transfer never reaches past what the
//     peer advertised.
//   - The peer's device, when the operation arrives: the rkey, the access
//     it grants (the MR's AccessRemoteRead, AccessRemoteWrite), and that
//     the bytes lie within the MR the rkey names. A failure there completes
//     the operation with an error status (a remote access error) and never
//     touches memory; the peer's memory outside its MRs is safe whatever
//     a RemoteBuffer says. What the checks above add is that a transfer
//     stays within what the peer advertised, not just within its MR.
type RemoteBuffer struct {
	addr   uint64
	length uint64 // at most math.MaxInt, and addr+length <= 2^64
	rkey   uint32
}

// RemoteBufferSize is the length of a marshalled RemoteBuffer.
const RemoteBufferSize = 16

// Remote returns the whole of mr as a RemoteBuffer, for a peer to read or
// write as mr's access flags allow (AccessRemoteRead, AccessRemoteWrite).
// Remote().Slice advertises a part of it.
func (mr *MR) Remote() RemoteBuffer {
	return RemoteBuffer{addr: mr.addr, length: uint64(mr.length), rkey: mr.rkey}
}

// NewRemoteBuffer makes a RemoteBuffer of length bytes at addr under rkey,
// for a peer's buffer learnt some other way than UnmarshalBinary (a memory
// window's range and rkey, another wire format). It refuses a negative
// length and a buffer that runs past the end of the address space.
func NewRemoteBuffer(addr uint64, length int, rkey uint32) (RemoteBuffer, error) {
	const op = "NewRemoteBuffer"
	if length < 0 {
		return RemoteBuffer{}, &AttrError{Op: op, Field: "length", Reason: fmt.Sprintf("%d: negative", length)}
	}
	if err := checkWrap(op, addr, uint64(length)); err != nil {
		return RemoteBuffer{}, err
	}
	return RemoteBuffer{addr: addr, length: uint64(length), rkey: rkey}, nil
}

// checkWrap refuses length bytes at addr whose last byte's address would
// wrap around to the start of the address space: the peer's device would
// see a different range than the one checked.
func checkWrap(op string, addr, length uint64) error {
	if length > 0 && addr+(length-1) < addr {
		return &AttrError{Op: op, Field: "length", Reason: fmt.Sprintf(
			"%d bytes at %#x run past the end of the 64-bit address space", length, addr)}
	}
	return nil
}

// Addr returns the address of the buffer's first byte, as the peer's
// device sees it (a work request's remote_addr).
func (r RemoteBuffer) Addr() uint64 { return r.addr }

// Len returns the buffer's length in bytes.
func (r RemoteBuffer) Len() int { return int(r.length) }

// RKey returns the remote key that grants access to the buffer.
func (r RemoteBuffer) RKey() uint32 { return r.rkey }

// String describes the buffer, for logs and errors.
func (r RemoteBuffer) String() string {
	return fmt.Sprintf("%d bytes at %#x, rkey %#x", r.length, r.addr, r.rkey)
}

// Slice returns the n bytes at offset off of r, under the same rkey. It
// returns an error, not a panic as a Go slice expression would, when they
// are not within r: offsets and lengths are usually computed from what a
// peer advertised, and a peer's lie is input for the program to handle,
// not a crash. The error wraps syscall.EINVAL. Slice does not allocate
// unless it fails.
func (r RemoteBuffer) Slice(off, n int) (RemoteBuffer, error) {
	// n > length-off, not off+n > length: the sum can wrap.
	if off < 0 || n < 0 || uint64(off) > r.length || uint64(n) > r.length-uint64(off) {
		return RemoteBuffer{}, &remoteRangeError{off: off, n: n, length: r.length}
	}
	return RemoteBuffer{addr: r.addr + uint64(off), length: uint64(n), rkey: r.rkey}, nil
}

// remoteRangeError is a Slice outside its buffer. It keeps the numbers and
// formats them only when printed.
type remoteRangeError struct {
	off, n int
	length uint64
}

func (e *remoteRangeError) Error() string {
	return fmt.Sprintf("goverbs: RemoteBuffer.Slice: %d bytes at offset %d are outside the remote buffer's %d",
		e.n, e.off, e.length)
}

// Unwrap returns syscall.EINVAL, as an AttrError does.
func (e *remoteRangeError) Unwrap() error { return syscall.EINVAL }

// AppendBinary appends r's RemoteBufferSize bytes to b, in the one format
// goverbs uses for a remote buffer: rdma-core's rping's struct
// rping_rdma_info { uint64_t buf; uint32_t rkey; uint32_t size; }, in
// network byte order: the address as a big-endian uint64, then the rkey
// and the length as big-endian uint32s. A program that speaks it
// interoperates with rping and goverbs-rping.
//
// A buffer longer than the format's 32-bit length (an MR of 4 GiB or more)
// is refused, with b returned as it was: advertise a Slice of it. Given b
// with room for the bytes, AppendBinary does not allocate.
func (r RemoteBuffer) AppendBinary(b []byte) ([]byte, error) {
	if r.length > math.MaxUint32 {
		return b, &AttrError{Op: "RemoteBuffer.AppendBinary", Field: "length", Reason: fmt.Sprintf(
			"%d bytes, more than the format's 32 bits: advertise a Slice of at most %d", r.length, uint32(math.MaxUint32))}
	}
	b = binary.BigEndian.AppendUint64(b, r.addr)
	b = binary.BigEndian.AppendUint32(b, r.rkey)
	return binary.BigEndian.AppendUint32(b, uint32(r.length)), nil
}

// MarshalBinary returns r's RemoteBufferSize bytes, as AppendBinary
// appends them.
func (r RemoteBuffer) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, RemoteBufferSize))
}

// UnmarshalBinary decodes what AppendBinary made (and what rping sends).
// The bytes are the peer's: it refuses any length but RemoteBufferSize and
// a buffer that runs past the end of the address space, with an
// *AttrError naming the field, and leaves r unchanged. See RemoteBuffer
// for what is checked later.
func (r *RemoteBuffer) UnmarshalBinary(b []byte) error {
	const op = "RemoteBuffer.UnmarshalBinary"
	if len(b) != RemoteBufferSize {
		return &AttrError{Op: op, Field: "data", Reason: fmt.Sprintf(
			"%d bytes, want %d (be64 address, be32 rkey, be32 length)", len(b), RemoteBufferSize)}
	}
	d := RemoteBuffer{
		addr:   binary.BigEndian.Uint64(b),
		rkey:   binary.BigEndian.Uint32(b[8:]),
		length: uint64(binary.BigEndian.Uint32(b[12:])),
	}
	if err := checkWrap(op, d.addr, d.length); err != nil {
		return err
	}
	*r = d
	return nil
}
