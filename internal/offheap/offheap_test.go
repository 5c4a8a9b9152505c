package offheap

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestMakeOffHeapAndContent(t *testing.T) {
	a := New()
	defer a.Free()
	n := MinSize / 4
	u := Make[uint32](a, n, n+10)
	if len(u) != n || cap(u) != n+10 {
		t.Fatalf("len %d cap %d, want %d %d", len(u), cap(u), n, n+10)
	}
	if a.Size() < 4*(n+10) {
		t.Fatalf("arena holds %d bytes, want at least %d (the slice should be off the heap)", a.Size(), 4*(n+10))
	}
	for i, v := range u {
		if v != 0 {
			t.Fatalf("u[%d] = %d, want zeroed memory", i, v)
		}
		u[i] = uint32(i) * 7
	}
	u = append(u, 1, 2, 3) // within capacity: stays in the arena
	for i := range n {
		if u[i] != uint32(i)*7 {
			t.Fatalf("u[%d] = %d", i, u[i])
		}
	}
	b := Bytes(a, MinSize, MinSize)
	copy(b, "hello")
	if s := String(b[:5]); s != "hello" {
		t.Fatalf("String = %q", s)
	}
	w := Make[uint64](a, MinSize/8, 0)
	w[len(w)-1] = 1 << 63
	if w[len(w)-1] != 1<<63 || len(w) != MinSize/8 {
		t.Fatal("uint64 slice")
	}
}

func TestSmallAndNilStayOnHeap(t *testing.T) {
	a := New()
	defer a.Free()
	s := Make[uint32](a, 10, 10)
	s[9] = 5
	if a.Size() != 0 {
		t.Fatalf("a small slice took %d arena bytes", a.Size())
	}
	big := Make[byte](nil, MinSize, MinSize)
	big[MinSize-1] = 1
	if len(big) != MinSize {
		t.Fatal("nil arena")
	}
	var nilArena *Arena
	nilArena.Free()
	if nilArena.Size() != 0 {
		t.Fatal("nil arena size")
	}
}

func TestFallback(t *testing.T) {
	disabled = true
	defer func() { disabled = false }()
	a := New()
	u := Make[uint32](a, MinSize, MinSize)
	u[MinSize-1] = 9
	if a.Size() != 0 || u[MinSize-1] != 9 {
		t.Fatalf("fallback: arena size %d", a.Size())
	}
	a.Free()
	u[0] = 1 // heap memory stays usable
}

func TestFreeThenMakeUsesHeap(t *testing.T) {
	a := New()
	_ = Make[byte](a, MinSize, MinSize)
	a.Free()
	a.Free()
	if a.Size() != 0 {
		t.Fatal("size after Free")
	}
	b := Make[byte](a, MinSize, MinSize)
	b[0] = 1
	if a.Size() != 0 {
		t.Fatal("a freed arena mapped again")
	}
}

type owner struct {
	data []uint64
}

func TestAttachFreesWhenOwnerDropped(t *testing.T) {
	a := New()
	o := &owner{data: Make[uint64](a, MinSize/8, 0)}
	o.data[0] = 42
	Attach(o, a)
	if a.Size() == 0 {
		t.Fatal("nothing mapped")
	}
	runtime.KeepAlive(o)
	o = nil
	deadline := time.Now().Add(30 * time.Second)
	for a.Size() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the arena was not freed after its owner became unreachable")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func TestAttachKeepsWhileOwnerLive(t *testing.T) {
	a := New()
	o := &owner{data: Make[uint64](a, MinSize/8, 0)}
	Attach(o, a)
	for range 5 {
		runtime.GC()
	}
	if a.Size() == 0 {
		t.Fatal("freed while the owner is live")
	}
	o.data[len(o.data)-1] = 1
	runtime.KeepAlive(o)
	a.Free()
}

func TestConcurrentMake(t *testing.T) {
	a := New()
	defer a.Free()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			s := Make[uint32](a, MinSize/4, 0)
			for i := range s {
				s[i] = uint32(w)
			}
			for _, v := range s {
				if v != uint32(w) {
					t.Error("shared memory between allocations")
					return
				}
			}
		})
	}
	wg.Wait()
	if a.Size() < 4*MinSize {
		t.Fatalf("size %d", a.Size())
	}
}

func TestPointerTypesRefused(t *testing.T) {
	a := New()
	defer a.Free()
	type key struct {
		k0, k1 uint64
		n      [2]uint32
	}
	k := Make[key](a, MinSize/24+1, 0)
	k[0].n[1] = 3
	if a.Size() == 0 {
		t.Fatal("a pointer-free struct should go off the heap")
	}
	type withPtr struct {
		n int
		s string
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Make accepted a type holding pointers")
		}
	}()
	_ = Make[withPtr](a, MinSize, 0)
}

func TestGrow(t *testing.T) {
	a := New()
	defer a.Free()
	s := Make[uint32](a, 0, MinSize/4)
	for i := range MinSize/4 + 5 {
		s = Grow(a, s, 1)
		s = append(s, uint32(i))
	}
	for i, v := range s {
		if v != uint32(i) {
			t.Fatalf("s[%d] = %d after growing", i, v)
		}
	}
	if got, want := a.Size(), cap(s)*4; got != want {
		t.Fatalf("arena holds %d bytes, want %d (the outgrown mapping released)", got, want)
	}
	small := Grow(a, []byte(nil), 10)
	if cap(small) < 10 || a.Size() != cap(s)*4 {
		t.Fatal("a small Grow")
	}
	h := make([]uint64, 3)
	h = Grow(a, h, MinSize/8)
	if len(h) != 3 || cap(h) < MinSize/8+3 {
		t.Fatalf("len %d cap %d", len(h), cap(h))
	}
}

func TestSetMinSize(t *testing.T) {
	restore := SetMinSize(64)
	a := New()
	s := Make[uint32](a, 16, 16)
	s[15] = 1
	if a.Size() == 0 {
		t.Fatal("64 bytes stayed on the heap with the minimum at 64")
	}
	a.Free()
	restore()
	b := New()
	defer b.Free()
	_ = Make[uint32](b, 16, 16)
	if b.Size() != 0 {
		t.Fatal("restore did not put MinSize back")
	}
}

func TestPeak(t *testing.T) {
	a := New()
	defer a.Free()
	s := Make[byte](a, 0, MinSize)
	if a.Peak() != MinSize || a.Size() != MinSize {
		t.Fatalf("peak %d size %d after one mapping of %d", a.Peak(), a.Size(), MinSize)
	}
	s = Grow(a, s[:MinSize], 1) // full: the copy needs both mappings
	if got, want := a.Size(), cap(s); got != want {
		t.Fatalf("size %d, want %d (the outgrown mapping released)", got, want)
	}
	if got, want := a.Peak(), MinSize+cap(s); got != want {
		t.Fatalf("peak %d, want %d (the old and the new mapping at once)", got, want)
	}
	a.Free()
	if a.Size() != 0 || a.Peak() != MinSize+cap(s) {
		t.Fatalf("after Free: size %d peak %d", a.Size(), a.Peak())
	}
	var nilArena *Arena
	if nilArena.Peak() != 0 {
		t.Fatal("nil arena peak")
	}
}
