//go:build !race

package rxe

// raceBuild: the binary was built with -race, which slows every memory
// access the detector watches several times over.
const raceBuild = false
