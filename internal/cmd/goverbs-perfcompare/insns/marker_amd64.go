package insns

// Marker executes insncount's marker instruction, a no-op to the CPU, at
// which the plugin writes a snapshot of its counts.
func Marker()
