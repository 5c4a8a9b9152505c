package sysconfig

// Age makes the snapshot in use due for a revision check, as if a second
// had passed.
func (s *Service) Age() {
	if sn := s.snap.Load(); sn != nil {
		sn.checked.Store(0)
	}
}
