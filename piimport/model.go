// Package piimport brings a privacyIDEA installation into a new authsrv
// data directory: it reads privacyIDEA's database (SQLite, MySQL/MariaDB or
// PostgreSQL) with its encKey, decrypts the secrets, and writes tokens,
// user stores, realms, policies and the rest of the configuration through
// the library's operations, into a new store that is moved into place only
// when everything is written.
//
// The Snapshot read from the database holds decrypted secrets (OTP seeds,
// passwords, RADIUS secrets): it must never be logged or printed, and its
// String methods redact them.
//
// Package piimport sits on floor 6, beside server: a caller of the
// library.
package piimport

import "fmt"

// SupportedVersions maps the alembic revisions this package reads to the
// privacyIDEA release whose schema they are.
var SupportedVersions = map[string]string{
	"eac770c0bbed": "3.10.2",
	// The head of 3.10 and 3.10.1: eac770c0bbed ("v3.10.2") revises it
	// and only drops a unique constraint of tokencontainerrealm, a table
	// the import does not read.
	"69e7817b9863": "3.10 or 3.10.1",
}

// Snapshot is everything Read took from a privacyIDEA database, with the
// encrypted values decrypted.
type Snapshot struct {
	// Revision is the database's alembic revision, Version the
	// privacyIDEA release it belongs to.
	Revision, Version string

	Tokens           []Token
	Resolvers        []Resolver
	Realms           []Realm
	Policies         []Policy
	Config           []ConfigEntry // the config table without __timestamp__
	SMTPServers      []SMTPServer
	SMSGateways      []SMSGateway
	RadiusServers    []RadiusServer
	MachineResolvers []MachineResolver
	MachineTokens    []MachineToken
	ServiceIDs       []ServiceID
	CAConnectors     []CAConnector
	Attributes       []UserAttribute
	Events           []EventHandler
	Admins           []Admin
	// Unread lists the tables with rows that the import does not bring
	// over (the audit log, client applications, open challenges,
	// periodic tasks, containers, ...), with the reason.
	Unread []Row
}

// Token is one row of the token table with what belongs to it.
type Token struct {
	ID          int64
	Serial      string
	Type        string // lower case, as privacyIDEA stores it
	Description string
	OTPLen      int
	// Key is key_enc decrypted: the text privacyIDEA keeps as the token's
	// secret (the hex seed of OTP types; the password, registration code
	// or secret of pw, registration and indexedsecret); empty for types
	// without one (sshkey, question).
	Key Secret
	// UserPIN is user_pin decrypted (the mOTP PIN of motp).
	UserPIN Secret
	// PINHash is pin_hash as stored (an Argon2 PHC string in 3.10), kept
	// as it is so that users keep their PINs; "" for no PIN.
	PINHash string
	PINSeed string

	MaxFail, FailCount      int
	Count                   uint64
	CountWindow, SyncWindow int
	Active, Revoked, Locked bool
	RolloutState            string

	Info   []TokenInfo
	Owners []Owner
	Realms []string // the token realms, by name
}

// TokenInfo is a tokeninfo row; Value is decrypted when Type is
// "password" (and Secret is set then).
type TokenInfo struct {
	Key, Value, Type, Description string
	Secret                        bool
}

// String redacts secret values.
func (i TokenInfo) String() string {
	if i.Secret {
		return fmt.Sprintf("{%s: [redacted] %s}", i.Key, i.Type)
	}
	return fmt.Sprintf("{%s: %q %s}", i.Key, i.Value, i.Type)
}

// Owner is a tokenowner row, with the realm by name.
type Owner struct {
	Resolver, UserID, Realm string
}

// ConfigValue is a row of one of privacyIDEA's key/value config tables
// (resolverconfig, machineresolverconfig, caconnectorconfig); Value is
// decrypted when Type is "password".
type ConfigValue struct {
	Value, Type, Description string
}

// Resolver is a user store definition.
type Resolver struct {
	Name, Type string // Type as privacyIDEA names it: passwdresolver, ldapresolver, sqlresolver, scimresolver, httpresolver, ...
	Config     map[string]ConfigValue
}

// Realm is a realm with its resolvers.
type Realm struct {
	Name      string
	Default   bool
	Option    string
	Resolvers []RealmResolver
}

// RealmResolver is a resolverrealm row. HasPriority is false when the
// priority column is NULL.
type RealmResolver struct {
	Resolver    string
	Priority    int
	HasPriority bool
	Node        string // node_uuid, "" for all nodes
}

// Policy is a policy row with its conditions and description.
type Policy struct {
	Name, Scope, Action                       string
	Realm, AdminRealm, AdminUser, Resolver    string
	PINode, User, Client, Time                string
	Active, CheckAllResolvers, UserCaseInsens bool
	Priority                                  int
	Description                               string
	Conditions                                []PolicyCondition
}

// PolicyCondition is a policycondition row.
type PolicyCondition struct {
	Section, Key, Comparator, Value string
	Active                          bool
}

// ConfigEntry is a row of the config table (system settings); Value is
// decrypted when Type is "password".
type ConfigEntry struct {
	Key, Value, Type, Description string
}

// SMTPServer is an smtpserver row, Password decrypted.
type SMTPServer struct {
	Identifier, Server string
	Port               int
	Username           string
	Password           Secret
	Sender             string
	TLS                bool
	Description        string
	Timeout            int
	EnqueueJob         bool
}

// SMSGateway is an smsgateway row with its options (Type "option" or
// "header"; privacyIDEA keeps them in plain text).
type SMSGateway struct {
	Identifier, Description, ProviderModule string
	Options                                 []SMSOption
}

// SMSOption is an smsgatewayoption row.
type SMSOption struct {
	Key, Value, Type string
}

// RadiusServer is a radiusserver row, Secret decrypted.
type RadiusServer struct {
	Identifier, Server string
	Port               int
	Secret             Secret
	Dictionary         string
	Description        string
	Timeout, Retries   int
}

// MachineResolver is a machine resolver definition.
type MachineResolver struct {
	Name, Type string // hosts, ldap
	Config     map[string]ConfigValue
}

// MachineToken is a machinetoken row with its options. MachineResolver
// and MachineID are "" for an attachment to no particular machine (SSH
// keys by service ID).
type MachineToken struct {
	Serial          string
	MachineResolver string
	MachineID       string
	Application     string // ssh, offline, luks
	Options         map[string]string
}

// ServiceID is a serviceid row.
type ServiceID struct {
	Name, Description string
}

// CAConnector is a CA connector definition.
type CAConnector struct {
	Name, Type string // local, microsoft
	Config     map[string]ConfigValue
}

// UserAttribute is a customuserattribute row, with the realm by name.
type UserAttribute struct {
	UserID, Resolver, Realm, Key, Value, Type string
}

// EventHandler is an eventhandler row with its conditions and options.
type EventHandler struct {
	ID            int64
	Name          string
	Active        bool
	Ordering      int
	Position      string // pre, post
	Event         string // comma-separated event names
	HandlerModule string
	Action        string
	Conditions    []EventCondition
	Options       []EventOption
}

// EventCondition is an eventhandlercondition row.
type EventCondition struct {
	Key, Value, Comparator string
}

// EventOption is an eventhandleroption row.
type EventOption struct {
	Key, Value, Type, Description string
}

// Admin is a local administrator: PasswordHash is the PHC string of
// privacyIDEA's PI_PEPPER followed by the password.
type Admin struct {
	Username, PasswordHash, Email string
}

// Secret is a decrypted value. Its String and GoString redact it, so that
// a Snapshot printed by mistake leaks nothing.
type Secret []byte

func (s Secret) String() string   { return fmt.Sprintf("[%d bytes redacted]", len(s)) }
func (s Secret) GoString() string { return s.String() }

// Row is a line of the import's summary: one object, brought over or not,
// with the reason when not.
type Row struct {
	Kind     string // token, resolver, realm, policy, smtpserver, ...
	Name     string // serial, name or identifier
	Imported bool
	Detail   string // the type, or what was adapted
	Reason   string // why it was not imported
}

// Summary is what an import brought over and what it did not.
type Summary struct {
	Rows []Row
}

// Add records an object brought over; detail says what it is or how it
// was adapted ("" is fine).
func (s *Summary) Add(kind, name, detail string) {
	s.Rows = append(s.Rows, Row{Kind: kind, Name: name, Imported: true, Detail: detail})
}

// Skip records an object that was not brought over, with the reason.
func (s *Summary) Skip(kind, name, reason string) {
	s.Rows = append(s.Rows, Row{Kind: kind, Name: name, Reason: reason})
}
