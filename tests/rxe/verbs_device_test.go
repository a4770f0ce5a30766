package rxe

import (
	"net/netip"
	"os"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// The device list, the device and its port as the generated stubs report
// them: the VM's device is listed and opens, its port is ACTIVE on
// Ethernet, and the GID at the promised index is the RoCE v2 GID of the
// promised IPv4 address, read three ways (ibv_query_gid, ibv_query_gid_ex,
// ibv_query_gid_table).
func TestVerbsDevice(t *testing.T) {
	e := openVerbs(t)
	addr, err := netip.ParseAddr(os.Getenv("RXE_ADDR"))
	if err != nil || !addr.Is4() {
		t.Fatalf("RXE_ADDR=%q is not an IPv4 address: run under internal/cmd/rxevm, which sets it", os.Getenv("RXE_ADDR"))
	}

	var n int32
	list, err := verbs.GetDeviceList(&n)
	if err != nil {
		t.Fatal(err)
	}
	defer verbs.FreeDeviceList(list)
	devs := unsafe.Slice(list, n+1)
	if devs[n] != nil {
		t.Errorf("ibv_get_device_list: entry %d (after the last) is not NULL", n)
	}
	var names []string
	var mine *verbs.Device
	for _, d := range devs[:n] {
		name := goString(verbs.GetDeviceName(d))
		names = append(names, name)
		if goStringArray(d.Name[:]) != name {
			t.Errorf("struct ibv_device.name %q, ibv_get_device_name %q", goStringArray(d.Name[:]), name)
		}
		if name == e.name {
			mine = d
		}
	}
	t.Logf("ibv_get_device_list: %d devices %v", n, names)
	if mine == nil {
		t.Fatalf("%s is not listed", e.name)
	}
	if mine.TransportType != verbs.TransportIB {
		t.Errorf("%s transport type %d, want IBV_TRANSPORT_IB (RoCE reports IB)", e.name, mine.TransportType)
	}
	if guid := verbs.GetDeviceGUID(mine); guid != e.dev.NodeGUID {
		t.Errorf("ibv_get_device_guid %#x, ibv_query_device node_guid %#x", guid.Native(), e.dev.NodeGUID.Native())
	}
	if e.ctx.Device == nil || goStringArray(e.ctx.Device.Name[:]) != e.name {
		t.Errorf("the opened context's device is not %s", e.name)
	}

	// ibv_query_device.
	d := &e.dev
	if d.PhysPortCnt != 1 {
		t.Errorf("phys_port_cnt %d, want 1 (rxe has one port)", d.PhysPortCnt)
	}
	for _, c := range []struct {
		what      string
		got, want int32
	}{
		{"max_qp", d.MaxQP, 2}, {"max_qp_wr", d.MaxQPWR, 1024}, {"max_sge", d.MaxSGE, 2},
		{"max_cq", d.MaxCQ, 1}, {"max_cqe", d.MaxCQE, 1024}, {"max_mr", d.MaxMR, 1}, {"max_pd", d.MaxPD, 1},
		{"max_srq", d.MaxSRQ, 1}, {"max_srq_wr", d.MaxSRQWR, 64}, {"max_ah", d.MaxAH, 1},
		{"max_qp_rd_atom", d.MaxQPRDAtom, 1}, {"max_qp_init_rd_atom", d.MaxQPInitRDAtom, 1},
	} {
		if c.got < c.want {
			t.Errorf("ibv_query_device: %s = %d, the tests need at least %d", c.what, c.got, c.want)
		}
	}

	// ibv_query_port.
	p := &e.port
	if p.State != verbs.PortActive {
		t.Errorf("port %d state %s (%d), want PORT_ACTIVE", vPort, goString(verbs.PortStateStr(p.State)), p.State)
	}
	if uint32(p.LinkLayer) != verbs.LinkLayerEthernet {
		t.Errorf("port %d link layer %d, want Ethernet (%d)", vPort, p.LinkLayer, verbs.LinkLayerEthernet)
	}
	if p.ActiveMTU < verbs.MTU256 || p.ActiveMTU > p.MaxMTU {
		t.Errorf("port %d active MTU %d, max MTU %d", vPort, p.ActiveMTU, p.MaxMTU)
	}
	if int(p.GIDTblLen) <= e.gidIndex {
		t.Fatalf("port %d has %d GIDs, no index %d", vPort, p.GIDTblLen, e.gidIndex)
	}

	// The GID table, three ways.
	want := netip.AddrFrom16(addr.As16()) // ::ffff:a.b.c.d
	if got := netip.AddrFrom16(*e.gid.Raw()); got != want {
		t.Errorf("ibv_query_gid(%d) = %v, want %v (the RoCE v2 GID of %v)", e.gidIndex, got, want, addr)
	}
	var entry verbs.GIDEntry
	if err := verbs.QueryGIDEx(e.ctx, vPort, uint32(e.gidIndex), &entry, 0); err != nil {
		t.Fatalf("ibv_query_gid_ex(%d): %v", e.gidIndex, err)
	}
	if got := netip.AddrFrom16(*entry.GID.Raw()); got != want || entry.GIDIndex != uint32(e.gidIndex) ||
		entry.PortNum != vPort || entry.GIDType != verbs.GIDTypeRoCEV2 {
		t.Errorf("ibv_query_gid_ex(%d) = {gid %v index %d port %d type %d}, want {%v %d %d RoCE v2 (%d)}",
			e.gidIndex, got, entry.GIDIndex, entry.PortNum, entry.GIDType, want, e.gidIndex, vPort, verbs.GIDTypeRoCEV2)
	}
	if entry.NdevIfindex == 0 {
		t.Errorf("ibv_query_gid_ex(%d): no netdev ifindex (rxe sits on a veth)", e.gidIndex)
	}
	table := make([]verbs.GIDEntry, p.GIDTblLen)
	nt, err := verbs.QueryGIDTable(e.ctx, &table[0], uint64(len(table)), 0)
	if err != nil || nt < 1 {
		t.Fatalf("ibv_query_gid_table: %d entries, %v", nt, err)
	}
	found := false
	for _, g := range table[:nt] {
		if g.PortNum == vPort && g.GIDIndex == uint32(e.gidIndex) {
			found = true
			if got := netip.AddrFrom16(*g.GID.Raw()); got != want || g.GIDType != verbs.GIDTypeRoCEV2 {
				t.Errorf("ibv_query_gid_table entry %d: gid %v type %d, want %v RoCE v2", g.GIDIndex, got, g.GIDType, want)
			}
		}
	}
	if !found {
		t.Errorf("ibv_query_gid_table (%d entries) has no entry for port %d index %d", nt, vPort, e.gidIndex)
	}

	t.Logf("device in use: %s, fw %s, node GUID %016x, vendor %#x part %#x; port %d %s, link layer Ethernet, active MTU %d, %d GIDs, GID[%d] %v RoCE v2 on ifindex %d; max_qp %d max_qp_wr %d max_cqe %d max_srq_wr %d",
		e.name, goStringArray(d.FWVer[:]), d.NodeGUID.Native(), d.VendorID, d.VendorPartID,
		vPort, goString(verbs.PortStateStr(p.State)), 128<<p.ActiveMTU, p.GIDTblLen, e.gidIndex,
		want, entry.NdevIfindex, d.MaxQP, d.MaxQPWR, d.MaxCQE, d.MaxSRQWR)
}
