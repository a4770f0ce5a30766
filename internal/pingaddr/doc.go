// Package pingaddr is the text address exchange of rdma-core's ping-pong
// examples (libibverbs/examples: ibv_rc_pingpong, ibv_uc_pingpong,
// ibv_ud_pingpong, ibv_srq_pingpong and ibv_xsrq_pingpong), so a Go program
// can stand on either side of the TCP connection that comes before the QPs
// connect. It is pure Go: no cgo, no verbs; it only encodes and decodes.
//
// # What the C tools send
//
// rc, uc, ud and srq send one message per QP, a Dest:
//
//	sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, wire_gid)
//
// into char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"]
// and write all Size (52) bytes: 51 characters and the NUL. The GID is 32
// lowercase hex digits of its 16 bytes in order (gid_to_wire_gid prints each
// 32-bit word htobe32'd with "%08x", which is the bytes in memory order on
// any host; wire_gid_to_gid undoes it), so ::ffff:192.0.2.1 goes out as
// 00000000000000000000ffffc0000201. The client writes its message first and
// the server answers; then the client writes Done ("done" and its NUL).
//
//   - rc and uc: one message each way. The receiver uses LID, QPN and PSN for
//     INIT->RTR (dlid, dest_qp_num, rq_psn) and routes globally through the
//     GID when its interface ID (the last 8 bytes) is not zero.
//   - ud: the same message, but nothing connects: the receiver builds an
//     address handle from LID and GID (hop limit 64 where rc uses 1) and
//     sends to QPN with the fixed Q_Key 0x11111111, which is not on the wire.
//     The sender's PSN is its own sq_psn; the receiver ignores it.
//   - srq: SRQLines (256, the tool's MAX_QP) messages each way whatever -q
//     is: one per QP, then all-zero messages ("0000:000000:000000:" and 32
//     zeros) for the rest. The server reads all 256 before it connects and
//     answers. WriteSRQ and ReadSRQ do that.
//   - xsrq: a different message, XSRQDest, "%04x:%06x:%06x:%06x:%06x:%32s"
//     (LID, receive QPN, send QPN, PSN, SRQ number, GID) in XSRQSize (66)
//     bytes; the client writes first, the server answers each client on its
//     own connection, and at the end each side writes End ("END" and its
//     NUL) on it.
//
// # What the decoder trusts
//
// Nothing: a peer's message is untrusted input. The C tools read it with
// sscanf("%x:%x:%x:%s"), which takes almost anything (short fields, upper
// case, 0x prefixes, signs, spaces, values that do not fit, no NUL, and a
// GID string long enough to overrun their 33-byte buffer). Parse and
// ParseXSRQ accept exactly what the C tools' sprintf can produce: the exact
// length, every field at its fixed width in lowercase hex (so LID fits 16
// bits and QPN, PSN and SRQ number fit 24), ':' between fields, the NUL last
// and nothing after it. Anything else is a *SyntaxError that names the
// message's line on the channel, the field and the byte. A message Parse
// accepts marshals back to the same bytes.
//
// What the decoder does not check is meaning: a QPN that no QP has, a PSN,
// a LID or GID that routes nowhere all decode, and it is the verbs layer
// (INIT->RTR, the address handle) that finds out. ReadSRQ does check that
// the zero messages come only after the real ones.
package pingaddr
