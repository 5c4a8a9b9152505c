package tokenfile

import (
	"encoding/hex"
	"io"
	"strconv"
	"strings"
)

// Yubikey geometry: an OTP is the public ID followed by 32 modhex
// characters; the AES key is 16 bytes, the private ID 6 bytes, an OATH-HOTP
// key 20 bytes.
const (
	yubicoOTPChars   = 32
	yubicoMaxPublic  = 32 // modhex characters (16 bytes)
	yubicoKeyLen     = 16
	yubicoPrivateLen = 6
	yubikeyOATHKey   = 20
)

const modhexAlphabet = "cbdefghijklnrtuv"

// ParseYubikeyCSV reads privacyIDEA's "yubikeycsv" import format, so that a
// batch of Yubikeys programmed with Yubico's tools can be enrolled in one go.
// Every record gets Info["tokenkind"] = "hardware". Two kinds of line are
// accepted, and may be mixed:
//
// The log of the Yubico personalization tool, first column the mode:
//
//	Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0,0,...
//	OATH-HOTP,12/11/2013 11:10,1,cccccccccccb,,fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd,,,0,0,...
//
// A "Yubico OTP" line (columns: mode, time, slot, public ID, private ID,
// AES key, ...) becomes a "yubikey" record with serial "UBAM" + the public
// ID in lower-case modhex, the 16-byte AES key, OTPLen 32 + the public ID's
// length, and Info "yubikey.prefix" (the public ID) and "yubikey.uid" (the
// private ID in hex). An "OATH-HOTP" line becomes an "hotp" record with
// serial "UBOM" + the fourth column, the 20-byte key and OTPLen 6. When the
// fourth column is empty, the line number stands in for it. "LOGGING START"
// lines are skipped; the static password and challenge-response modes are
// reported as Failures.
//
// The yubikey-ksm key file, first column the decimal serial number
// printed on the key:
//
//	4711,dlcfffckrcde,ca62baca62ba,ecde18dbe76fbd0c33330f1c354871db,be70aeca62ba,2009-01-22 00:25:11,
//
// (serial number, public ID, private ID, AES key, ...) becomes a "yubikey"
// record like a Yubico OTP line, but with serial "UBAM" + the serial number.
//
// Empty lines and lines starting with '#' are skipped.
func ParseYubikeyCSV(r io.Reader, lim Limits) ([]Record, []Failure, error) {
	return parseCSV(r, lim, yubikeyLine)
}

func yubikeyLine(f []string, line int) csvEntry {
	mode := lowerTrim(f[0])
	switch {
	case mode == "logging start":
		return csvEntry{skip: true}
	case mode == "yubico otp":
		serial := "UBAM" + strings.ToLower(field(f, 3))
		if field(f, 3) == "" {
			serial = "UBAM" + strconv.Itoa(line)
		}
		return yubicoOTP(serial, field(f, 3), field(f, 4), field(f, 5))
	case mode == "oath-hotp":
		id := field(f, 3)
		if id == "" {
			id = strconv.Itoa(line)
		}
		return yubikeyOATH("UBOM"+id, field(f, 5))
	case strings.HasPrefix(mode, "static password"):
		return csvEntry{reason: "static password mode is not supported"}
	case strings.HasPrefix(mode, "challenge-response"):
		return csvEntry{reason: "challenge-response mode is not supported"}
	case isDecimal(mode):
		return yubicoOTP("UBAM"+mode, field(f, 1), field(f, 2), field(f, 3))
	}
	return csvEntry{reason: "unknown Yubikey mode in the first column (want Yubico OTP, OATH-HOTP or a serial number)"}
}

func yubicoOTP(serial, public, private, aesKey string) csvEntry {
	if !validSerial(serial) {
		return csvEntry{reason: badSerial}
	}
	fail := func(reason string) csvEntry {
		return csvEntry{rec: Record{Serial: serial}, reason: reason}
	}
	public = strings.ToLower(public)
	if !isModhex(public) || len(public) > yubicoMaxPublic {
		return fail("public ID must be modhex of at most 16 bytes")
	}
	key, reason := hexKey(aesKey, "AES key")
	if reason != "" {
		return fail(reason)
	}
	if len(key) != yubicoKeyLen {
		return fail("AES key must be 16 bytes")
	}
	info := map[string]string{"tokenkind": "hardware"}
	if public != "" {
		info["yubikey.prefix"] = public
	}
	if private != "" {
		uid, err := hex.DecodeString(private)
		if err != nil || len(uid) != yubicoPrivateLen {
			return fail("private ID must be 6 bytes of hex")
		}
		info["yubikey.uid"] = hex.EncodeToString(uid)
	}
	return csvEntry{rec: Record{
		Serial: serial,
		Type:   "yubikey",
		Key:    key,
		OTPLen: yubicoOTPChars + len(public),
		Info:   info,
	}}
}

func yubikeyOATH(serial, hexKeyField string) csvEntry {
	if !validSerial(serial) {
		return csvEntry{reason: badSerial}
	}
	key, reason := hexKey(hexKeyField, "key")
	if reason == "" && len(key) != yubikeyOATHKey {
		reason = "OATH-HOTP key must be 20 bytes"
	}
	if reason != "" {
		return csvEntry{rec: Record{Serial: serial}, reason: reason}
	}
	return csvEntry{rec: Record{
		Serial: serial,
		Type:   "hotp",
		Key:    key,
		OTPLen: 6,
		Info:   map[string]string{"tokenkind": "hardware"},
	}}
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isModhex reports whether s is lower-case modhex of whole bytes.
func isModhex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(modhexAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}
