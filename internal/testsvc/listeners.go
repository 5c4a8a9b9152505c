package testsvc

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// CountingListener listens on a loopback port, closes every connection it
// accepts and counts them: a test of a refusal that must happen before
// any connection asserts that the count stayed 0. It is closed at the end
// of the test.
type CountingListener struct {
	net.Listener
	accepted atomic.Int32
}

// NewCountingListener starts one on 127.0.0.1.
func NewCountingListener(tb testing.TB) *CountingListener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	l := &CountingListener{Listener: ln}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			_ = c.Close()
		}
	}()
	return l
}

// Port is the listener's port.
func (l *CountingListener) Port() int { return l.Addr().(*net.TCPAddr).Port }

// Accepted is how many connections it has accepted so far.
func (l *CountingListener) Accepted() int32 { return l.accepted.Load() }

// BlackHole listens on a loopback port, accepts every connection, reads
// what arrives and never answers, until the test ends; it returns the
// "host:port" address. Backends that hang after the handshake look like
// this.
func BlackHole(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
