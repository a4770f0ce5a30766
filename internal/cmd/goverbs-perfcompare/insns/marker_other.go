//go:build !amd64

package insns

// Marker does nothing here: the marker and the plugin are amd64's.
func Marker() {}
