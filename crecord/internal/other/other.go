// Package other stands for a second generated package in crecord's tests:
// records named as generated/verbs names them, of the same or another size.
package other

import (
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// Context has verbs.Context's name and size.
type Context struct {
	_ [unsafe.Sizeof(verbs.Context{})]byte
}

// PD has verbs.PD's name and grew by 8 bytes at its end.
type PD struct {
	_ [unsafe.Sizeof(verbs.PD{}) + 8]byte
}

// Device has verbs.Context's size and another name.
type Device struct {
	_ [unsafe.Sizeof(verbs.Context{})]byte
}
