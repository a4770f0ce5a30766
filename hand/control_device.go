package hand

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/verberr"
)

// ErrNoDevice is wrapped by Open, Devices and CMContext when no RDMA device
// (or none of the requested name) exists, and by Listen, Dial, ListenEP and
// DialEP on a host without RDMA; the error says what to do.
var ErrNoDevice = errors.New("goverbs: no RDMA device")

// DeviceInfo describes a device ibv_get_device_list found.
type DeviceInfo struct {
	Name      string   // "mlx5_0", "rxe0"
	GUID      uint64   // node GUID, host order
	NodeType  NodeType // NodeCa for an HCA or soft-RoCE, NodeRnic for iWARP
	Transport TransportType
}

// Devices lists the RDMA devices on this host.
func Devices() ([]DeviceInfo, error) {
	devs, free, err := deviceList()
	if err != nil {
		return nil, err
	}
	defer free()
	out := make([]DeviceInfo, 0, len(devs))
	for _, d := range devs {
		out = append(out, DeviceInfo{
			Name:      cString(d.Name[:]),
			GUID:      verbs.GetDeviceGUID(d).Native(),
			NodeType:  d.NodeType,
			Transport: d.TransportType,
		})
	}
	return out, nil
}

// Context is an open device (struct ibv_context): the parent of every PD,
// CQ, completion channel and the source of the device's async events.
type Context struct {
	object
	raw      *verbs.Context
	name     string
	borrowed bool // librdmacm's context: Close does not close the device

	evMu      sync.Mutex
	ev        *pollFD // the async event fd, made by the first NextEvent
	evClosing bool    // Close has begun: no NextEvent may make ev now

	reg *registry // the objects made on the device, for its async events
}

// registry maps the raw QPs, CQs and SRQs made on a device to the *QP,
// *CQ and *SRQ that made them, so that an async event names them.
type registry struct {
	mu sync.Mutex
	m  map[unsafe.Pointer]any

	// The device's max_qp_rd_atom and max_qp_init_rd_atom, which every
	// rdma_cm connect and accept needs (Conn.param): queried once
	// (rdAtomsKnown), here because librdmacm's context is wrapped afresh
	// for each connection. Under mu.
	rdAtoms      [2]int
	rdAtomsKnown bool
}

// cmRegistries are the registries of librdmacm's device contexts, one per
// context: librdmacm hands out one ibv_context per device, and hand wraps
// it afresh each time (CMContext, Conn.Context, ConnRequest.Context...), so
// objects made through one wrapper must be found by events read through
// another. librdmacm keeps its contexts open for the process, and so these
// stay.
var cmRegistries = struct {
	sync.Mutex
	m map[*verbs.Context]*registry
}{m: map[*verbs.Context]*registry{}}

// Open opens the device called name, or the first device when name is "".
// Close closes it.
func Open(name string) (*Context, error) {
	devs, free, err := deviceList()
	if err != nil {
		return nil, err
	}
	defer free()
	var names []string
	for _, d := range devs {
		n := cString(d.Name[:])
		if name != "" && n != name {
			names = append(names, n)
			continue
		}
		raw, err := verbs.OpenDevice(d)
		if err != nil {
			return nil, fmt.Errorf("goverbs: open %s: %w", n, err)
		}
		return newContext(raw, n, false), nil
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: ibv_get_device_list found none %s", ErrNoDevice, loadDriverHint)
	}
	return nil, fmt.Errorf("%w named %q (found: %s)", ErrNoDevice, name, strings.Join(names, ", "))
}

// loadDriverHint is what Open and CMContext say when no device is there.
const loadDriverHint = "(load a driver; for soft-RoCE: rdma link add rxe0 type rxe netdev IFACE)"

// deviceList is ibv_get_device_list, whose failure on a kernel without
// RDMA wraps ErrNoDevice (and verberr.ErrNoRDMA, and says what to do); free
// releases the list (the devices stay valid while a context is open).
func deviceList() (devs []*verbs.Device, free func(), err error) {
	if err := verbs.Load(); err != nil {
		return nil, nil, err // rdma-core is not installed: the error says what to install
	}
	var n int32
	list, err := verbs.GetDeviceList(&n)
	if errors.Is(err, verberr.ErrNoRDMA) {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice(list, int(n)), func() { verbs.FreeDeviceList(list) }, nil
}

func newContext(raw *verbs.Context, name string, borrowed bool) *Context {
	c := &Context{raw: raw, name: name, borrowed: borrowed}
	if borrowed {
		cmRegistries.Lock()
		c.reg = cmRegistries.m[raw]
		if c.reg == nil {
			c.reg = &registry{m: map[unsafe.Pointer]any{}}
			cmRegistries.m[raw] = c.reg
		}
		cmRegistries.Unlock()
	} else {
		c.reg = &registry{m: map[unsafe.Pointer]any{}}
	}
	c.init("Context " + c.name)
	return c
}

// Raw returns the struct ibv_context, valid until Close.
func (c *Context) Raw() *verbs.Context { return c.raw }

// Name returns the device name.
func (c *Context) Name() string { return c.name }

// Close closes the device. It fails with a *BusyError while PDs, CQs or
// completion channels made from it are open. For a Context that belongs
// to librdmacm (CMContext, Conn.Context) Close only marks this wrapper
// closed: librdmacm keeps the device open.
func (c *Context) Close() error {
	return c.close(func() error {
		if !c.borrowed {
			if err := verbs.CloseDevice(c.raw); err != nil {
				return err
			}
		}
		if c.ev != nil {
			c.ev.close()
		}
		return nil
	}, c.interruptEvents, c.undoInterruptEvents)
}

func (c *Context) register(raw unsafe.Pointer, obj any) {
	c.reg.mu.Lock()
	c.reg.m[raw] = obj
	c.reg.mu.Unlock()
}

// unregister forgets obj, made at raw, once it is destroyed: only if raw
// still names obj, for once the object is freed its address may already
// have gone to a new one, made on another goroutine and registered since.
func (c *Context) unregister(raw unsafe.Pointer, obj any) {
	c.reg.mu.Lock()
	if c.reg.m[raw] == obj {
		delete(c.reg.m, raw)
	}
	c.reg.mu.Unlock()
}

func (c *Context) lookup(raw unsafe.Pointer) any {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	return c.reg.m[raw]
}

// QueryDevice returns the device attributes (ibv_query_device).
func (c *Context) QueryDevice() (verbs.DeviceAttr, error) {
	var a verbs.DeviceAttr
	if err := c.use(); err != nil {
		return a, err
	}
	defer c.done()
	return a, verbs.QueryDevice(c.raw, &a)
}

// rdAtoms returns the device's max_qp_rd_atom and max_qp_init_rd_atom,
// from one ibv_query_device per device context.
func (c *Context) rdAtoms() (resp, init int, err error) {
	c.reg.mu.Lock()
	known, v := c.reg.rdAtomsKnown, c.reg.rdAtoms
	c.reg.mu.Unlock()
	if known {
		return v[0], v[1], nil
	}
	da, err := c.QueryDevice()
	if err != nil {
		return 0, 0, err
	}
	v = [2]int{int(da.MaxQPRDAtom), int(da.MaxQPInitRDAtom)}
	c.reg.mu.Lock()
	c.reg.rdAtoms, c.reg.rdAtomsKnown = v, true
	c.reg.mu.Unlock()
	return v[0], v[1], nil
}

// QueryDeviceEx returns the extended device attributes
// (ibv_query_device_ex): ODP, timestamp and TSO capabilities among others.
func (c *Context) QueryDeviceEx() (verbs.DeviceAttrEx, error) {
	var a verbs.DeviceAttrEx
	if err := c.use(); err != nil {
		return a, err
	}
	defer c.done()
	return a, verbs.QueryDeviceEx(c.raw, nil, &a)
}

// QueryPort returns the attributes of port (numbered from 1).
func (c *Context) QueryPort(port int) (verbs.PortAttr, error) {
	var a verbs.PortAttr
	if err := c.use(); err != nil {
		return a, err
	}
	defer c.done()
	if port < 1 || port > 255 {
		return a, &AttrError{Op: "Context.QueryPort", Field: "port", Reason: fmt.Sprintf("%d: ports are numbered from 1", port)}
	}
	if err := verbs.QueryPort(c.raw, uint8(port), &a); err != nil {
		return a, fmt.Errorf("port %d: %w", port, err)
	}
	return a, nil
}

// QueryGID returns entry index of port's GID table (ibv_query_gid). An
// empty slot reads as the zero GID; GIDTable lists the valid entries with
// their types.
func (c *Context) QueryGID(port, index int) (GID, error) {
	if err := c.use(); err != nil {
		return GID{}, err
	}
	defer c.done()
	if port < 1 || port > 255 {
		return GID{}, &AttrError{Op: "Context.QueryGID", Field: "port", Reason: fmt.Sprintf("%d: ports are numbered from 1", port)}
	}
	if index < 0 || index > math.MaxInt32 {
		return GID{}, &AttrError{Op: "Context.QueryGID", Field: "index", Reason: fmt.Sprintf("%d: not a GID table index", index)}
	}
	var g verbs.GID
	if err := verbs.QueryGID(c.raw, uint8(port), int32(index), &g); err != nil {
		return GID{}, fmt.Errorf("port %d, GID index %d: %w", port, index, err)
	}
	return GID(*g.Raw()), nil
}

// GID is a 16-byte InfiniBand global identifier. On RoCE it is an IPv6
// address, or an IPv4-mapped one (::ffff:a.b.c.d) for an IPv4 interface.
type GID [16]byte

// Addr returns the GID as an IP address: an IPv4 address for an
// IPv4-mapped GID, otherwise IPv6.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

func (g GID) String() string { return netip.AddrFrom16(g).String() }

// IsZero reports an all-zero GID (an empty table slot).
func (g GID) IsZero() bool { return g == GID{} }

// Raw returns the GID as union ibv_gid.
func (g GID) Raw() verbs.GID {
	var r verbs.GID
	*r.Raw() = g
	return r
}

// GIDFromAddr returns the RoCE GID of an IP address (an IPv4 address is
// mapped into IPv6).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// GIDType is the kind of a GID table entry.
type GIDType uint8

const (
	GIDTypeIB     = GIDType(verbs.GIDTypeIB)     // InfiniBand
	GIDTypeRoCEv1 = GIDType(verbs.GIDTypeRoCEV1) // RoCE v1: Ethernet, not routable
	GIDTypeRoCEv2 = GIDType(verbs.GIDTypeRoCEV2) // RoCE v2: UDP/IP, routable
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	Index   int // the sgid_index to use in an address vector
	Port    int
	GID     GID
	Type    GIDType
	Ifindex int // the network interface the GID belongs to (RoCE), or 0
}

func (e GIDEntry) String() string {
	return fmt.Sprintf("port %d GID[%d] %s %s ifindex %d", e.Port, e.Index, e.GID, e.Type, e.Ifindex)
}

// GIDTable returns the valid entries of port's GID table, with their types
// (ibv_query_gid_table).
func (c *Context) GIDTable(port int) ([]GIDEntry, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return nil, err
	}
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.done()
	// The table call returns every port's entries: size it for all of them.
	da, err := c.queryDeviceLocked()
	if err != nil {
		return nil, err
	}
	size := int(pa.GIDTblLen) * max(int(da.PhysPortCnt), 1)
	entries := make([]verbs.GIDEntry, size)
	var n int
	if size > 0 {
		if n, err = verbs.QueryGIDTable(c.raw, &entries[0], uint64(size), 0); err != nil {
			return nil, err
		}
	}
	var out []GIDEntry
	for _, e := range entries[:n] {
		if int(e.PortNum) != port {
			continue
		}
		out = append(out, GIDEntry{
			Index:   int(e.GIDIndex),
			Port:    int(e.PortNum),
			GID:     GID(*e.GID.Raw()),
			Type:    GIDType(e.GIDType),
			Ifindex: int(e.NdevIfindex),
		})
	}
	return out, nil
}

func (c *Context) queryDeviceLocked() (verbs.DeviceAttr, error) {
	var a verbs.DeviceAttr
	return a, verbs.QueryDevice(c.raw, &a)
}

// RoCEv2IPv4GID returns port's RoCE v2 GID for an IPv4 address: the entry
// RoCE v2 over IPv4 traffic must use as its sgid_index. Choosing a RoCE v1
// or link-local entry instead is the commonest reason two RoCE QPs never
// reach RTS or never exchange a packet. When several IPv4 addresses qualify,
// the lowest index wins.
func (c *Context) RoCEv2IPv4GID(port int) (GIDEntry, error) {
	return c.findGID(port, "a RoCE v2 IPv4 GID", func(e GIDEntry) bool {
		return e.Type == GIDTypeRoCEv2 && e.GID.Addr().Is4()
	})
}

// GIDForAddr returns port's GID entry for the IP address a, preferring
// RoCE v2 over RoCE v1 (and matching IB GIDs too, for completeness).
func (c *Context) GIDForAddr(port int, a netip.Addr) (GIDEntry, error) {
	want := GIDFromAddr(a)
	e, err := c.findGID(port, "a RoCE v2 GID for "+a.String(), func(e GIDEntry) bool {
		return e.GID == want && e.Type == GIDTypeRoCEv2
	})
	if err == nil {
		return e, nil
	}
	return c.findGID(port, "a GID for "+a.String(), func(e GIDEntry) bool { return e.GID == want })
}

func (c *Context) findGID(port int, what string, match func(GIDEntry) bool) (GIDEntry, error) {
	table, err := c.GIDTable(port)
	if err != nil {
		return GIDEntry{}, err
	}
	for _, e := range table {
		if match(e) {
			return e, nil
		}
	}
	var have []string
	for _, e := range table {
		have = append(have, fmt.Sprintf("[%d] %s %s", e.Index, e.GID, e.Type))
	}
	if len(have) == 0 {
		have = append(have, "none")
	}
	return GIDEntry{}, fmt.Errorf("goverbs: %s port %d has no %s (its GIDs: %s): is an IP address configured on the RoCE interface?: %w",
		c.name, port, what, strings.Join(have, "; "), ErrNoGID)
}

// ErrNoGID is wrapped by RoCEv2IPv4GID and GIDForAddr when the table has no
// matching entry.
var ErrNoGID = errors.New("goverbs: no matching GID")

// cString converts a NUL-terminated C char array to a string.
func cString(b []int8) string {
	u := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	for i, c := range u {
		if c == 0 {
			return string(u[:i])
		}
	}
	return string(u)
}
