package hand

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// SRQ is a shared receive queue (struct ibv_srq): receive buffers that any
// QP created with QPConfig.SRQ consumes. Post to it with
// RecvChain.PostSRQRecv(srq).
type SRQ struct {
	object
	pd  *PD
	raw *verbs.SRQ
}

// SRQConfig sizes an SRQ. Its counts are at most 2^32-1, what struct
// ibv_srq_attr holds (the device's limits are lower).
type SRQConfig struct {
	MaxWR  int
	MaxSGE int // 0 means 1
	// Limit, if set, arms the SRQ: when fewer than Limit receives remain,
	// the device raises EventSRQLimitReached (see Context.NextEvent) and
	// disarms it. Arm again with SRQ.Arm.
	Limit int
}

// NewSRQ creates a shared receive queue.
func (pd *PD) NewSRQ(cfg SRQConfig) (*SRQ, error) {
	if err := checkRange("PD.NewSRQ", "MaxWR", cfg.MaxWR, 1, math.MaxUint32); err != nil {
		return nil, err
	}
	if err := checkRange("PD.NewSRQ", "MaxSGE", cfg.MaxSGE, 0, math.MaxUint32); err != nil {
		return nil, err
	}
	if cfg.Limit < 0 || cfg.Limit > cfg.MaxWR {
		return nil, &AttrError{Op: "PD.NewSRQ", Field: "Limit", Reason: fmt.Sprintf("%d: between 0 and MaxWR", cfg.Limit)}
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	attr := verbs.SRQInitAttr{Attr: verbs.SRQAttr{MaxWR: uint32(cfg.MaxWR), MaxSGE: uint32(max(cfg.MaxSGE, 1)), SRQLimit: uint32(cfg.Limit)}}
	raw, err := verbs.CreateSRQ(pd.raw, &attr)
	if err != nil {
		return nil, err
	}
	s := &SRQ{pd: pd, raw: raw}
	s.init(fmt.Sprintf("SRQ %#x", raw.Handle), &pd.object)
	pd.ctx.register(unsafe.Pointer(raw), s)
	return s, nil
}

// Raw returns the struct ibv_srq, valid until Close.
func (s *SRQ) Raw() *verbs.SRQ { return s.raw }

// Arm sets the SRQ limit (ibv_modify_srq with IBV_SRQ_LIMIT): when fewer
// than limit receives remain, the device raises EventSRQLimitReached once.
func (s *SRQ) Arm(limit int) error {
	if err := checkRange("SRQ.Arm", "limit", limit, 0, math.MaxUint32); err != nil {
		return err
	}
	if err := s.use(); err != nil {
		return err
	}
	defer s.done()
	attr := verbs.SRQAttr{SRQLimit: uint32(limit)}
	if err := verbs.ModifySRQ(s.raw, &attr, verbs.SRQLimit); err != nil {
		return fmt.Errorf("set the SRQ limit: %w", err)
	}
	return nil
}

// Query returns the SRQ's attributes (ibv_query_srq): its size and limit.
func (s *SRQ) Query() (verbs.SRQAttr, error) {
	var a verbs.SRQAttr
	if err := s.use(); err != nil {
		return a, err
	}
	defer s.done()
	return a, verbs.QuerySRQ(s.raw, &a)
}

// Close destroys the SRQ. It fails with a *BusyError while QPs use it.
func (s *SRQ) Close() error {
	return s.close(func() error {
		if err := verbs.DestroySRQ(s.raw); err != nil {
			return err
		}
		s.pd.ctx.unregister(unsafe.Pointer(s.raw), s)
		return nil
	}, nil, nil)
}
