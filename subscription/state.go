package subscription

import (
	"fmt"
	"strings"
	"time"
)

// State is a subscription's state as privacyIDEA's dashboard shows it.
type State string

// The states.
const (
	// None: no subscription on file.
	None State = "none"
	// Valid: in force, not near its end, within its limits.
	Valid State = "valid"
	// Expiring: in force, but ends within ExpiringDays days.
	Expiring State = "expiring"
	// Exceeded: in force, but more users have an active token than it
	// allows.
	Exceeded State = "exceeded"
	// Expired: date_till has passed.
	Expired State = "expired"
)

// ExpiringDays is how close to its end a subscription is Expiring.
const ExpiringDays = 60

// ServerApplication is the application of the server's own subscription.
const ServerApplication = "privacyidea"

// DashboardPlugins are the client plugins privacyIDEA's dashboard lists,
// each with a status of its own (GET /subscriptions/status).
var DashboardPlugins = []string{
	"privacyidea-app", "privacyidea-radius", "privacyidea-cp", "privacyidea-pam", "pam-passkey",
	"privacyidea-keycloak", "entraid-via-keycloak", "privacyidea-adfs", "privacyidea-shibboleth",
}

// aliases maps the clients that count against another application's
// subscription to that application.
var aliases = map[string]string{
	"pam-passkey":          "privacyidea-pam",
	"entraid-via-keycloak": "privacyidea-keycloak",
	"privacyidea-app":      "privacyidea authenticator",
	"privacyidea-radius":   ServerApplication,
}

// OwningApplication is the application whose subscription the client
// plugin counts against (itself, lower-case, unless it is an alias).
func OwningApplication(plugin string) string {
	p := strings.ToLower(plugin)
	if a, ok := aliases[p]; ok {
		return a
	}
	return p
}

// Usage is what is in use, to compare with a subscription's limits.
type Usage struct {
	// ActiveTokens counts the active tokens that have an owner.
	ActiveTokens int
	// ActiveUsers counts the users who own an active token.
	ActiveUsers int
}

// Status is a subscription's state at one time.
type Status struct {
	// Application is the one asked about (a plugin's name on the
	// dashboard).
	Application string
	State       State
	// Subscription is the one on file (nil when State is None).
	Subscription *Subscription
	// DaysLeft is whole days from now to date_till (negative after it);
	// meaningless when State is None.
	DaysLeft int
	// Warning says what an operator should do when State is Expired or
	// Exceeded; "" otherwise. Neither state stops authentication.
	Warning string
	// LastSeen is when a client of this application last authenticated
	// a user here (zero: never, or not known).
	LastSeen time.Time
}

// pluginAgents maps the product name of a client's User-Agent (the part
// before the first "/", lower case) to the dashboard plugin it belongs
// to.
var pluginAgents = map[string]string{
	"freeradius":             "privacyidea-radius",
	"pam":                    "privacyidea-pam",
	"privacyidea-pam":        "privacyidea-pam",
	"pam-passkey":            "pam-passkey",
	"privacyidea-cp":         "privacyidea-cp",
	"privacyidea-keycloak":   "privacyidea-keycloak",
	"privacyidea-adfs":       "privacyidea-adfs",
	"privacyidea-shibboleth": "privacyidea-shibboleth",
}

// PluginOf returns the dashboard plugin a client with User-Agent ua
// belongs to ("" for none).
func PluginOf(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	return pluginAgents[strings.ToLower(strings.TrimSpace(name))]
}

// Seen sets LastSeen of the plugin entries from seen (plugin name to the
// newest time one of its clients was seen).
func Seen(entries []Status, seen map[string]time.Time) {
	for i := range entries {
		if t, ok := seen[entries[i].Application]; ok {
			entries[i].LastSeen = t
		}
	}
}

// floorDays is d in whole days, rounded down (as Python's timedelta.days).
func floorDays(d time.Duration) int {
	days := d / (24 * time.Hour)
	if d%(24*time.Hour) < 0 {
		days--
	}
	return int(days)
}

// Timedelta is whole days from date_till to now: negative while the
// subscription is in force (privacyIDEA's "timedelta").
func Timedelta(sub Subscription, now time.Time) int { return floorDays(now.Sub(sub.DateTill)) }

// Evaluate returns the state of sub (nil: none on file) for application
// at now, given what is in use. A subscription is Expired once date_till
// has begun; Exceeded when more users own an active token than num_tokens
// allows (privacyIDEA counts users against num_tokens) or than num_users
// allows; Expiring when it ends within ExpiringDays days.
func Evaluate(application string, sub *Subscription, u Usage, now time.Time) Status {
	st := Status{Application: application, State: None, Subscription: sub}
	if sub == nil {
		return st
	}
	st.DaysLeft = floorDays(sub.DateTill.Sub(now))
	name := sub.Application
	switch {
	case sub.DateTill.Before(now):
		st.State = Expired
		st.Warning = fmt.Sprintf("The subscription for %s expired on %s: renew it and upload the new subscription file. Authentication keeps working.",
			name, sub.DateTill.UTC().Format(DateFormat))
	case sub.NumTokens != nil && u.ActiveUsers > *sub.NumTokens:
		st.State = Exceeded
		st.Warning = exceeded(name, u.ActiveUsers, *sub.NumTokens)
	case sub.NumUsers != nil && u.ActiveUsers > *sub.NumUsers:
		st.State = Exceeded
		st.Warning = exceeded(name, u.ActiveUsers, *sub.NumUsers)
	case st.DaysLeft < ExpiringDays:
		st.State = Expiring
	default:
		st.State = Valid
	}
	return st
}

func exceeded(application string, users, allowed int) string {
	return fmt.Sprintf("The subscription for %s is exceeded: %d users have an active token, the subscription allows %d. Extend the subscription or remove tokens. Authentication keeps working.",
		application, users, allowed)
}

// Overview is the dashboard's list: the server's status first, then one
// per DashboardPlugins entry, each resolved through OwningApplication.
// subs are the stored subscriptions.
func Overview(subs []Subscription, u Usage, now time.Time) []Status {
	byApp := map[string]*Subscription{}
	for i := range subs {
		app := strings.ToLower(subs[i].Application)
		if cur, ok := byApp[app]; !ok || subs[i].DateTill.After(cur.DateTill) {
			byApp[app] = &subs[i]
		}
	}
	out := []Status{Evaluate(ServerApplication, byApp[ServerApplication], u, now)}
	for _, p := range DashboardPlugins {
		out = append(out, Evaluate(p, byApp[OwningApplication(p)], u, now))
	}
	return out
}
