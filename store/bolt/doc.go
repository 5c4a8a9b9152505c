// Package bolt is the default store.Store: one go.etcd.io/bbolt file on
// local disk, opened once per process.
//
// It owns everything bbolt-specific: opening the file with a lock timeout,
// fsync on every commit, mapping bbolt's errors onto the store sentinels,
// group commit of concurrent writers, and hot snapshots. It is the only
// package in authsrv that imports bbolt, and it imports nothing of authsrv
// but store.
//
// Update is a group commit: concurrent calls are queued, and whichever
// caller finds no commit running becomes the leader and runs every queued
// function (up to Options.MaxBatch) in one write transaction with one
// fsync, then hands leadership to the next waiting caller. A lone writer
// pays one fsync and no added delay; under load many writers share each
// fsync. Because a failing function forces the rest of its batch to be
// re-run, the function passed to Update may run more than once (see
// store's package comment).
//
// Details that store's comments leave open, which storetest checks for
// every backend: Put copies its key and value, so callers may reuse
// buffers; a function walking a bucket with ForEach in an Update may write
// to it, even delete the key it was given; DeleteBucket also resets the
// bucket's sequence; a panic in a View or Update function becomes an error
// (here a *PanicError). A transaction must not be used by several
// goroutines at once, nor after its function has returned.
//
// A commit the storage refuses (a full disk, a file size limit, an I/O
// error) returns a *store.WriteError and puts the store's WriteHealth in
// the failing state; reads go on. While it lasts, and only then, a
// goroutine writes a probe every Options.ProbeInterval; the first commit
// that needs new space and succeeds (the probe's or a caller's) ends the
// failure. bbolt itself writes again after a refused commit without a
// reopen (see probe.go).
//
// Production code opens the store with Open, which always syncs. Tests get a
// fast store without fsync only through OpenForTest (or storetest.Open).
package bolt
