package hand

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/generated/verbs"
)

// MW is a memory window (struct ibv_mw): a remote key granting access to a
// part of an MR, bound and invalidated without re-registering. Type 1
// windows are bound with Bind; type 2 windows with a bind work request on
// the data path.
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
