//go:build !linux

package bolt

const residentSupported = false

func residentBytes(uintptr, int64) (int64, error) { return 0, nil }

func dropResident(uintptr, int64) error { return nil }

type statmReader struct{}

func openStatm() (*statmReader, error) { return &statmReader{}, nil }

func (*statmReader) close() {}

func (*statmReader) shared() (int64, error) { return 0, nil }
