//go:build !race

package passwd_test

const raceEnabled = false
