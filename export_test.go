package authsrv

// SetStartUp sets how many tokens New warms the list set for itself and a
// hook that runs before each warm-up, for tests; restore puts both back.
func SetStartUp(syncTokens int, hook func()) (restore func()) {
	oldN, oldHook := syncWarmTokens, beforeWarm
	syncWarmTokens, beforeWarm = syncTokens, hook
	return func() { syncWarmTokens, beforeWarm = oldN, oldHook }
}
