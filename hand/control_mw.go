package hand

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/generated/verbs"
)

// MW is a memory window (struct ibv_mw): a remote key granting access to a
// part of an MR, bound and invalidated without re-registering. Type 1
// windows are bound with Bind; type 2 windows with a bind work request on
// the data path (SendWRs.SetBindMW).
//
// A type 2 window is the per-operation grant: bound to one QP, its rkey
// works only for work requests that arrive on that QP (the device checks
// the QP, not just the PD), and only until it is invalidated, by a local
// invalidate on the binding side (SendWRs.SetLocalInv), by the peer's send
// with invalidate (SendWRs.SetSendInv), or by the QP's destruction. An MR's
// own rkey, by contrast, opens the MR to every QP of its PD for as long as
// the MR is registered.
type MW struct {
	object
	pd   *PD
	raw  *verbs.MW
	typ  verbs.MWType
	rkey atomic.Uint32
	// bindMu makes Binds of the window one at a time: the provider makes
	// the new rkey from the old one in struct ibv_mw, plain C memory, so
	// two at once could give both the same key, or one the other's.
	bindMu sync.Mutex
}

// NewMW allocates a memory window of type MWType1 or MWType2.
// Devices without windows fail with ErrNotSupported.
func (pd *PD) NewMW(typ MWType) (*MW, error) {
	if typ != verbs.MWType1 && typ != verbs.MWType2 {
		return nil, &AttrError{Op: "PD.NewMW", Field: "type", Reason: fmt.Sprintf("%d: MWType1 or MWType2", typ)}
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	raw, err := verbs.AllocMW(pd.raw, typ)
	if err != nil {
		return nil, err
	}
	mw := &MW{pd: pd, raw: raw, typ: typ}
	mw.rkey.Store(raw.RKey)
	mw.init(fmt.Sprintf("MW rkey %#x", mw.rkey.Load()), &pd.object)
	return mw, nil
}

// Raw returns the struct ibv_mw, valid until Close.
func (mw *MW) Raw() *verbs.MW { return mw.raw }

// RKey returns the window's current remote key (it changes with each bind).
// For a type 2 window it is the key of the latest SetBindMW, which the
// peer may use once that bind has completed.
func (mw *MW) RKey() uint32 { return mw.rkey.Load() }

// Bind binds a type 1 window to length bytes at offset of mr, with access
// (remote read, write or atomic), by posting a bind on qp's send queue
// (ibv_bind_mw); the bind completes on qp's send CQ with wrID, always
// signaled. It returns the window's new remote key, valid once the
// completion arrives. A length of 0 unbinds. mr must have been registered
// with AccessMWBind, in the window's PD.
func (mw *MW) Bind(qp *QP, mr *MR, offset, length int, access Access, wrID uint64) (uint32, error) {
	release, err := useAll(&mw.object, &qp.object, &mr.object)
	if err != nil {
		return 0, err
	}
	defer release()
	if mw.typ != verbs.MWType1 {
		return 0, &AttrError{Op: "MW.Bind", Field: "type", Reason: "type 2 windows are bound by a work request"}
	}
	// length > Len()-offset, not offset+length > Len(): the sum can wrap.
	if offset < 0 || length < 0 || offset > mr.Len() || length > mr.Len()-offset {
		return 0, &AttrError{Op: "MW.Bind", Field: "offset/length", Reason: fmt.Sprintf("%d bytes at %d are outside the MR's %d bytes", length, offset, mr.Len())}
	}
	bind := verbs.MWBind{
		WRID:      wrID,
		SendFlags: Signaled,
		BindInfo: verbs.MWBindInfo{
			MR:            mr.raw,
			Addr:          mr.Addr() + uint64(offset),
			Length:        uint64(length),
			MWAccessFlags: verbs.AccessFlags(access),
		},
	}
	mw.bindMu.Lock()
	defer mw.bindMu.Unlock()
	if err := verbs.BindMW(qp.raw, mw.raw, &bind); err != nil {
		return 0, err
	}
	rkey := mw.raw.RKey
	mw.rkey.Store(rkey)
	return rkey, nil
}

// Close deallocates the window.
func (mw *MW) Close() error {
	return mw.close(func() error { return verbs.DeallocMW(mw.raw) }, nil, nil)
}

// Panic values of SetBindMW, made once so that the data path formats
// nothing.
var (
	errBindMWType   = errors.New("goverbs: SendWRs.SetBindMW: the window is not of type 2 (type 1 windows are bound with MW.Bind)")
	errBindMWRange  = errors.New("goverbs: SendWRs.SetBindMW: the window's offset and length are not a non-empty part of the MR")
	errBindMWClosed = fmt.Errorf("goverbs: SendWRs.SetBindMW: the window or the MR: %w", ErrClosed)
)

// incRKey is ibv_inc_rkey: the next key of a window, its low 8 bits (the
// part a consumer owns) incremented, the device's index above them kept.
func incRKey(rkey uint32) uint32 { return rkey&0xffffff00 | (rkey+1)&0xff }

// SetBindMW makes WR i bind the type 2 window mw to length bytes at offset
// of mr, with access (remote read, write or atomic), to the QP the chain
// is posted to (IBV_WR_BIND_MW), and returns the window's new rkey: its
// current one with the low 8 bits incremented (ibv_inc_rkey). The new
// rkey grants access once the bind has executed (work requests posted
// after it on the same QP see it; a peer should be told it after the
// bind's completion) and only to work requests arriving on that QP; it
// lasts until SetLocalInv or a peer's SetSendInv invalidates it, or the
// QP is destroyed. mw.RKey returns it from now on.
//
// mr must have been registered with AccessMWBind (and AccessLocalWrite
// for a window with remote write or atomic access), in the window's PD,
// which must be the QP's. The WR refers to mw and mr until the bind
// completes: do not close them before. Fill one bind of a window per post:
// a provider (rxe) reads the window's key as of the previous bind when
// the WR is posted. A bind that is not posted or completes with an error
// leaves the window's key on the device as it was, and the key here one
// ahead: close such a window and allocate another.
//
// SetBindMW panics, leaving WR i as it was, when mw is not of type 2, when
// the part is empty or not within mr, or when mw or mr is closed (the
// panic's error wraps ErrClosed). It does not allocate.
func (v SendWRs) SetBindMW(i int, wrID uint64, flags SendFlags, mw *MW, mr *MR, offset, length int, access Access) uint32 {
	w := &v.wr[i]
	if mw.typ != verbs.MWType2 {
		panic(errBindMWType)
	}
	// length > Len()-offset, not offset+length > Len(): the sum can wrap.
	if offset < 0 || length <= 0 || offset > mr.Len() || length > mr.Len()-offset {
		panic(errBindMWRange)
	}
	if mw.use() != nil {
		panic(errBindMWClosed)
	}
	defer mw.done()
	if mr.use() != nil {
		panic(errBindMWClosed)
	}
	defer mr.done()
	mw.bindMu.Lock()
	// struct ibv_mw's rkey is the key the device holds when this WR runs:
	// the previous bind's, posted by now. rxe checks the WR against it.
	old := mw.rkey.Load()
	mw.raw.RKey = old
	rkey := incRKey(old)
	mw.rkey.Store(rkey)
	mw.bindMu.Unlock()

	w.WRID = wrID
	w.NumSGE = 0 // a bind carries no data; providers refuse one with scatter entries
	w.Opcode = verbs.WROpBindMW
	w.SendFlags = flags
	w.ImmData = 0
	w.BindMW.MW = mw.raw
	w.BindMW.RKey = rkey
	w.BindMW.BindInfo = verbs.MWBindInfo{
		MR:            mr.raw,
		Addr:          mr.Addr() + uint64(offset),
		Length:        uint64(length),
		MWAccessFlags: verbs.AccessFlags(access),
	}
	return rkey
}

// SetLocalInv makes WR i invalidate rkey (IBV_WR_LOCAL_INV): a type 2
// window's key (or a key an MR was given for fast registration) stops
// granting access once the WR has executed; remote operations with it
// then complete with a remote access error at the peer. A type 2 window
// so invalidated may be bound again (SetBindMW). It does not allocate.
func (v SendWRs) SetLocalInv(i int, wrID uint64, flags SendFlags, rkey uint32) {
	w := &v.wr[i]
	w.WRID = wrID
	w.NumSGE = 0
	w.Opcode = verbs.WROpLocalInv
	w.SendFlags = flags
	*w.InvalidateRKey() = rkey
}

// SetSendInv makes WR i a send that invalidates rkey at the receiver
// (IBV_WR_SEND_WITH_INV): the peer's type 2 window (or fast-registered MR)
// under rkey stops granting access when the send arrives, and the
// receiver's completion carries the key in invalidated_rkey, flagged
// IBV_WC_WITH_INV (WC.InvalidatedRKey; rxe sets the kernel's flag value
// instead, so there the key is only in the raw completion). This is how a
// peer hands a per-operation grant back when it is done with it. It does
// not allocate.
func (v SendWRs) SetSendInv(i int, wrID uint64, flags SendFlags, sge SGE, rkey uint32) {
	w := fill(&v.wr[i], wrID, verbs.WROpSendWithInv, flags, 0, sge)
	*w.InvalidateRKey() = rkey
}
