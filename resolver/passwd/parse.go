package passwd

import (
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/resolver"
)

// entry is one user line. All strings are substrings of the file's text.
type entry struct {
	login, hash, uid, gid, gecos, home, shell string

	uidNum uint32
	// From the gecos field.
	given, surname, mobile, phone, email string
}

// info returns the user as the API shows it; the hash never leaves.
func (e *entry) info() resolver.Info {
	return resolver.Info{
		resolver.KeyUsername:    e.login,
		resolver.KeyUserID:      e.uid,
		resolver.KeyDescription: e.gecos,
		resolver.KeyGivenname:   e.given,
		resolver.KeySurname:     e.surname,
		resolver.KeyMobile:      e.mobile,
		resolver.KeyPhone:       e.phone,
		resolver.KeyEmail:       e.email,
	}
}

// ignorable reports blank and comment lines.
func ignorable(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || t[0] == '#'
}

// parseLine reads login:hash:uid:gid:gecos:home:shell. The login must be
// non-empty without blanks or control characters and not a NIS "+"/"-"
// entry; the uid must be a decimal number that fits 32 bits. A trailing
// CR is dropped.
func parseLine(line string) (entry, bool) {
	line = strings.TrimSuffix(line, "\r")
	if ignorable(line) {
		return entry{}, false
	}
	var f [7]string
	rest := line
	for i := range 6 {
		var ok bool
		if f[i], rest, ok = strings.Cut(rest, ":"); !ok {
			return entry{}, false
		}
	}
	if strings.IndexByte(rest, ':') >= 0 {
		return entry{}, false
	}
	f[6] = rest
	if !validLogin(f[0]) {
		return entry{}, false
	}
	uid, ok := parseUID(f[2])
	if !ok {
		return entry{}, false
	}
	e := entry{login: f[0], hash: f[1], uid: f[2], gid: f[3], gecos: f[4], home: f[5], shell: f[6], uidNum: uid}
	e.given, e.surname, e.mobile, e.phone, e.email = parseGecos(e.gecos)
	return e, true
}

func validLogin(s string) bool {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// parseUID accepts 1 to 10 decimal digits below 2^32.
func parseUID(s string) (uint32, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// parseGecos reads "Given Surname,room,officephone,homephone,other...":
// the given name is the first word of the first field and the surname the
// rest; mobile is the office phone and phone the home phone
// (privacyIDEA's mapping, admin-config 3.1); email is the first of the
// other fields that looks like an address.
func parseGecos(g string) (given, surname, mobile, phone, email string) {
	name, rest, _ := strings.Cut(g, ",")
	name = strings.TrimSpace(name)
	given, surname, _ = strings.Cut(name, " ")
	given, surname = strings.TrimSpace(given), strings.TrimSpace(surname)
	var field string
	for i := 1; rest != ""; i++ {
		field, rest, _ = strings.Cut(rest, ",")
		field = strings.TrimSpace(field)
		switch {
		case i == 2:
			mobile = field
		case i == 3:
			phone = field
		case i >= 4 && email == "" && looksLikeEmail(field):
			email = field
		}
	}
	return given, surname, mobile, phone, email
}

// looksLikeEmail is a shape check: one @ with text on both sides, no
// blanks or control characters, at most 254 bytes.
func looksLikeEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at == len(s)-1 || len(s) > 254 || strings.IndexByte(s[at+1:], '@') >= 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
