package hand

import (
	"fmt"

	"github.com/goverbs/goverbs/generated/verbs"
)

// AH is an address handle (struct ibv_ah): the destination of UD sends
// (SendWRs.SetUD(i, wrID, flags, sge, ah.Raw(), remoteQPN, qkey)). The WR
// keeps the raw pointer until its completion: do not Close the AH before.
type AH struct {
	object
	pd  *PD
	raw *verbs.AH
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
		return nil, verbErr("ibv_create_ah", err)
	}
	ah := &AH{pd: pd, raw: raw}
	ah.init(fmt.Sprintf("AH %#x", raw.Handle), &pd.object)
	return ah, nil
}

// NewAHFromWC makes the address handle that answers a UD receive
// (ibv_create_ah_from_wc): w is the receive's completion, grh the GRH area
// SplitUD returned for it (nil when it had none), port the local port it
// came in on (0 means 1). The reply goes to w.SrcQP() with the sender's
// Q_Key. Of RoCE v2 over IPv4 (see GRHSource) libibverbs reads the IPv4
// header itself.
func (pd *PD) NewAHFromWC(w *WC, grh *verbs.GRH, port int) (*AH, error) {
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
		return nil, verbErr("ibv_create_ah_from_wc", err)
	}
	ah := &AH{pd: pd, raw: raw}
	ah.init(fmt.Sprintf("AH %#x", raw.Handle), &pd.object)
	return ah, nil
}

// Raw returns the struct ibv_ah, valid until Close.
func (ah *AH) Raw() *verbs.AH { return ah.raw }

// Close destroys the address handle.
func (ah *AH) Close() error {
	return ah.close(func() error { return verbErr("ibv_destroy_ah", verbs.DestroyAH(ah.raw)) }, nil, nil)
}
