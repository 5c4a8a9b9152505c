package ldap

// Internals under unit and fuzz tests.
var (
	SearchFilter   = searchFilter
	EqualityFilter = equalityFilter
	GlobMatch      = globMatch
	GUIDString     = guidString
	GUIDBytes      = guidBytes
	SSHAHash       = sshaHash
	ADFiletime     = adFiletime
)
