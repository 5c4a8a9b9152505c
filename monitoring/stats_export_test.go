package monitoring

// SetPruneBatch sets the number of points one retention transaction
// visits (tests prove the result does not depend on it).
func SetPruneBatch(s *Stats, n int) { s.batch = n }
