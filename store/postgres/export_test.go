package postgres

// SetBeforeBatch makes the leader of every batch call f before it takes
// its batch from the queue. Call it before any Update.
func SetBeforeBatch(s *Store, f func()) { s.beforeBatch = f }

// SetOnCommit makes every commit of an Update batch call f with the
// number of functions it held. Call it before any Update.
func SetOnCommit(s *Store, f func(calls int)) { s.onCommit = f }

// Queued is the number of Update calls in the queue.
func Queued(s *Store) int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.pending)
}
