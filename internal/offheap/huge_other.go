//go:build unix && !linux

package offheap

func adviseHuge([]byte) {}
