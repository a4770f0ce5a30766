//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package hand

import (
	"math/bits"

	"github.com/goverbs/goverbs/generated/verbs"
)

// be32 is x in network byte order. verbs.ToBe32 says the same portably, but
// costs the Set methods their inlining.
func be32(x uint32) verbs.Be32 { return verbs.Be32(bits.ReverseBytes32(x)) }
