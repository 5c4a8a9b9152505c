package offheap

import "runtime"

func attach[T any](owner *T, a *Arena) {
	runtime.AddCleanup(owner, func(a *Arena) { a.Free() }, a)
}
