package apierr

import (
	"errors"
	"fmt"
)

// Error is an error with a kind from the table. Build sentinels with New and
// wrap them with fmt.Errorf("...: %w", err); the server finds the outermost
// *Error in the chain.
type Error struct {
	// Code is the kind; it selects the HTTP status and default number.
	Code Code
	// Num, when non-zero, replaces the kind's number (privacyIDEA raises
	// some errors with explicit ids, such as 1007 or 1610).
	Num int
	// Text is the message without the ERR prefix; empty means the row's
	// default text.
	Text string
	// Detail is optional extra data for the envelope's detail object.
	Detail map[string]any
	// Err is an optional cause. It is never shown to clients.
	Err error
}

// New returns an error of kind c with text msg.
func New(c Code, msg string) *Error { return &Error{Code: c, Text: msg} }

// Newf returns an error of kind c with a formatted text. A %w verb wraps
// its operand as the hidden cause.
func Newf(c Code, format string, args ...any) *Error {
	e := fmt.Errorf(format, args...)
	return &Error{Code: c, Text: e.Error(), Err: errors.Unwrap(e)}
}

// WithNumber returns a copy of e that shows number n instead of the kind's.
func (e *Error) WithNumber(n int) *Error { c := *e; c.Num = n; return &c }

// WithDetail returns a copy of e carrying detail d.
func (e *Error) WithDetail(d map[string]any) *Error { c := *e; c.Detail = d; return &c }

// Wrap returns a copy of e whose hidden cause is err.
func (e *Error) Wrap(err error) *Error { c := *e; c.Err = err; return &c }

// Error returns the message text.
func (e *Error) Error() string {
	if e.Text != "" {
		return e.Text
	}
	return Lookup(e.Code).Text
}

// Unwrap returns the hidden cause.
func (e *Error) Unwrap() error { return e.Err }

// Number is the privacyIDEA error number shown as error.code.
func (e *Error) Number() int {
	if e.Num != 0 {
		return e.Num
	}
	return Lookup(e.Code).Number
}

// Status is the HTTP status of the answer.
func (e *Error) Status() int { return Lookup(e.Code).Status }

// Message is the text shown as error.message: always "ERR<number>: <text>"
// (our divergence 1 from privacyIDEA, which leaves some classes bare).
func (e *Error) Message() string { return fmt.Sprintf("ERR%d: %s", e.Number(), e.Error()) }

// Wire is what the server sends for err: the outermost *Error's number,
// status and message. Errors without a code become the Server row with its
// generic text (internal is true: the caller logs the cause and never
// sends it).
func Wire(err error) (number, status int, message string, detail map[string]any, internal bool) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Number(), e.Status(), e.Message(), e.Detail, false
	}
	r := table[Server]
	return r.Number, r.Status, fmt.Sprintf("ERR%d: %s", r.Number, r.Text), nil, true
}

// Is reports whether err carries an *Error of kind c.
func Is(err error, c Code) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code == c
}

// Common errors shared by several packages.

// MissingParameter returns privacyIDEA's "Missing parameter: <name>" error.
func MissingParameter(name string) *Error {
	return New(Parameter, "Missing parameter: "+name)
}
