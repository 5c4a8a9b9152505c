package sysconfig

import "time"

// Age makes the snapshot in use due for a revision check at every use
// from now on, as if the recheck bound had passed.
func (s *Service) Age() {
	s.snap.SetRecheck(time.Nanosecond)
	time.Sleep(time.Millisecond)
}
