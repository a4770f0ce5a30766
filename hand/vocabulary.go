package hand

import (
	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// The generated types and constants a program written against hand/ alone
// meets on the common path, under names of this package, so that it need
// not import generated/verbs. They are the generated ones (aliases), so a
// program that does import it can mix both freely.

type (
	// SGE is a scatter/gather entry (struct ibv_sge): MR.SGE makes one.
	SGE = verbs.SGE
	// SendFlags are the send_flags of a send work request.
	SendFlags = verbs.SendFlags
	// MTU is a path MTU (enum ibv_mtu), for RTRAttr.MTU and Path.MTU.
	MTU = verbs.MTU
	// WCOpcode is a completion's opcode (enum ibv_wc_opcode): WC.Opcode.
	WCOpcode = verbs.WCOpcode
	// WCStatus is a completion's status (enum ibv_wc_status): WC.Status.
	WCStatus = verbs.WCStatus
	// WCFlags are a completion's flags (enum ibv_wc_flags): WC.Flags.
	WCFlags = verbs.WCFlags
	// CQWCFlags select an extended CQ's completion fields (enum
	// ibv_create_cq_wc_flags): CQOptions.WCFlags.
	CQWCFlags = verbs.CreateCQWCFlags
	// WROpcode is a work request's opcode (enum ibv_wr_opcode):
	// PostError.Opcode.
	WROpcode = verbs.WROpcode
	// MWType is a memory window's type (enum ibv_mw_type), for PD.NewMW.
	MWType = verbs.MWType
	// GRH is the global route header (struct ibv_grh) a UD receive
	// starts with: SplitUD returns it, GRHSource and PD.NewAHFromWC read
	// it.
	GRH = verbs.GRH
	// QPState is a QP's state (enum ibv_qp_state): QP.State.
	QPState = verbs.QPState
	// Rate is a static rate limit (enum ibv_rate): Path.StaticRate.
	Rate = verbs.Rate
	// EventType is an asynchronous event's type (enum ibv_event_type):
	// AsyncEvent.Type.
	EventType = verbs.EventType
	// NodeType and TransportType say what a device is (enum
	// ibv_node_type, enum ibv_transport_type): DeviceInfo.
	NodeType      = verbs.NodeType
	TransportType = verbs.TransportType
	// CMEventType is an rdma_cm event's type (enum rdma_cm_event_type):
	// CMEventError.Event.
	CMEventType = rdmacm.CMEventType
)

// Memory window types, for PD.NewMW.
const (
	MWType1 = verbs.MWType1 // bound with ibv_bind_mw (MW.Bind)
	MWType2 = verbs.MWType2 // bound by a work request, to one QP
)

// Send flags for the Set methods of SendWRs.
const (
	// Signaled asks for a completion of this work request; without it a
	// successful send completes silently (the QP must allow that).
	Signaled = verbs.SendSignaled
	// Fence waits for earlier RDMA reads and atomics to complete first.
	Fence = verbs.SendFence
	// Solicited raises a solicited event at the receiver.
	Solicited = verbs.SendSolicited
	// Inline copies the payload into the work request: its buffer needs no
	// registration and may be reused as soon as the post returns.
	Inline = verbs.SendInline
)

// Path MTUs. 0 in RTRAttr.MTU means the port's active MTU.
const (
	MTU256  = verbs.MTU256
	MTU512  = verbs.MTU512
	MTU1024 = verbs.MTU1024
	MTU2048 = verbs.MTU2048
	MTU4096 = verbs.MTU4096
)

// Completion opcodes (WC.Opcode) of a successful completion.
const (
	OpcodeSend            = verbs.WCSend
	OpcodeRDMAWrite       = verbs.WCRDMAWrite
	OpcodeRDMARead        = verbs.WCRDMARead
	OpcodeCompSwap        = verbs.WCCompSwap
	OpcodeFetchAdd        = verbs.WCFetchAdd
	OpcodeBindMW          = verbs.WCBindMW
	OpcodeLocalInv        = verbs.WCLocalInv
	OpcodeRecv            = verbs.WCRecv
	OpcodeRecvRDMAWithImm = verbs.WCRecvRDMAWithImm
)

// Completion statuses (WC.Status) a program commonly tells apart; WC.Err
// wraps any other as a StatusError.
const (
	StatusSuccess        = verbs.WCSuccess
	StatusLocLenErr      = verbs.WCLocLenErr
	StatusLocProtErr     = verbs.WCLocProtErr
	StatusWRFlushErr     = verbs.WCWRFlushErr
	StatusRemAccessErr   = verbs.WCRemAccessErr
	StatusRetryExcErr    = verbs.WCRetryExcErr
	StatusRNRRetryExcErr = verbs.WCRNRRetryExcErr
)

// Link layers of a port (QueryPort's LinkLayer): RoCE ports are Ethernet,
// and address their peers by GID rather than LID.
const (
	LinkLayerInfiniband = verbs.LinkLayerInfiniband
	LinkLayerEthernet   = verbs.LinkLayerEthernet
)
