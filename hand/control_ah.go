package hand

import (
	"fmt"

	"github.com/goverbs/goverbs/generated/verbs"
)

// AH is an address handle (struct ibv_ah): the destination of UD sends
// (SendWRs.SetUD(i, wrID, flags, sge, ah, remoteQPN, qkey)). The WR keeps
// its C pointer until its completion: do not Close the AH before.
type AH struct {
	object
	pd  *PD
	raw *verbs.AH
	// live is raw until Close destroys it, then nil. SetUD reads it
	// without use and done (two atomic operations for every WR, and they
	// would take SetUD over the inlining budget): a SetUD racing with
	// Close is the caller's bug, as is a send that has not completed when
	// the AH is closed.
	live *verbs.AH
}

// newAH wraps raw, made on pd, whose use the caller holds.
func newAH(pd *PD, raw *verbs.AH) *AH {
	ah := &AH{pd: pd, raw: raw, live: raw}
	ah.init(fmt.Sprintf("AH %#x", raw.Handle), &pd.object)
	return ah
}

// ptr is the C address handle a WR may carry. Of a nil or closed ah it
// panics (a nil dereference) rather than return what a provider would
// dereference in C: NULL or a destroyed ibv_ah.
func (ah *AH) ptr() *verbs.AH {
	p := ah.live
	_ = *p // a nil check, costing SetUD's inlining less than an if and a panic
	return p
}

// NewAH creates an address handle for path, validated like QP.ToRTR's: on
// RoCE it needs the peer's GID and the local GID index.
func (pd *PD) NewAH(path Path) (*AH, error) {
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	if _, err := path.check(pd.ctx, "PD.NewAH"); err != nil {
		return nil, err
	}
	attr := path.ahAttr()
	raw, err := verbs.CreateAH(pd.raw, &attr)
	if err != nil {
		return nil, err
	}
	return newAH(pd, raw), nil
}

// NewAHFromWC makes the address handle that answers a UD receive
// (ibv_create_ah_from_wc): w is the receive's completion, grh the GRH area
// SplitUD returned for it (nil when it had none), port the local port it
// came in on (0 means 1). The reply goes to w.SrcQP() with the sender's
// Q_Key. Of RoCE v2 over IPv4 (see GRHSource) libibverbs reads the IPv4
// header itself.
func (pd *PD) NewAHFromWC(w *WC, grh *GRH, port int) (*AH, error) {
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	if port == 0 {
		port = 1
	}
	if port < 1 || port > 255 {
		return nil, &AttrError{Op: "PD.NewAHFromWC", Field: "port", Reason: fmt.Sprintf("%d: ports are numbered from 1", port)}
	}
	raw, err := verbs.CreateAHFromWC(pd.raw, &w.wc, grh, uint8(port))
	if err != nil {
		return nil, err
	}
	return newAH(pd, raw), nil
}

// Raw returns the struct ibv_ah, valid until Close.
func (ah *AH) Raw() *verbs.AH { return ah.raw }

// Close destroys the address handle. SetUD panics on it afterwards.
func (ah *AH) Close() error {
	return ah.close(func() error {
		if err := verbs.DestroyAH(ah.raw); err != nil {
			return err
		}
		ah.live = nil
		return nil
	}, nil, nil)
}
