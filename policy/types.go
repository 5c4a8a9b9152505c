// Package policy owns policies: their storage, the matching engine
// (scope, action, realm/resolver/user with wildcards and exclusions,
// admin realm and user, client networks, time ranges, nodes, user agents,
// priorities and conditions), the registry of action definitions every
// subsystem declares, and the INI-style export and import.
//
// Package policy sits on floor 2: it imports store and apierr and nothing
// that knows HTTP.
package policy

// Policy is one policy as the API reads and writes it.
type Policy struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Scope       string `json:"scope"`
	Priority    int    `json:"priority"`
	Description string `json:"description"`
	// Action is the comma separated action string ("enable, otppin=userstore");
	// a comma inside a value is written \, .
	Action              string      `json:"action"`
	Realm               []string    `json:"realm"`
	Resolver            []string    `json:"resolver"`
	User                []string    `json:"user"`
	AdminRealm          []string    `json:"adminrealm"`
	AdminUser           []string    `json:"adminuser"`
	Client              []string    `json:"client"`
	PINode              []string    `json:"pinode"`
	UserAgents          []string    `json:"user_agents"`
	Time                string      `json:"time"`
	Active              bool        `json:"active"`
	CheckAllResolvers   bool        `json:"check_all_resolvers"`
	UserCaseInsensitive bool        `json:"user_case_insensitive"`
	Conditions          []Condition `json:"conditions"`
}

// Condition is one extended condition of a policy.
type Condition struct {
	Section    string
	Key        string
	Comparator string
	Value      string
	Active     bool
	// MissingData says what happens when the data is unavailable:
	// MissingRaise (default), MissingTrue or MissingFalse.
	MissingData string
}

// Missing-data modes of a condition.
const (
	MissingRaise = "raise_error"
	MissingTrue  = "condition_is_true"
	MissingFalse = "condition_is_false"
)

// Condition sections.
const (
	SectionUserinfo      = "userinfo"
	SectionToken         = "token"
	SectionTokeninfo     = "tokeninfo"
	SectionContainer     = "container"
	SectionContainerInfo = "container_info"
	SectionHeader        = "HTTP Request header"
	SectionEnvironment   = "HTTP Environment"
	SectionRequestData   = "Request Data"
)

// Scopes.
const (
	ScopeAdmin          = "admin"
	ScopeUser           = "user"
	ScopeAuthentication = "authentication"
	ScopeAuthorization  = "authorization"
	ScopeEnrollment     = "enrollment"
	ScopeWebUI          = "webui"
	ScopeRegister       = "register"
	ScopeContainer      = "container"
	ScopeToken          = "token"
	ScopeHardening      = "hardening"
	ScopeAudit          = "audit"
	// ScopeSystem and ScopeSelfservice are accepted for the product
	// description's examples; their actions are not checked.
	ScopeSystem      = "system"
	ScopeSelfservice = "selfservice"
)
