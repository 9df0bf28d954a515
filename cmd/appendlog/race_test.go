//go:build race

package main

// raceEnabled reports whether the tests run under the race detector; the
// CLI binary under test is then built with it too.
const raceEnabled = true
