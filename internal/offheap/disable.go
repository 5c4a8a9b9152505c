package offheap

// disabled makes every allocation come from the heap (tests of the
// fallback path set it).
var disabled bool
