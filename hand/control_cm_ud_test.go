package hand

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// What the datagram endpoints refuse before they make anything, so before
// rdma-core is even loaded: each error names the operation and the field.
func TestUDConfigRefused(t *testing.T) {
	ctx := context.Background()
	attrErr := func(t *testing.T, err error, op, field string) {
		t.Helper()
		var ae *AttrError
		require.True(t, errors.As(err, &ae), "%v", err)
		require.Equal(t, op, ae.Op)
		require.Equal(t, field, ae.Field)
	}
	_, err := DialUD(ctx, "192.0.2.1:7174", UDConfig{PrivateData: make([]byte, maxSIDRReqData+1)})
	attrErr(t, err, "DialUD", "PrivateData")
	_, err = DialUD(ctx, "192.0.2.1:7174", UDConfig{Caps: QPCaps{MaxSendWR: -1}})
	require.Error(t, err)

	r := &UDRequest{}
	_, err = r.Accept(ctx, UDConfig{PrivateData: make([]byte, maxSIDRRepData+1)})
	attrErr(t, err, "UDRequest.Accept", "PrivateData")
	require.False(t, r.done, "a refused config leaves the request pending")
	attrErr(t, r.Reject(make([]byte, maxSIDRRepData+1)), "UDRequest.Reject", "data")

	_, err = NewMulticast(ctx, "192.0.2.1", UDConfig{BeforeConnect: func(*UDConn) error { return nil }})
	attrErr(t, err, "NewMulticast", "BeforeConnect")
	_, err = NewMulticast(ctx, "192.0.2.1", UDConfig{PrivateData: []byte("x")})
	attrErr(t, err, "NewMulticast", "PrivateData")
}

func TestUDPQKey(t *testing.T) {
	require.Equal(t, uint32(0x01234567), UDPQKey, "RDMA_UDP_QKEY, which udaddy and mckey rely on")
	require.Equal(t, 0xFFFFFF, McastQPN)
}
