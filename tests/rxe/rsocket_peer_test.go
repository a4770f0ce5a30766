package rxe

// What the scripted rsocket peers on hand share: the lying peer of
// rsocket_badpeer_test.go and the silent peer of rsocket_keepalive_test.go.
// rsocket's wire format is encoded here from docs/rsocket.md, on purpose
// apart from the package's own encoder (rsocket/internal/wire): the tests
// then check that encoder against an independent reading of the format
// instead of repeating it.

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/hand"
)

// rsConnData is struct rs_conn_data (40 bytes, big-endian).
type rsConnData struct {
	version, flags uint8
	credits        uint16
	tgtAddr        uint64
	tgtKey, tgtLen uint32
	bufAddr        uint64
	bufKey, bufLen uint32
}

func (d rsConnData) bytes() []byte {
	b := []byte{d.version, d.flags}
	b = binary.BigEndian.AppendUint16(b, d.credits)
	b = append(b, 0, 0, 0, 0) // reserved, target_iomap_size 0
	b = binary.BigEndian.AppendUint64(b, d.tgtAddr)
	b = binary.BigEndian.AppendUint32(b, d.tgtKey)
	b = binary.BigEndian.AppendUint32(b, d.tgtLen)
	b = binary.BigEndian.AppendUint64(b, d.bufAddr)
	b = binary.BigEndian.AppendUint32(b, d.bufKey)
	return binary.BigEndian.AppendUint32(b, d.bufLen)
}

func parseRsConnData(t *testing.T, b []byte) rsConnData {
	t.Helper()
	require.GreaterOrEqual(t, len(b), 40, "rsocket's connection data")
	d := rsConnData{version: b[0], flags: b[1], credits: binary.BigEndian.Uint16(b[2:]),
		tgtAddr: binary.BigEndian.Uint64(b[8:]), tgtKey: binary.BigEndian.Uint32(b[16:]), tgtLen: binary.BigEndian.Uint32(b[20:]),
		bufAddr: binary.BigEndian.Uint64(b[24:]), bufKey: binary.BigEndian.Uint32(b[32:]), bufLen: binary.BigEndian.Uint32(b[36:])}
	require.EqualValues(t, 1, d.version, "rsocket's connection data version")
	return d
}

// Immediate data: op in the top 3 bits.
const (
	rsOpData = 0
	rsOpSGL  = 4
	rsOpCtrl = 7
)

func rsImm(op, v uint32) uint32 { return op<<29 | v }

// rsFlags is the flags byte of this host: bit 0 when big-endian (the byte
// order of buffer advertisements), bit 1 (iomap layout known).
func rsFlags() uint8 {
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		return 3
	}
	return 2
}

// rsPeerConfig is the hand.ConnConfig of a scripted rsocket peer, for
// Dial or Accept: RC retry counts of 7, as rsocket's, and, before the
// connection data goes out, MRs of the given sizes registered on the
// Conn's PD for local and remote write, handed to fill, which returns the
// connection data (and may fill the MRs), then recvs receives posted from
// rc, of no scatter list: rsocket's messages are RDMA writes with
// immediate data. When connecting fails, the MRs are closed before the
// Conn; once it succeeds, they are the caller's, who keeps them from fill.
func rsPeerConfig(rc *hand.RecvChain, recvs int, sizes []int, fill func(mrs []*hand.MR) rsConnData) hand.ConnConfig {
	priv := make([]byte, 40)
	var mrs []*hand.MR
	closeMRs := func() {
		for _, mr := range mrs {
			mr.Close()
		}
		mrs = nil
	}
	return hand.ConnConfig{
		Caps:      hand.QPCaps{MaxSendWR: 32, MaxRecvWR: recvs, MaxSendSGE: 1, MaxRecvSGE: 1},
		SignalAll: true, RetryCount: 7, RNRRetryCount: 7,
		PrivateData: priv,
		BeforeConnect: func(h *hand.Conn) error {
			for _, n := range sizes {
				mr, err := h.PD().Alloc(n, hand.AccessLocalWrite|hand.AccessRemoteWrite)
				if err != nil {
					closeMRs()
					return err
				}
				mrs = append(mrs, mr)
			}
			copy(priv, fill(mrs).bytes())
			v := rc.Reserve(recvs)
			for i := range recvs {
				v.WR(i).WRID = 1<<63 | uint64(i) // a receive, in a failure message
				v.WR(i).NumSGE = 0
			}
			if err := rc.PostRecv(h.QP()); err != nil {
				closeMRs()
				return err
			}
			return nil
		},
		AfterFailure: func(*hand.Conn) { closeMRs() },
	}
}
