// Package offheap allocates large pointer-free slices outside the Go heap,
// so that they count once in the process's memory instead of twice (the
// collector's heap goal is a multiple of the live heap, and large
// long-lived arrays of plain numbers and text gain nothing from being
// scanned or counted in it).
//
// An Arena owns the memory of one owner (a loaded file's index, a list
// set). It is released when the owner becomes unreachable (Attach, through
// runtime.AddCleanup) or explicitly by Free when the caller knows no slice
// of it is in use (a builder's scratch space). Readers must keep the owner
// reachable for as long as they use a slice or string cut from its memory
// (runtime.KeepAlive on the owner), and must copy anything that outlives
// that use: the collector does not see pointers into the arena.
//
// Requests below MinSize, a nil Arena and platforms without anonymous
// mappings get ordinary heap slices; the arena's behaviour is otherwise
// the same.
package offheap

import (
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinSize is the smallest allocation (in bytes) placed outside the heap.
const MinSize = 1 << 20

// minSize is MinSize unless a test lowered it.
var minSize atomic.Int64

func init() { minSize.Store(MinSize) }

// SetMinSize sets the smallest allocation placed outside the heap, so that
// tests of the packages using an arena run their small data through it
// too; restore puts MinSize back. Only tests call it.
func SetMinSize(n int) (restore func()) {
	minSize.Store(int64(n))
	return func() { minSize.Store(MinSize) }
}

// Arena is the off-heap memory of one owner. The zero value is not usable;
// use New.
type Arena struct {
	mu    sync.Mutex
	maps  [][]byte
	size  int
	peak  int // the largest size so far
	freed bool
}

// New returns an empty arena.
func New() *Arena { return &Arena{} }

// Make returns a zeroed slice of length n and capacity c (c >= n) of E,
// outside the heap when its size reaches MinSize and a is not nil. E must
// hold no pointers (numbers, and arrays and structs of them): Make panics
// otherwise, as the collector would not see them.
func Make[E any](a *Arena, n, c int) []E {
	if c < n {
		c = n
	}
	var zero E
	size := c * int(unsafe.Sizeof(zero))
	if a == nil || size < int(minSize.Load()) || size == 0 {
		return make([]E, n, c)
	}
	if !pointerFree(reflect.TypeFor[E]()) {
		panic("offheap: element type " + reflect.TypeFor[E]().String() + " holds pointers")
	}
	mem := a.alloc(size)
	if mem == nil {
		return make([]E, n, c)
	}
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(mem))), c)[:n]
}

// Grow returns s with room for extra more elements: s itself when it has
// it, else a copy with at least twice the capacity, from a (on the heap
// when a is nil or the size is small). When s's memory is one of a's
// mappings it is released, so s must not be used after; Grow is for
// builders that own s alone.
func Grow[E any](a *Arena, s []E, extra int) []E {
	if cap(s)-len(s) >= extra {
		return s
	}
	return grow(a, s, extra)
}

func grow[E any](a *Arena, s []E, extra int) []E {
	grown := Make[E](a, len(s), max(2*cap(s), len(s)+extra))
	copy(grown, s)
	if cap(s) > 0 {
		a.release(unsafe.Pointer(unsafe.SliceData(s[:1])))
	}
	return grown
}

// Bytes is Make for a byte slice.
func Bytes(a *Arena, n, c int) []byte { return Make[byte](a, n, c) }

// String returns b as a string without copying it: the string shares b's
// memory and must not outlive it (b must not change after).
func String(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// alloc maps size bytes; nil when the platform has no mapping or the
// mapping failed (the caller falls back to the heap).
func (a *Arena) alloc(size int) []byte {
	mem := mapAnon(size)
	if mem == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.freed {
		unmap(mem)
		return nil
	}
	a.maps = append(a.maps, mem)
	a.size += len(mem)
	a.peak = max(a.peak, a.size)
	return mem
}

// release unmaps the mapping that starts at p, if a has one.
func (a *Arena) release(p unsafe.Pointer) {
	if a == nil {
		return
	}
	a.mu.Lock()
	var found []byte
	for i, m := range a.maps {
		if unsafe.Pointer(unsafe.SliceData(m)) == p {
			found = m
			a.maps = append(a.maps[:i], a.maps[i+1:]...)
			a.size -= len(m)
			break
		}
	}
	a.mu.Unlock()
	if found != nil {
		unmap(found)
	}
}

// Size is the memory the arena holds outside the heap, in bytes.
func (a *Arena) Size() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.size
}

// Peak is the most memory the arena has held outside the heap at once, in
// bytes: above Size when a slice grew (Grow holds the old and the new
// mapping while it copies) or scratch memory was released.
func (a *Arena) Peak() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// Free releases the arena's memory at once. Every slice it made must be
// out of use; later allocations from it come from the heap. Free is
// idempotent.
func (a *Arena) Free() {
	if a == nil {
		return
	}
	a.mu.Lock()
	maps := a.maps
	a.maps, a.size, a.freed = nil, 0, true
	a.mu.Unlock()
	for _, m := range maps {
		unmap(m)
	}
}

// Attach frees a when owner becomes unreachable. owner must hold every
// reference its readers use to reach the arena's slices, and a must not
// be owner itself; a must not be freed otherwise while owner lives.
func Attach[T any](owner *T, a *Arena) {
	if a == nil {
		return
	}
	attach(owner, a)
}

// pointerFree reports whether values of t hold no pointers.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
