package bolt

import bbolt "go.etcd.io/bbolt"

// SetBeforeBatch makes every leader call f before it takes its batch from
// the queue, so a test can hold the leader while calls pile up. Set it
// before the first Update.
func SetBeforeBatch(db *DB, f func()) { db.beforeBatch = f }

// Pending returns the number of queued Update calls not yet taken by a
// leader.
func Pending(db *DB) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.pending)
}

// SyncFlags reports bbolt's durability switches of an open DB.
func SyncFlags(db *DB) (noSync, noGrowSync, noFreelistSync bool) {
	return db.bdb.NoSync, db.bdb.NoGrowSync, db.bdb.NoFreelistSync
}

// Check runs bbolt's consistency check over the whole file.
func Check(db *DB) error {
	var first error
	err := db.bdb.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return first
}

// OpenNoSync is OpenForTest with options and without a testing.TB.
func OpenNoSync(path string, opts Options) (*DB, error) { return open(path, opts, true) }

// DataSize is the size of the file's data (its high-water mark).
func DataSize(db *DB) int64 { return db.dataSize() }

// LeafFill is the share of the leaf pages of bucket that holds data.
func LeafFill(db *DB, bucket string) (float64, error) {
	var fill float64
	err := db.bdb.View(func(tx *bbolt.Tx) error {
		st := tx.Bucket([]byte(bucket)).Stats()
		fill = float64(st.LeafInuse) / float64(st.LeafPageN*db.bdb.Info().PageSize)
		return nil
	})
	return fill, err
}
