//go:build !linux

package bolt

const residentSupported = false

func residentBytes(uintptr, int64) (int64, error) { return 0, nil }

func dropResident(uintptr, int64) error { return nil }

func sharedBytes() (int64, error) { return 0, nil }
