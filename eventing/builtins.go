package eventing

// RegisterBuiltins registers the built-in handler modules in the order of
// GET /event/handlermodules.
func (s *Service) RegisterBuiltins() {
	for _, m := range []Module{
		newUserNotification(s), newToken(s), newScript(s), newFederation(s), newCounter(s),
		newRequestMangler(s), newResponseMangler(s), newLogging(s), newCustomUserAttributes(s), newWebHook(s),
	} {
		s.Register(m)
	}
}
