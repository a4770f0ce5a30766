//go:build race

package hand

// raceEnabled: built with -race, whose runtime allocates for its own
// bookkeeping, so allocation counts do not hold.
const raceEnabled = true
