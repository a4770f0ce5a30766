package crecord_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/crecord"
	"github.com/goverbs/goverbs/crecord/internal/other"
	"github.com/goverbs/goverbs/generated/verbs"
)

func TestSameRecord(t *testing.T) {
	var c verbs.Context
	p := crecord.As[other.Context](&c)
	require.NotNil(t, p)
	assert.Equal(t, unsafe.Pointer(&c), unsafe.Pointer(p), "As returns the same object")
	back := crecord.As[verbs.Context](p)
	assert.Same(t, &c, back)
}

func TestDifferentName(t *testing.T) {
	var c verbs.Context
	n := unsafe.Sizeof(c)
	assert.PanicsWithValue(t, fmt.Sprintf("crecord: other.Device (%d bytes) is not the same C record as verbs.Context (%d bytes)", n, n),
		func() { crecord.As[other.Device](&c) })
}

func TestDifferentSize(t *testing.T) {
	var pd verbs.PD
	n := unsafe.Sizeof(pd)
	assert.PanicsWithValue(t, fmt.Sprintf("crecord: other.PD (%d bytes) is not the same C record as verbs.PD (%d bytes)", n+8, n),
		func() { crecord.As[other.PD](&pd) }, "a record that grew at its end")
	var grown other.PD
	assert.Panics(t, func() { crecord.As[verbs.PD](&grown) }, "the other way round")
}

func TestNil(t *testing.T) {
	assert.Nil(t, crecord.As[other.Context]((*verbs.Context)(nil)))
	// A nil pointer is nil whatever the types: no check to fail.
	assert.Nil(t, crecord.As[other.PD]((*verbs.PD)(nil)))
}

func TestNoAllocation(t *testing.T) {
	var c verbs.Context
	assert.Zero(t, testing.AllocsPerRun(100, func() { crecord.As[other.Context](&c) }))
}
