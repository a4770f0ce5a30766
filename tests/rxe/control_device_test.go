package rxe

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

func TestControlDevices(t *testing.T) {
	name, _ := RequireDevice(t)
	devs, err := hand.Devices()
	require.NoError(t, err)
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
		if d.Name == name {
			require.NotZero(t, d.GUID, "%s GUID", name)
			require.Equal(t, verbs.NodeCa, d.NodeType)
		}
	}
	require.Contains(t, names, name)
	t.Logf("devices: %v", names)

	first, err := hand.Open("")
	require.NoError(t, err)
	require.Contains(t, names, first.Name())
	require.NoError(t, first.Close())

	_, err = hand.Open("no-such-device")
	require.ErrorIs(t, err, hand.ErrNoDevice)
	require.ErrorContains(t, err, name, "the error lists the devices there are")
}

func TestControlQueryDeviceAndPort(t *testing.T) {
	ctx, _ := ctlDevice(t)
	da, err := ctx.QueryDevice()
	require.NoError(t, err)
	require.GreaterOrEqual(t, da.PhysPortCnt, uint8(1))
	require.Positive(t, da.MaxQP)
	dx, err := ctx.QueryDeviceEx()
	require.NoError(t, err)
	require.Equal(t, da.MaxQP, dx.OrigAttr.MaxQP)

	pa, err := ctx.QueryPort(1)
	require.NoError(t, err)
	require.Equal(t, verbs.PortActive, pa.State, "port 1 state")
	require.Equal(t, verbs.LinkLayerEthernet, uint32(pa.LinkLayer), "rxe is RoCE")
	require.Positive(t, pa.GIDTblLen)
	t.Logf("%s: max_qp %d, port 1 active MTU %d, %d GIDs", ctx.Name(), da.MaxQP, 128<<pa.ActiveMTU, pa.GIDTblLen)

	_, err = ctx.QueryPort(0)
	var ae *hand.AttrError
	require.ErrorAs(t, err, &ae)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = ctx.QueryPort(2)
	require.ErrorIs(t, err, syscall.EINVAL, "rxe has one port: the kernel refuses port 2")
	require.EqualError(t, err, "port 2: ibv_query_port: invalid argument (EINVAL)")
	var ve *hand.VerbError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ibv_query_port", ve.Func())
}

func TestControlGIDTable(t *testing.T) {
	ctx, gidIndex := ctlDevice(t)
	addr := ctlAddr(t)
	table, err := ctx.GIDTable(1)
	require.NoError(t, err)
	require.NotEmpty(t, table)
	for _, e := range table {
		t.Log(e)
		require.Equal(t, 1, e.Port)
		require.False(t, e.GID.IsZero())
		require.NotZero(t, e.Ifindex, "RoCE GIDs belong to an interface")
	}

	v2, err := ctx.RoCEv2IPv4GID(1)
	require.NoError(t, err)
	require.Equal(t, gidIndex, v2.Index, "the RoCE v2 IPv4 GID is where the VM says")
	require.Equal(t, hand.GIDTypeRoCEv2, v2.Type)
	require.Equal(t, addr, v2.GID.Addr())
	require.Equal(t, "::ffff:"+addr.String(), v2.GID.String())

	byAddr, err := ctx.GIDForAddr(1, addr)
	require.NoError(t, err)
	require.Equal(t, v2, byAddr)

	_, err = ctx.GIDForAddr(1, netip.MustParseAddr("203.0.113.7"))
	require.ErrorIs(t, err, hand.ErrNoGID)
	require.ErrorContains(t, err, v2.GID.String(), "the error lists the GIDs there are")
}

func TestControlContextMisuse(t *testing.T) {
	name, _ := RequireDevice(t)
	ctx, err := hand.Open(name)
	require.NoError(t, err)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)

	err = ctx.Close()
	var busy *hand.BusyError
	require.ErrorAs(t, err, &busy)
	require.ErrorIs(t, err, syscall.EBUSY)
	require.Len(t, busy.Children, 1)
	require.ErrorContains(t, err, "PD ")

	require.NoError(t, pd.Close())
	require.NoError(t, pd.Close(), "second Close")
	require.NoError(t, ctx.Close())
	require.NoError(t, ctx.Close(), "second Close")

	_, err = ctx.AllocPD()
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = ctx.QueryPort(1)
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = ctx.GIDTable(1)
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = ctx.NewCQ(16, hand.CQOptions{})
	require.ErrorIs(t, err, hand.ErrClosed)
	_, err = pd.Alloc(4096, hand.AccessLocalWrite)
	require.ErrorIs(t, err, hand.ErrClosed)
	require.True(t, errors.Is(err, hand.ErrClosed))
}
