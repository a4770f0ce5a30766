//go:build !race

package hand

const raceEnabled = false
