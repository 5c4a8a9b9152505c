package policy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Action types shown in GET /policy/defs. They are hints for the WebUI:
// every action value is stored as a string.
const (
	TypeBool = "bool"
	TypeStr  = "str"
	TypeInt  = "int"
	TypeText = "text"
)

// ActionDef defines one action a policy of a scope may carry.
type ActionDef struct {
	Scope, Name string
	// Type is one of TypeBool, TypeStr, TypeInt, TypeText.
	Type string
	// Desc is the help text shown in the WebUI.
	Desc string
	// Group is an optional UI grouping.
	Group string
	// Values lists the allowed values, if the action has a fixed set.
	Values []string
	// MainMenu lists the WebUI main menus the action unlocks.
	MainMenu []string
	// Multiple says that values of several policies are merged instead
	// of having to agree.
	Multiple bool
}

// defScopes are the scopes a policy may have, with whether their actions
// are checked against the definitions. system and selfservice come from
// the product description and are not checked (README divergence 10).
var defScopes = map[string]bool{
	ScopeAdmin:          true,
	ScopeUser:           true,
	ScopeAuthentication: true,
	ScopeAuthorization:  true,
	ScopeEnrollment:     true,
	ScopeWebUI:          true,
	ScopeRegister:       true,
	ScopeContainer:      true,
	ScopeToken:          true,
	ScopeHardening:      true,
	ScopeAudit:          true,
	ScopeSystem:         false,
	ScopeSelfservice:    false,
}

// Defs is the registry of action definitions: scope → name → definition.
// Fill it once at start with Add; it is safe for concurrent reads.
type Defs struct {
	mu   sync.RWMutex
	defs map[string]map[string]ActionDef
}

// NewDefs returns an empty registry that knows the valid scopes.
func NewDefs() *Defs {
	return &Defs{defs: map[string]map[string]ActionDef{}}
}

// Add registers definitions. A duplicate (scope, name), an unknown scope,
// an unknown type or a name that cannot appear in an action string is an
// error, and then nothing of this call is added.
func (d *Defs) Add(defs ...ActionDef) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[[2]string]bool{}
	for _, a := range defs {
		if err := defCheck(a); err != nil {
			return err
		}
		k := [2]string{a.Scope, a.Name}
		if _, dup := d.defs[a.Scope][a.Name]; dup || seen[k] {
			return fmt.Errorf("policy: action %q defined twice in scope %q", a.Name, a.Scope)
		}
		seen[k] = true
	}
	for _, a := range defs {
		m := d.defs[a.Scope]
		if m == nil {
			m = map[string]ActionDef{}
			d.defs[a.Scope] = m
		}
		a.Values = slices.Clone(a.Values)
		a.MainMenu = slices.Clone(a.MainMenu)
		m[a.Name] = a
	}
	return nil
}

func defCheck(a ActionDef) error {
	if _, ok := defScopes[a.Scope]; !ok {
		return fmt.Errorf("policy: action %q has unknown scope %q", a.Name, a.Scope)
	}
	switch a.Type {
	case TypeBool, TypeStr, TypeInt, TypeText:
	default:
		return fmt.Errorf("policy: action %q in scope %q has unknown type %q", a.Name, a.Scope, a.Type)
	}
	if a.Name == "" || a.Name == "*" || strings.ContainsAny(a.Name, ",=\\ \t\r\n") ||
		strings.HasPrefix(a.Name, "!") || strings.HasPrefix(a.Name, "-") {
		return fmt.Errorf("policy: invalid action name %q in scope %q", a.Name, a.Scope)
	}
	return nil
}

// Lookup returns the definition of an action.
func (d *Defs) Lookup(scope, name string) (ActionDef, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	a, ok := d.defs[scope][name]
	if ok {
		a.Values = slices.Clone(a.Values)
		a.MainMenu = slices.Clone(a.MainMenu)
	}
	return a, ok
}

// Scope returns a copy of the definitions of one scope: empty for a valid
// scope without actions, nil for an unknown scope.
func (d *Defs) Scope(scope string) map[string]ActionDef {
	if _, ok := defScopes[scope]; !ok {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]ActionDef, len(d.defs[scope]))
	for n, a := range d.defs[scope] {
		a.Values = slices.Clone(a.Values)
		a.MainMenu = slices.Clone(a.MainMenu)
		out[n] = a
	}
	return out
}

// Scopes returns every valid scope, sorted, including those without
// actions (audit, system, selfservice).
func (d *Defs) Scopes() []string {
	return slices.Sorted(maps.Keys(defScopes))
}

// ValidScope reports whether a policy may have this scope.
func (d *Defs) ValidScope(scope string) bool {
	_, ok := defScopes[scope]
	return ok
}

// Checked reports whether the actions of a scope are validated against
// the definitions. It is false for system and selfservice, whose actions
// are free-form (README divergence 10), and for unknown scopes.
func (d *Defs) Checked(scope string) bool {
	return defScopes[scope]
}

// JSON returns one scope as GET /policy/defs/<scope> shows it: action →
// {"type", "desc"} plus "group", "value", "mainmenu" and "multiple" when
// set. Values of int actions are shown as numbers. A scope without
// definitions gives nil (privacyIDEA answers null).
func (d *Defs) JSON(scope string) map[string]any {
	d.mu.RLock()
	defer d.mu.RUnlock()
	m := d.defs[scope]
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for n, a := range m {
		out[n] = defJSON(a)
	}
	return out
}

// AllJSON returns GET /policy/defs: scope → JSON(scope) for every scope
// that has definitions.
func (d *Defs) AllJSON() map[string]any {
	out := map[string]any{}
	for _, s := range d.Scopes() {
		if j := d.JSON(s); j != nil {
			out[s] = j
		}
	}
	return out
}

func defJSON(a ActionDef) map[string]any {
	e := map[string]any{"type": a.Type, "desc": a.Desc}
	if a.Group != "" {
		e["group"] = a.Group
	}
	if len(a.Values) > 0 {
		vals := make([]any, len(a.Values))
		for i, v := range a.Values {
			vals[i] = v
			if a.Type == TypeInt {
				if n, err := strconv.Atoi(v); err == nil {
					vals[i] = n
				}
			}
		}
		e["value"] = vals
	}
	if len(a.MainMenu) > 0 {
		e["mainmenu"] = slices.Clone(a.MainMenu)
	}
	if a.Multiple {
		e["multiple"] = true
	}
	return e
}

// ConditionDefs returns GET /policy/defs/conditions: the sections,
// comparators and missing-data modes a policy condition may use.
func ConditionDefs() map[string]any {
	sections := map[string]any{}
	for _, s := range defSectionDescs {
		sections[s[0]] = map[string]any{"description": s[1]}
	}
	comparators := map[string]any{}
	for _, c := range defComparatorDescs {
		comparators[c[0]] = map[string]any{"description": c[1]}
	}
	missing := map[string]any{}
	for _, m := range defMissingDescs {
		missing[m[0]] = map[string]any{"display_value": m[1], "description": m[2]}
	}
	return map[string]any{
		"sections":            sections,
		"comparators":         comparators,
		"handle_missing_data": missing,
	}
}

var defSectionDescs = [][2]string{
	{SectionUserinfo, "Attributes of the user the request is about, from the user store and the custom user attributes."},
	{SectionToken, "Database columns of the token named by the request's serial."},
	{SectionTokeninfo, "The token info entries of the token named by the request's serial."},
	{SectionContainer, "Properties of the container named by the request's container_serial."},
	{SectionContainerInfo, "The info entries of the container named by the request's container_serial."},
	{SectionHeader, "A header of the HTTP request, looked up by name without regard to case."},
	{SectionEnvironment, "A value of the request environment such as REMOTE_ADDR or HTTP_USER_AGENT."},
	{SectionRequestData, "A parameter of the request; passwords are never visible here."},
}

var defComparatorDescs = [][2]string{
	{"equals", "True if the value equals the given value exactly."},
	{"!equals", "True if the value differs from the given value."},
	{"contains", "True if the value is a list that has the given value as an element."},
	{"!contains", "True if the value is a list that does not have the given value as an element."},
	{"matches", "True if the whole value matches the given regular expression."},
	{"!matches", "True if the value does not fully match the given regular expression."},
	{"in", "True if the value is one of the comma-separated given values."},
	{"!in", "True if the value is none of the comma-separated given values."},
	{"<", "True if the value, read as an integer, is smaller than the given integer."},
	{">", "True if the value, read as an integer, is bigger than the given integer."},
	{"date_before", "True if the value is an ISO 8601 date before the given date."},
	{"date_after", "True if the value is an ISO 8601 date after the given date."},
	{"date_within_last", "True if the value is a date within the given duration before now (for example 7d, 6h, 1y)."},
	{"!date_within_last", "True if the value is a date older than the given duration before now."},
	{"string_contains", "True if the value contains the given text, ignoring case."},
	{"!string_contains", "True if the value does not contain the given text, ignoring case."},
}

var defMissingDescs = [][3]string{
	{MissingRaise, "Raise an error", "The request fails with a policy error when the data the condition needs is not available."},
	{MissingTrue, "Condition is true", "The condition counts as fulfilled when the data it needs is not available."},
	{MissingFalse, "Condition is false", "The condition counts as not fulfilled when the data it needs is not available."},
}

// defTokenTypes are the token types with enroll<TYPE> rights and
// per-type PIN rules.
var defTokenTypes = []string{
	"hotp", "totp", "motp", "daypassword", "spass", "pw", "registration", "applspec",
	"email", "sms", "paper", "tan", "indexedsecret", "question", "sshkey",
	"yubikey", "radius", "certificate",
}

// defChallengeTypes are the token types that can answer with a challenge
// and so have a <type>_challenge_text action.
var defChallengeTypes = []string{
	"hotp", "totp", "daypassword", "pw", "registration", "paper", "tan",
	"email", "sms", "indexedsecret", "question",
}

// defMenu returns a definition with main menus set.
func defMenu(a ActionDef, menus ...string) ActionDef { a.MainMenu = menus; return a }

// defVals returns a definition with allowed values set.
func defVals(a ActionDef, values ...string) ActionDef { a.Values = values; return a }

// defMulti returns a definition whose values are merged across policies.
func defMulti(a ActionDef) ActionDef { a.Multiple = true; return a }

// defScope builds the definitions of one scope from short constructors.
type defScope struct {
	scope string
	out   []ActionDef
}

func (s *defScope) add(typ, group, name, desc string) ActionDef {
	return ActionDef{Scope: s.scope, Name: name, Type: typ, Group: group, Desc: desc}
}
func (s *defScope) b(group, name, desc string) ActionDef { return s.add(TypeBool, group, name, desc) }
func (s *defScope) s(group, name, desc string) ActionDef { return s.add(TypeStr, group, name, desc) }
func (s *defScope) i(group, name, desc string) ActionDef { return s.add(TypeInt, group, name, desc) }
func (s *defScope) t(group, name, desc string) ActionDef { return s.add(TypeText, group, name, desc) }
func (s *defScope) put(defs ...ActionDef)                { s.out = append(s.out, defs...) }

// Builtin returns every action definition the spec names, so that later
// subsystems only read the registry.
func Builtin() []ActionDef {
	var out []ActionDef
	for _, f := range []func() []ActionDef{
		defAdmin, defUser, defAuthentication, defAuthorization, defEnrollment,
		defWebUI, defRegister, defContainer, defToken, defHardening,
	} {
		out = append(out, f()...)
	}
	return out
}

// defTokenRights are the token rights shared by the admin and user scopes.
func defTokenRights(s *defScope) {
	const g = "token"
	s.put(
		s.b(g, "enable", "Enable tokens."),
		s.b(g, "disable", "Disable tokens."),
		s.b(g, "delete", "Delete tokens."),
		s.b(g, "assign", "Assign tokens to a user."),
		s.b(g, "unassign", "Remove the owner of tokens."),
		s.b(g, "reset", "Reset the fail counter of tokens."),
		s.b(g, "resync", "Resynchronise HOTP and TOTP tokens with two OTP values."),
		s.b(g, "revoke", "Revoke tokens; a revoked token cannot be used again."),
		s.b(g, "setpin", "Set the OTP PIN of tokens."),
		s.b(g, "setrandompin", "Give tokens a random OTP PIN chosen by the server."),
		s.b(g, "setdescription", "Change the description of tokens."),
		s.b(g, "enrollpin", "Set an OTP PIN while enrolling a token."),
		defMulti(s.s(g, "hide_tokeninfo", "Token info keys (space-separated) that are not shown when tokens are listed.")),
	)
	const e = "enrollment"
	for _, t := range defTokenTypes {
		s.put(s.b(e, "enroll"+strings.ToUpper(t), fmt.Sprintf("Enroll %s tokens.", strings.ToUpper(t))))
	}
	const p = "pin"
	s.put(
		s.i(p, "otp_pin_maxlength", "Longest OTP PIN that may be set."),
		s.i(p, "otp_pin_minlength", "Shortest OTP PIN that may be set."),
		s.s(p, "otp_pin_contents", "Characters an OTP PIN must hold: c letters, n digits, s special, o others; a leading + means any one of them, a leading - forbids them."),
		s.i(p, "otp_pin_set_random", "Length of the random OTP PIN set with setrandompin."),
	)
	for _, t := range defTokenTypes {
		s.put(
			s.i(p, t+"_otp_pin_maxlength", fmt.Sprintf("Longest OTP PIN that may be set for %s tokens.", t)),
			s.i(p, t+"_otp_pin_minlength", fmt.Sprintf("Shortest OTP PIN that may be set for %s tokens.", t)),
			s.s(p, t+"_otp_pin_contents", fmt.Sprintf("Characters the OTP PIN of %s tokens must hold (see otp_pin_contents).", t)),
		)
	}
	s.put(
		defVals(s.s(e, "hotp_hashlib", "Hash algorithm of new HOTP tokens."), "sha1", "sha256", "sha512"),
		defVals(s.i(e, "hotp_otplen", "OTP length of new HOTP tokens."), "6", "8"),
		defVals(s.s(e, "totp_hashlib", "Hash algorithm of new TOTP tokens."), "sha1", "sha256", "sha512"),
		defVals(s.i(e, "totp_otplen", "OTP length of new TOTP tokens."), "6", "8"),
		defVals(s.i(e, "totp_timestep", "Time step in seconds of new TOTP tokens."), "30", "60"),
	)
	const c = "container"
	s.put(
		s.b(c, "container_info", "See the details of containers."),
		s.b(c, "container_create", "Create containers."),
		s.b(c, "container_delete", "Delete containers."),
		s.b(c, "container_description", "Change the description of containers."),
		s.b(c, "container_state", "Change the states of containers."),
		s.b(c, "container_add_token", "Add tokens to containers."),
		s.b(c, "container_remove_token", "Remove tokens from containers."),
		s.b(c, "container_assign_user", "Assign containers to a user."),
		s.b(c, "container_unassign_user", "Remove the owner of containers."),
		s.b(c, "container_register", "Register containers for synchronisation with a client."),
		s.b(c, "container_unregister", "Cancel the registration of containers."),
		s.b(c, "container_rollover", "Roll over registered containers and their tokens."),
	)
	const a = "audit"
	s.put(
		defMenu(s.b(a, "auditlog", "Read the audit log."), "audit"),
		s.b(a, "auditlog_download", "Download the audit log as a file."),
		s.s(a, "auditlog_age", "Only show audit entries newer than this age, for example 10d or 6h."),
		defMulti(s.s(a, "hide_audit_columns", "Audit columns (space-separated) that are not shown.")),
	)
	const u = "user"
	s.put(
		defMenu(s.b(u, "userlist", "List users and see their details."), "users"),
		s.b(u, "updateuser", "Edit users in editable user stores."),
		defMulti(s.t(u, "set_custom_user_attributes", "Custom user attributes that may be set, as :key: value value ... entries; * allows any key or value.")),
		defMulti(s.t(u, "delete_custom_user_attributes", "Custom user attributes (space-separated keys, * for all) that may be deleted.")),
	)
}

func defAdmin() []ActionDef {
	s := &defScope{scope: ScopeAdmin}
	defTokenRights(s)
	const g = "token"
	s.put(
		defMenu(s.b(g, "tokenlist", "List tokens; the realms of the matching policies limit which tokens are shown."), "tokens"),
		s.b(g, "set", "Set token properties such as count window, maximum fail count or validity period."),
		s.b(g, "settokeninfo", "Set and delete token info entries."),
		s.b(g, "tokenrealms", "Set the realms of tokens."),
		s.b(g, "getserial", "Find the serial of a token from an OTP value."),
		s.b(g, "getrandom", "Get random data from the server."),
		s.b(g, "copytokenpin", "Copy the OTP PIN from one token to another."),
		s.b(g, "copytokenuser", "Copy the owner from one token to another."),
		s.b(g, "losttoken", "Replace a lost token with a temporary password token."),
		s.b(g, "importtokens", "Import token seed files."),
		s.b(g, "getchallenges", "List the open challenges of tokens."),
		s.b(g, "cancelchallenge", "Cancel open challenges."),
		s.b(g, "triggerchallenge", "Trigger challenges for a user's tokens without the PIN."),
	)
	const tg = "tokengroup"
	s.put(
		s.b(tg, "tokengroup_list", "List token groups."),
		s.b(tg, "tokengroup_add", "Create and change token groups."),
		s.b(tg, "tokengroup_delete", "Delete token groups."),
		s.b(tg, "tokengroups", "Add tokens to and remove them from token groups."),
	)
	const c = "container"
	s.put(
		s.b(c, "container_list", "List containers."),
		s.b(c, "container_realms", "Set the realms of containers."),
		s.b(c, "container_template_create", "Create and change container templates."),
		s.b(c, "container_template_delete", "Delete container templates."),
		s.b(c, "container_template_list", "List container templates."),
	)
	const p = "policy"
	s.put(
		defMenu(s.b(p, "policyread", "Read policies and the policy definitions."), "config"),
		s.b(p, "policywrite", "Create, change, enable, disable and import policies."),
		s.b(p, "policydelete", "Delete policies."),
	)
	const cf = "config"
	s.put(
		defMenu(s.b(cf, "resolverread", "Read realms and user resolvers."), "config"),
		s.b(cf, "resolverwrite", "Create and change realms and user resolvers."),
		s.b(cf, "resolverdelete", "Delete realms and user resolvers."),
		defMenu(s.b(cf, "configread", "Read the system configuration."), "config"),
		s.b(cf, "configwrite", "Change the system configuration."),
		s.b(cf, "configdelete", "Delete system configuration entries."),
		s.b(cf, "system_documentation", "Download the documentation of the whole configuration."),
		s.b(cf, "set_hsm_password", "Set the password of the hardware security module."),
		defMenu(s.b(cf, "mresolverread", "Read machine resolvers."), "config"),
		s.b(cf, "mresolverwrite", "Create and change machine resolvers."),
		s.b(cf, "mresolverdelete", "Delete machine resolvers."),
		defMenu(s.b(cf, "caconnectorread", "Read CA connectors."), "config"),
		s.b(cf, "caconnectorwrite", "Create and change CA connectors."),
		s.b(cf, "caconnectordelete", "Delete CA connectors."),
		defMenu(s.b(cf, "smsgateway_read", "Read SMS gateway definitions."), "config"),
		s.b(cf, "smsgateway_write", "Create, change and delete SMS gateway definitions."),
		defMenu(s.b(cf, "smtpserver_read", "Read SMTP server definitions."), "config"),
		s.b(cf, "smtpserver_write", "Create, change, delete and test SMTP server definitions."),
		defMenu(s.b(cf, "radiusserver_read", "Read RADIUS server definitions."), "config"),
		s.b(cf, "radiusserver_write", "Create, change, delete and test RADIUS server definitions."),
		defMenu(s.b(cf, "privacyideaserver_read", "Read remote privacyIDEA server definitions."), "config"),
		s.b(cf, "privacyideaserver_write", "Create, change, delete and test remote privacyIDEA server definitions."),
		defMenu(s.b(cf, "eventhandling_read", "Read event handler definitions."), "config"),
		s.b(cf, "eventhandling_write", "Create, change, enable, disable and delete event handlers."),
		defMenu(s.b(cf, "periodictask_read", "Read periodic tasks."), "config"),
		s.b(cf, "periodictask_write", "Create, change, enable, disable and delete periodic tasks."),
	)
	const si = "serviceid"
	s.put(
		s.b(si, "serviceid_list", "List service IDs."),
		s.b(si, "serviceid_add", "Create and change service IDs."),
		s.b(si, "serviceid_delete", "Delete service IDs."),
	)
	const u = "user"
	s.put(
		s.b(u, "adduser", "Create users in editable user stores."),
		s.b(u, "deleteuser", "Delete users from editable user stores."),
		s.b(u, "get_user_internal_attributes", "Read the internal attributes of users."),
	)
	const m = "machine"
	s.put(
		defMenu(s.b(m, "machinelist", "List machines."), "machines"),
		s.b(m, "manage_machine_tokens", "Attach tokens to machines, detach them and set their options."),
		s.b(m, "fetch_authentication_items", "Fetch the authentication items of machine tokens."),
	)
	const cp = "components"
	s.put(
		defMenu(s.b(cp, "clienttype", "See which client applications contacted the server."), "components"),
		defMenu(s.b(cp, "managesubscription", "Read, upload and delete subscriptions."), "components"),
		defMenu(s.b(cp, "statistics_read", "Read the monitoring statistics."), "components"),
		s.b(cp, "statistics_delete", "Delete monitoring statistics."),
		s.b(cp, "api_client_list", "List API clients."),
		s.b(cp, "api_client_add", "Create API clients."),
		s.b(cp, "api_client_edit", "Change API clients."),
		s.b(cp, "api_client_rotate", "Issue new secrets for API clients."),
		s.b(cp, "api_client_delete", "Delete API clients."),
		s.b(cp, "remembered_device_list", "List remembered devices."),
		s.b(cp, "remembered_device_revoke", "Revoke remembered devices."),
	)
	return s.out
}

func defUser() []ActionDef {
	s := &defScope{scope: ScopeUser}
	defTokenRights(s)
	return s.out
}

func defAuthentication() []ActionDef {
	s := &defScope{scope: ScopeAuthentication}
	const g = "general"
	s.put(
		defVals(s.s(g, "otppin", "What the PIN part of the password is checked against: the token PIN, the user store password, or nothing."), "tokenpin", "userstore", "none"),
		s.s(g, "passthru", "Users without tokens authenticate against the user store (userstore) or the given RADIUS server."),
		s.s(g, "passthru_ignore_rollout_state", "Tokens in these rollout states (space-separated) do not count for passthru."),
		s.s(g, "passthru_assign", "With RADIUS passthru, assign a matching unassigned token; the value gives the PIN position and OTP length, for example 8:pin."),
		s.b(g, "passOnNoToken", "Users without tokens are always accepted."),
		s.s(g, "passonnotoken_ignore_rollout_state", "Tokens in these rollout states (space-separated) do not count for passOnNoToken."),
		s.b(g, "passOnNoUser", "Users who do not exist are always accepted."),
		defMulti(s.s(g, "mangle", "Rewrite a request parameter before authentication, written key/regex/replacement/ for user, pass or realm.")),
		s.s(g, "set_realm", "Authenticate users in this realm, whatever realm the request names."),
		s.b(g, "reset_all_user_tokens", "A successful authentication resets the fail counters of all tokens of the user."),
		s.b(g, "increase_failcounter_on_challenge", "Triggering a challenge increases the fail counter of the token."),
		s.s(g, "auth_cache", "Accept the same credentials again for this time, for example 4h, 4h/5m or 4h/3."),
		s.b(g, "hide_specific_error_message", "Answer Authentication failed. for every rejection and unknown user."),
		s.s(g, "disabled_token_types", "Token types (space-separated) that are ignored for authentication."),
	)
	const c = "challenge"
	s.put(
		s.s(c, "challenge_response", "Token types (space-separated) that may start a challenge with the PIN alone."),
		s.t(c, "challenge_text", "Text of the challenge message; write \\, for a comma."),
		s.t(c, "challenge_text_header", "Text shown before several challenge messages."),
		s.t(c, "challenge_text_footer", "Text shown after several challenge messages."),
		s.s(c, "preferred_client_mode", "Client modes in order of preference, for example interactive webauthn poll."),
		s.b(c, "force_challenge_response", "PIN and OTP are never accepted in one request, only as a challenge and its answer."),
		s.b(c, "client_mode_per_user", "Remember the last used token type of a user per client application."),
		s.b(c, "change_pin_via_validate", "Ask for a new PIN in a further challenge when the PIN must be changed."),
		s.b(c, "resync_via_multichallenge", "Resynchronise a token by asking for a second OTP value in a challenge."),
	)
	for _, t := range defChallengeTypes {
		s.put(s.t(c, t+"_challenge_text", fmt.Sprintf("Text of the challenge message of %s tokens; write \\, for a comma.", t)))
	}
	const e = "enroll_via_multichallenge"
	s.put(
		s.s(e, "enroll_via_multichallenge", "After a successful authentication of a user without tokens, enroll a token of this type."),
		s.t(e, "enroll_via_multichallenge_text", "Text shown when a token is enrolled after authentication."),
		s.s(e, "enroll_via_multichallenge_template", "Token template used to enroll after authentication."),
		s.b(e, "enroll_via_multichallenge_optional", "The user may skip the enrollment after authentication."),
		s.b(e, "enroll_via_multichallenge_passkey_offline", "A passkey enrolled after authentication is also usable offline."),
	)
	const r = "remember_device"
	s.put(
		s.b(r, "remember_device", "Set a cookie that lets a known device skip the second factor."),
		s.s(r, "remember_device_validity", "How long a remembered device stays valid, for example 30d."),
		s.i(r, "remember_device_max_devices", "Most remembered devices per user."),
	)
	const t = "token"
	s.put(
		s.t(t, "emailtext", "Body of the e-mail that carries the OTP; tags such as {otp} and {user} are replaced."),
		s.t(t, "emailsubject", "Subject of the e-mail that carries the OTP."),
		s.b(t, "emailautosend", "Send the next OTP by e-mail right after a successful authentication."),
		s.t(t, "smstext", "Text of the SMS that carries the OTP; tags such as {otp} and {user} are replaced."),
		s.b(t, "smsautosend", "Send the next OTP by SMS right after a successful authentication."),
		s.i(t, "indexedsecret_count", "How many positions of the secret an indexed-secret challenge asks for."),
		s.i(t, "push_wait", "Seconds to wait for a push answer before the request returns."),
	)
	return s.out
}

func defAuthorization() []ActionDef {
	s := &defScope{scope: ScopeAuthorization}
	const g = "general"
	s.put(
		defVals(s.s(g, "authorized", "Whether users may authenticate at all under these conditions."), "grant_access", "deny_access"),
		s.b(g, "application_tokentype", "Honour the type parameter of the request to choose the token type."),
		s.s(g, "auth_max_success", "Most successful authentications per time, for example 3/5m."),
		s.s(g, "auth_max_fail", "Most failed authentications per time, for example 3/1m."),
		s.s(g, "last_auth", "Reject tokens whose previous successful authentication is older than this, for example 30h or 7d."),
		s.s(g, "tokentype", "Token types (space-separated) that may authenticate."),
		s.s(g, "serial", "Regular expression the serial of the authenticating token must match."),
		defMulti(s.s(g, "tokeninfo", "A token info entry of the authenticating token must match, written key/regex/.")),
		s.s(g, "setrealm", "Move the user into this realm before authentication."),
		s.b(g, "no_detail_on_success", "Leave out the detail of successful authentications."),
		s.b(g, "no_detail_on_fail", "Leave out the detail of failed authentications."),
		s.b(g, "add_user_in_response", "Add the user's details to the detail of a successful authentication."),
		s.b(g, "add_resolver_in_response", "Add the user's resolver and realm to the detail of an authentication."),
		s.b(g, "api_key_required", "Authentication requests need an API key (a validate-role token)."),
		s.b(g, "require_auth_for_resolver_details", "The resolver health probe shows details only to administrators."),
	)
	return s.out
}

func defEnrollment() []ActionDef {
	s := &defScope{scope: ScopeEnrollment}
	const g = "general"
	s.put(
		s.i(g, "max_token_per_user", "Most tokens a user may have."),
		s.i(g, "max_token_per_realm", "Most tokens a realm may have."),
		s.i(g, "max_active_token_per_user", "Most active tokens a user may have."),
		s.i(g, "otp_pin_random", "Give new tokens a random OTP PIN of this length."),
		s.b(g, "encrypt_pin", "Store OTP PINs encrypted instead of hashed."),
		s.s(g, "tokenlabel", "Label of new tokens in authenticator apps; tags such as {user}, {realm} and {serial} are replaced."),
		s.s(g, "tokenissuer", "Issuer of new tokens in authenticator apps; the same tags as tokenlabel are replaced."),
		defVals(s.s(g, "autoassignment", "A user without tokens gets the unassigned token whose OTP value they entered; the PIN is checked against any_pin or the user store."), "any_pin", "userstore"),
		s.s(g, "verify_enrollment", "Token types (space-separated) whose enrollment must be confirmed with a first OTP value."),
		s.s(g, "require_description", "Token types (space-separated) that need a description when enrolled."),
		s.b(g, "change_pin_on_first_use", "The user must change the PIN of a new token at its first use."),
		s.s(g, "change_pin_every", "The user must change the PIN after this time, for example 90d."),
	)
	const l = "losttoken"
	s.put(
		s.i(l, "losttoken_PW_length", "Length of the password of a lost-token replacement."),
		s.s(l, "losttoken_PW_contents", "Characters of the password of a lost-token replacement."),
		s.i(l, "losttoken_valid", "Days a lost-token replacement stays valid."),
	)
	const t = "token"
	s.put(
		defVals(s.s(t, "hotp_hashlib", "Hash algorithm of new HOTP tokens."), "sha1", "sha256", "sha512"),
		defVals(s.i(t, "hotp_otplen", "OTP length of new HOTP tokens."), "6", "8"),
		s.b(t, "hotp_force_server_generate", "The server always generates the key of new HOTP tokens."),
		defVals(s.s(t, "totp_hashlib", "Hash algorithm of new TOTP tokens."), "sha1", "sha256", "sha512"),
		defVals(s.i(t, "totp_otplen", "OTP length of new TOTP tokens."), "6", "8"),
		defVals(s.i(t, "totp_timestep", "Time step in seconds of new TOTP tokens."), "30", "60"),
		s.b(t, "totp_force_server_generate", "The server always generates the key of new TOTP tokens."),
		s.b(t, "daypassword_force_server_generate", "The server always generates the key of new day-password tokens."),
		s.i(t, "papertoken_count", "Number of OTP values printed on a paper token."),
		s.i(t, "tantoken_count", "Number of TANs of a new TAN token."),
		s.s(t, "sms_gateways", "SMS gateways (space-separated identifiers) a user may choose for new SMS tokens."),
	)
	return s.out
}

func defWebUI() []ActionDef {
	s := &defScope{scope: ScopeWebUI}
	const g = "login"
	s.put(
		defVals(s.s(g, "login_mode", "What users log in to the WebUI with: the user store password, a privacyIDEA authentication, or not at all."), "userstore", "privacyIDEA", "disable"),
		defVals(s.s(g, "remote_user", "Whether a user authenticated by the web server (REMOTE_USER) is logged in."), "disable", "allowed", "force"),
		s.i(g, "jwt_validity", "Seconds an authorization token from the login stays valid."),
		s.i(g, "logout_time", "Seconds of inactivity after which the WebUI acts."),
		defVals(s.s(g, "timeout_action", "What the WebUI does after the inactivity time."), "lockscreen", "logout"),
		s.s(g, "realm_dropdown", "Show these realms (space-separated) for choice on the login page."),
		s.t(g, "login_text", "Text shown on the login page."),
	)
	const v = "view"
	s.put(
		s.i(v, "token_page_size", "Tokens per page in the WebUI."),
		s.i(v, "user_page_size", "Users per page in the WebUI."),
		s.i(v, "audit_page_size", "Audit entries per page in the WebUI."),
		s.s(v, "default_tokentype", "Token type selected first in the enrollment dialog."),
		s.b(v, "hide_welcome", "Do not show the welcome dialog."),
		s.b(v, "hide_buttons", "Hide buttons of actions the user may not perform instead of disabling them."),
		s.b(v, "show_seed", "Also show the key of new tokens as text."),
		s.b(v, "show_node", "Show the name of the server node."),
		s.b(v, "user_details", "Show user details in the token list."),
		s.b(v, "search_on_enter", "Search only when Enter is pressed."),
		s.b(v, "token_wizard", "Users without tokens go straight to a simple enrollment dialog."),
		s.b(v, "token_wizard_2nd", "The simple enrollment dialog shows a second page."),
		s.b(v, "dialog_no_token", "Tell users without tokens that they have none."),
		s.b(v, "deletion_confirmation", "Ask before deleting."),
		s.s(v, "custom_menu", "Template file that replaces the menu."),
		s.s(v, "custom_baseline", "Template file that replaces the footer."),
	)
	return s.out
}

func defRegister() []ActionDef {
	s := &defScope{scope: ScopeRegister}
	const g = "register"
	s.put(
		s.s(g, "realm", "Realm new users register in."),
		s.s(g, "resolver", "Editable user resolver new users are stored in."),
		s.s(g, "smtpconfig", "SMTP server that sends the registration e-mail."),
		s.s(g, "requiredemail", "Regular expression, written /regex/, the e-mail address of a new user must match."),
		s.t(g, "registration_body", "Body of the registration e-mail; {regkey} is replaced by the registration code."),
	)
	return s.out
}

func defContainer() []ActionDef {
	s := &defScope{scope: ScopeContainer}
	const g = "container"
	s.put(
		s.s(g, "container_server_url", "Address clients use to reach this server for container synchronisation."),
		s.i(g, "container_registration_ttl", "Minutes a client has to finish a container registration."),
		s.i(g, "container_challenge_ttl", "Minutes a container synchronisation challenge stays valid."),
		defVals(s.s(g, "container_ssl_verify", "Whether clients must verify the server certificate."), "True", "False"),
		s.b(g, "container_client_rollover", "Clients may roll over their container themselves."),
		s.b(g, "initially_add_tokens_to_container", "Tokens already on the client join the container at registration."),
		s.b(g, "disable_client_token_deletion", "Clients may not remove tokens from their container."),
		s.b(g, "disable_client_container_unregister", "Clients may not cancel the registration of their container."),
	)
	return s.out
}

func defToken() []ActionDef {
	s := &defScope{scope: ScopeToken}
	s.put(
		s.b("offline", "hide_specific_error_message_for_offline_refill", "Every failed offline refill answers Failed offline token refill."),
	)
	return s.out
}

func defHardening() []ActionDef {
	s := &defScope{scope: ScopeHardening}
	const g = "hardening"
	s.put(
		s.b(g, "hide_version", "Leave the version out of answers to requests without a logged-in user."),
		s.b(g, "hide_auth_error_status", "Answer every client error of /validate and /auth with HTTP 401."),
	)
	return s.out
}
