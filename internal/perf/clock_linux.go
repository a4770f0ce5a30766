package perf

import (
	"syscall"
	"unsafe"
)

// monotonicNanos reads CLOCK_MONOTONIC, the clock of perf's -k
// CLOCK_MONOTONIC timestamps.
func monotonicNanos() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
