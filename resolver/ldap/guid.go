package ldap

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// guidString renders an Active Directory objectGUID as the standard GUID
// text: the first three groups are little-endian in the binary form.
// Values that are not 16 bytes are taken as text, braces stripped.
func guidString(raw []byte) string {
	if len(raw) != 16 {
		return strings.Trim(string(raw), "{}")
	}
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(raw[0:4]),
		binary.LittleEndian.Uint16(raw[4:6]),
		binary.LittleEndian.Uint16(raw[6:8]),
		raw[8:10], raw[10:16])
}

// guidBytes is the inverse of guidString: the 16 bytes of a GUID text
// (with or without braces), or false.
func guidBytes(s string) ([]byte, bool) {
	s = strings.Trim(s, "{}")
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return nil, false
	}
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return nil, false
	}
	out := make([]byte, 16)
	binary.LittleEndian.PutUint32(out[0:4], binary.BigEndian.Uint32(b[0:4]))
	binary.LittleEndian.PutUint16(out[4:6], binary.BigEndian.Uint16(b[4:6]))
	binary.LittleEndian.PutUint16(out[6:8], binary.BigEndian.Uint16(b[6:8]))
	copy(out[8:], b[8:])
	return out, true
}

// sshaHash returns the {SSHA} userPassword value of password (salted
// SHA-1 with an 8-byte random salt), the form privacyIDEA writes and
// every LDAP server verifies.
func sshaHash(password string) (string, error) {
	salt := make([]byte, 8)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	h := sha1.Sum(append([]byte(password), salt...))
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h[:], salt...)), nil
}
