// Package apierr is the one table of error kinds: each Code maps to its
// privacyIDEA error number, HTTP status and default text. No other file
// writes those numbers. Subsystems build their sentinel errors on it; the
// server maps any error to the wire through Wire.
//
// Package apierr imports nothing of authsrv.
package apierr

import "net/http"

// Code is an error kind.
type Code int

// The error kinds. The comment after each gives its privacyIDEA number.
const (
	// Server is the fallback for errors without a code (903).
	Server Code = iota
	// Generic is privacyIDEA's base error (10).
	Generic
	// Parameter is a missing or malformed parameter (905).
	Parameter
	// User is an unknown or ambiguous user (904).
	User
	// UserParameter is a missing user parameter (9051).
	UserParameter
	// ResourceNotFound is a missing object (601).
	ResourceNotFound
	// Policy is a request denied by policy (303).
	Policy
	// Auth is a generic authentication failure (403, HTTP 401).
	Auth
	// AuthWrongCredentials: wrong user name or password at /auth (4031).
	AuthWrongCredentials
	// AuthMissingUsername: /auth without a user name (4032).
	AuthMissingUsername
	// AuthMissingHeader: no Authorization header (4033).
	AuthMissingHeader
	// AuthDecoding: the JWT does not decode or verify (4304).
	AuthDecoding
	// AuthExpired: the JWT has expired (4305).
	AuthExpired
	// AuthMissingRight: the caller's role may not use the endpoint (4306).
	AuthMissingRight
	// AuthIllegalMethod: a disabled login method (4307).
	AuthIllegalMethod
	// TokenAdmin is a token management error (301).
	TokenAdmin
	// ConfigAdmin is a configuration error (302).
	ConfigAdmin
	// TokenImport is a token import error (304).
	TokenImport
	// Validate is an authentication-flow error (401).
	Validate
	// Registration is a registration error (402).
	Registration
	// Enrollment is an enrollment error (404).
	Enrollment
	// Subscription is a subscription error (101).
	Subscription
	// CA is a CA connector error (503).
	CA
	// Database is a store error (902).
	Database
	// Resolver is a user store error (907).
	Resolver
	// RealmAttributes: a realm with custom attributes cannot be deleted (908).
	RealmAttributes
	// Selfservice is a self-service error (807).
	Selfservice
	// Busy: the server is overloaded (for example the KDF queue is full).
	Busy
	// Method: the path exists but not for this HTTP method.
	Method
	// StoreWrite: the store refuses writes (the disk is full, the file at
	// its size limit, the file system read-only or failing), so the change
	// was not made (privacyIDEA's DatabaseError number, 902). The status is
	// 503, not 507: the condition is the server's and temporary, not the
	// request's; readiness reports the same 503 while it lasts; and clients
	// and proxies retry a 503 where they know nothing of WebDAV's 507.
	StoreWrite
)

// Row is one line of the table.
type Row struct {
	// Number is privacyIDEA's error number shown as error.code.
	Number int
	// Status is the HTTP status of the answer.
	Status int
	// Text is the default message text (without the ERR prefix).
	Text string
}

var table = map[Code]Row{
	Server:               {903, http.StatusInternalServerError, "Internal server error."},
	Generic:              {10, http.StatusBadRequest, "Error."},
	Parameter:            {905, http.StatusBadRequest, "Parameter error."},
	User:                 {904, http.StatusBadRequest, "User error."},
	UserParameter:        {9051, http.StatusBadRequest, "Missing parameter: user."},
	ResourceNotFound:     {601, http.StatusNotFound, "The requested resource could not be found."},
	Policy:               {303, http.StatusForbidden, "Denied by policy."},
	Auth:                 {403, http.StatusUnauthorized, "Authentication failed."},
	AuthWrongCredentials: {4031, http.StatusUnauthorized, "Authentication failure. Wrong credentials"},
	AuthMissingUsername:  {4032, http.StatusUnauthorized, "Authentication failure. Missing Username"},
	AuthMissingHeader:    {4033, http.StatusUnauthorized, "Authentication failure. Missing Authorization header."},
	AuthDecoding:         {4304, http.StatusUnauthorized, "Authentication failure. Error decoding the Authorization token."},
	AuthExpired:          {4305, http.StatusUnauthorized, "Authentication failure. Your token has expired."},
	AuthMissingRight:     {4306, http.StatusUnauthorized, "Authentication failure. You do not have the necessary role to access this resource!"},
	AuthIllegalMethod:    {4307, http.StatusUnauthorized, "Authentication with this method is disabled."},
	TokenAdmin:           {301, http.StatusBadRequest, "Token administration error."},
	ConfigAdmin:          {302, http.StatusBadRequest, "Configuration error."},
	TokenImport:          {304, http.StatusBadRequest, "Token import error."},
	Validate:             {401, http.StatusBadRequest, "Validation error."},
	Registration:         {402, http.StatusBadRequest, "Registration error."},
	Enrollment:           {404, http.StatusBadRequest, "Enrollment error."},
	Subscription:         {101, http.StatusBadRequest, "Subscription error."},
	CA:                   {503, http.StatusBadRequest, "CA error."},
	Database:             {902, http.StatusInternalServerError, "Database error."},
	Resolver:             {907, http.StatusBadRequest, "Resolver error."},
	RealmAttributes:      {908, http.StatusBadRequest, "The realm has custom user attributes."},
	Selfservice:          {807, http.StatusBadRequest, "Self-service error."},
	Busy:                 {903, http.StatusServiceUnavailable, "The server is busy, please try again later."},
	Method:               {905, http.StatusMethodNotAllowed, "The method is not allowed for this path."},
	StoreWrite:           {902, http.StatusServiceUnavailable, "The server cannot store changes: the data directory has no space left."},
}

// Lookup returns the row of a code. An unknown code gives the Server row.
func Lookup(c Code) Row {
	if r, ok := table[c]; ok {
		return r
	}
	return table[Server]
}

// Codes lists every code of the table (for tests that walk it).
func Codes() []Code {
	out := make([]Code, 0, len(table))
	for c := Server; c <= StoreWrite; c++ {
		out = append(out, c)
	}
	return out
}
