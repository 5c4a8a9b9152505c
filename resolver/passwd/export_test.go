package passwd

import "github.com/authsrv/authsrv/resolver"

// ParseLine exposes the line parser to the fuzz test: the seven raw fields
// and the user info of a well-formed user line.
func ParseLine(line string) (fields [7]string, info resolver.Info, ok bool) {
	e, ok := parseLine(line)
	if !ok {
		return fields, nil, false
	}
	return [7]string{e.login, e.hash, e.uid, e.gid, e.gecos, e.home, e.shell}, e.info(), true
}

// Verify exposes the password check.
func Verify(hash, password string) bool { return verify(hash, password) }

// DummyHash is the hash unknown users are checked against.
const DummyHash = dummyHash

// WaitLoaded waits for the first load of a passwd store.
func WaitLoaded(r resolver.Resolver) { <-r.(*store).first }

// SetBackgroundSize sets the file size from which reloads run in the
// background.
func SetBackgroundSize(r resolver.Resolver, n int64) { r.(*store).backgroundSize = n }

// HoldFirstLoads makes every store built until the returned release is
// called wait before its first load.
func HoldFirstLoads() (release func()) {
	gate := make(chan struct{})
	beforeFirstLoad = func() { <-gate }
	return func() {
		beforeFirstLoad = nil
		close(gate)
	}
}
