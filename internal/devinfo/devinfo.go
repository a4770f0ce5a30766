// Package devinfo is goverbs-devinfo: ibv_devinfo's output, line for line
// for the lines it prints, from goverbs' control path (hand.Devices,
// Context.QueryDevice, QueryPort, GIDTable).
//
// Printed as ibv_devinfo (rdma-core 44.0) prints them: the device header
// (hca_id, transport, fw_ver, GUIDs, vendor, hw_ver, board_id,
// phys_port_cnt), the port lines, and with -v the struct ibv_device_attr
// limits, the verbose port lines and the GID table (gidText).
// Left out: the names under device_cap_flags, and ibv_devinfo's extended
// -v sections (ODP, timestamp, TSO, RSS, packet pacing, tag matching, CQ
// moderation caps).
package devinfo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/internal/pingaddr"
)

// Config is the command line.
type Config struct {
	Device  string // "" for every device
	Port    int    // 0 for every port
	List    bool
	Verbose bool
}

// ParseArgs parses -d/--ib-dev, -i/--ib-port, -l/--list, -v/--verbose as
// ibv_devinfo's getopt_long does (package getopt): -lv, -i1, --verb.
func ParseArgs(args []string) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("goverbs-devinfo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, n := range []string{"d", "ib-dev"} {
		fs.StringVar(&cfg.Device, n, "", "device")
	}
	for _, n := range []string{"i", "ib-port"} {
		fs.IntVar(&cfg.Port, n, 0, "port")
	}
	for _, n := range []string{"l", "list"} {
		fs.BoolVar(&cfg.List, n, false, "list devices")
	}
	for _, n := range []string{"v", "verbose"} {
		fs.BoolVar(&cfg.Verbose, n, false, "verbose")
	}
	if err := getopt.Parse(fs, args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.Port < 0 {
		return cfg, fmt.Errorf("-i %d: ports are numbered from 1", cfg.Port)
	}
	return cfg, nil
}

const usage = `Usage: goverbs-devinfo             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
`

// Main runs the command and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "goverbs-devinfo: %v\n%s", err, usage)
		return 1
	}
	if err := Print(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "goverbs-devinfo: %v\n", err)
		return 1
	}
	return 0
}

// Print writes what cfg asks for to w.
func Print(w io.Writer, cfg Config) error {
	devs, err := hand.Devices()
	if err != nil {
		return err
	}
	if cfg.List {
		s := "s"
		if len(devs) == 1 {
			s = ""
		}
		fmt.Fprintf(w, "%d HCA%s found:\n", len(devs), s)
		for _, d := range devs {
			fmt.Fprintf(w, "\t%s\n", d.Name)
		}
		fmt.Fprintln(w)
		return nil
	}
	var errs []error
	found := false
	for _, d := range devs {
		if cfg.Device != "" && d.Name != cfg.Device {
			continue
		}
		found = true
		errs = append(errs, printDevice(w, d, cfg))
	}
	if !found {
		if cfg.Device != "" {
			return fmt.Errorf("IB device '%s' wasn't found", cfg.Device)
		}
		return errors.New("no IB devices found")
	}
	return errors.Join(errs...)
}

func printDevice(w io.Writer, d hand.DeviceInfo, cfg Config) (err error) {
	dev, err := hand.Open(d.Name)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dev.Close()) }()
	a, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	if cfg.Port > int(a.PhysPortCnt) {
		return fmt.Errorf("%s: invalid port %d requested: the device has %d", d.Name, cfg.Port, a.PhysPortCnt)
	}
	p := func(key, format string, v ...any) {
		fmt.Fprintf(w, "\t%s:%s"+format+"\n", append([]any{key, tabs(key, 1)}, v...)...)
	}
	fmt.Fprintf(w, "hca_id:\t%s\n", d.Name)
	p("transport", "%s (%d)", transportName(d.Transport), d.Transport)
	if fw := cString(a.FWVer[:]); fw != "" {
		p("fw_ver", "%s", fw)
	}
	p("node_guid", "%s", guid(a.NodeGUID.Native()))
	p("sys_image_guid", "%s", guid(a.SysImageGUID.Native()))
	p("vendor_id", "0x%04x", a.VendorID)
	p("vendor_part_id", "%d", a.VendorPartID)
	p("hw_ver", "0x%X", a.HWVer)
	if b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", d.Name, "board_id")); err == nil {
		if s := strings.TrimRight(string(b), "\n"); s != "" {
			p("board_id", "%s", s)
		}
	}
	p("phys_port_cnt", "%d", a.PhysPortCnt)
	if cfg.Verbose {
		printLimits(p, &a)
	}
	for port := 1; port <= int(a.PhysPortCnt); port++ {
		if cfg.Port != 0 && port != cfg.Port {
			continue
		}
		if err := printPort(w, dev, port, d.Transport, cfg.Verbose); err != nil {
			return err
		}
	}
	return nil
}

func printLimits(p func(string, string, ...any), a *verbs.DeviceAttr) {
	p("max_mr_size", "0x%x", a.MaxMRSize)
	p("page_size_cap", "0x%x", a.PageSizeCap)
	p("max_qp", "%d", a.MaxQP)
	p("max_qp_wr", "%d", a.MaxQPWR)
	p("device_cap_flags", "0x%08x", a.DeviceCapFlags)
	p("max_sge", "%d", a.MaxSGE)
	p("max_sge_rd", "%d", a.MaxSGERD)
	p("max_cq", "%d", a.MaxCQ)
	p("max_cqe", "%d", a.MaxCQE)
	p("max_mr", "%d", a.MaxMR)
	p("max_pd", "%d", a.MaxPD)
	p("max_qp_rd_atom", "%d", a.MaxQPRDAtom)
	p("max_ee_rd_atom", "%d", a.MaxEeRDAtom)
	p("max_res_rd_atom", "%d", a.MaxResRDAtom)
	p("max_qp_init_rd_atom", "%d", a.MaxQPInitRDAtom)
	p("max_ee_init_rd_atom", "%d", a.MaxEeInitRDAtom)
	p("atomic_cap", "%s (%d)", atomicName(a.AtomicCap), a.AtomicCap)
	p("max_ee", "%d", a.MaxEe)
	p("max_rdd", "%d", a.MaxRdd)
	p("max_mw", "%d", a.MaxMW)
	p("max_raw_ipv6_qp", "%d", a.MaxRawIPv6QP)
	p("max_raw_ethy_qp", "%d", a.MaxRawEthyQP)
	p("max_mcast_grp", "%d", a.MaxMcastGrp)
	p("max_mcast_qp_attach", "%d", a.MaxMcastQPAttach)
	p("max_total_mcast_qp_attach", "%d", a.MaxTotalMcastQPAttach)
	p("max_ah", "%d", a.MaxAH)
	p("max_fmr", "%d", a.MaxFmr)
	if a.MaxFmr != 0 {
		p("max_map_per_fmr", "%d", a.MaxMapPerFmr)
	}
	p("max_srq", "%d", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		p("max_srq_wr", "%d", a.MaxSRQWR)
		p("max_srq_sge", "%d", a.MaxSRQSGE)
	}
	p("max_pkeys", "%d", a.MaxPKeys)
	p("local_ca_ack_delay", "%d", a.LocalCaACKDelay)
}

func printPort(w io.Writer, dev *hand.Context, port int, tr verbs.TransportType, verbose bool) error {
	pa, err := dev.QueryPort(port)
	if err != nil {
		return err
	}
	p := func(key, format string, v ...any) {
		fmt.Fprintf(w, "\t\t\t%s:%s"+format+"\n", append([]any{key, tabs(key, 3)}, v...)...)
	}
	fmt.Fprintf(w, "\t\tport:\t%d\n", port)
	p("state", "%s (%d)", portStateName(pa.State), pa.State)
	p("max_mtu", "%s (%d)", mtuName(pa.MaxMTU), pa.MaxMTU)
	p("active_mtu", "%s (%d)", mtuName(pa.ActiveMTU), pa.ActiveMTU)
	p("sm_lid", "%d", pa.SMLID)
	p("port_lid", "%d", pa.LID)
	p("port_lmc", "0x%02x", pa.LMC)
	p("link_layer", "%s", linkLayerName(pa.LinkLayer))
	if verbose {
		p("max_msg_sz", "0x%x", pa.MaxMsgSz)
		p("port_cap_flags", "0x%08x", pa.PortCapFlags)
		p("port_cap_flags2", "0x%04x", pa.PortCapFlags2)
		p("max_vl_num", "%s (%d)", pick(vlNames, pa.MaxVLNum, "invalid value"), pa.MaxVLNum)
		p("bad_pkey_cntr", "0x%x", pa.BadPKeyCntr)
		p("qkey_viol_cntr", "0x%x", pa.QKeyViolCntr)
		p("sm_sl", "%d", pa.SMSL)
		p("pkey_tbl_len", "%d", pa.PKeyTblLen)
		p("gid_tbl_len", "%d", pa.GIDTblLen)
		p("subnet_timeout", "%d", pa.SubnetTimeout)
		p("init_type_reply", "%d", pa.InitTypeReply)
		p("active_width", "%sX (%d)", pick(widthNames, pa.ActiveWidth, "invalid width"), pa.ActiveWidth)
		p("active_speed", "%s (%d)", pick(speedNames, pa.ActiveSpeed, "invalid speed"), pa.ActiveSpeed)
		if tr == verbs.TransportIB {
			p("phys_state", "%s (%d)", pick(physStateNames, pa.PhysState, "invalid physical state"), pa.PhysState)
		}
		gids, err := dev.GIDTable(port)
		if err != nil {
			return err
		}
		for _, g := range gids {
			if text, ok := gidText(g.GID, g.Type, pa.LinkLayer); ok {
				p(fmt.Sprintf("GID[%3d]", g.Index), "%s", text)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// tabs aligns values as ibv_devinfo's hand-written tab runs do: device
// values at column 40, port values at column 48 (tabs of 8), at least one
// tab after "key:".
func tabs(key string, indent int) string {
	col := indent*8 + len(key) + 1 // after "key:"
	target := 40
	if indent > 1 {
		target = 48
	}
	n := max(1, (target-col+7)/8)
	return strings.Repeat("\t", n)
}

func guid(v uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", v>>48&0xffff, v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

func cString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

func transportName(t verbs.TransportType) string {
	switch t {
	case verbs.TransportIB:
		return "InfiniBand"
	case verbs.TransportIwarp:
		return "iWARP"
	case verbs.TransportUsnic:
		return "usNIC"
	case verbs.TransportUsnicUDP:
		return "usNIC UDP"
	case verbs.TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

func atomicName(c verbs.AtomicCap) string {
	return pick(map[uint8]string{0: "ATOMIC_NONE", 1: "ATOMIC_HCA", 2: "ATOMIC_GLOB"}, uint8(c), "invalid atomic capability")
}

func portStateName(s verbs.PortState) string {
	return pick(map[uint8]string{1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}, uint8(s), "invalid state")
}

func mtuName(m verbs.MTU) string {
	return pick(map[uint8]string{1: "256", 2: "512", 3: "1024", 4: "2048", 5: "4096"}, uint8(m), "invalid MTU")
}

// gidText is a GID line's value as ibv_devinfo prints it (print_all_port_gids
// and print_formated_gid, rdma-core 44.0), and false where it prints no line.
// It knows a GID's type as ibv_query_gid_type's sysfs type, where IB and
// RoCE v1 are one: a RoCE v2 GID as inet_ntop writes it, any other in raw
// groups of four hex digits; the type follows only on an Ethernet port. It
// skips a GID whose interface ID (the low 8 bytes) is 0, and one of a type
// it does not know.
func gidText(g hand.GID, t hand.GIDType, linkLayer uint8) (string, bool) {
	if [8]byte(g[8:]) == [8]byte{} {
		return "", false
	}
	var text, typ string
	switch t {
	case hand.GIDTypeIB, hand.GIDTypeRoCEv1:
		var b strings.Builder
		for i := 0; i < 16; i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
		}
		text, typ = b.String(), "RoCE v1"
	case hand.GIDTypeRoCEv2:
		text, typ = pingaddr.GID(g).String(), "RoCE v2" // inet_ntop's text, as the pingpong tools print it
	default:
		return "", false
	}
	if uint32(linkLayer) == verbs.LinkLayerEthernet {
		text += ", " + typ
	}
	return text, true
}

func linkLayerName(l uint8) string {
	switch uint32(l) {
	case verbs.LinkLayerUnspecified:
		return "Unspecified"
	case verbs.LinkLayerInfiniband:
		return "InfiniBand"
	case verbs.LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

var (
	vlNames        = map[uint8]string{1: "1", 2: "2", 3: "4", 4: "8", 5: "15"}
	widthNames     = map[uint8]string{1: "1", 2: "4", 4: "8", 8: "12", 16: "2"}
	speedNames     = map[uint8]string{1: "2.5 Gbps", 2: "5.0 Gbps", 4: "10.0 Gbps", 8: "10.0 Gbps", 16: "14.0 Gbps", 32: "25.0 Gbps", 64: "50.0 Gbps", 128: "100.0 Gbps"}
	physStateNames = map[uint8]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING", 5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
)

func pick(m map[uint8]string, k uint8, def string) string {
	if s, ok := m[k]; ok {
		return s
	}
	return def
}
