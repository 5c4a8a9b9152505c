package otp_test

import (
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/otp"
)

func onlyFrom(set string) func(string) bool {
	return func(s string) bool {
		for _, r := range s {
			if !strings.ContainsRune(set, r) {
				return false
			}
		}
		return true
	}
}

func hasEach(sets ...string) func(string) bool {
	return func(s string) bool {
		for _, set := range sets {
			if !strings.ContainsAny(s, set) {
				return false
			}
		}
		return true
	}
}

func TestGenerate(t *testing.T) {
	const cns = otp.GroupLetters + otp.GroupDigits + otp.GroupPunctuation
	tests := []struct {
		name     string
		contents string
		length   int
		checks   []func(string) bool
	}{
		{"letters", "c", 40, []func(string) bool{onlyFrom(otp.GroupLetters)}},
		{"digits", "n", 40, []func(string) bool{onlyFrom(otp.GroupDigits)}},
		{"punctuation", "s", 40, []func(string) bool{onlyFrom(otp.GroupPunctuation)}},
		{"base58 (lost token)", "8", 200, []func(string) bool{onlyFrom(otp.GroupBase58), func(s string) bool { return !strings.ContainsAny(s, "0OIl") }}},
		{"default is cn", "", 40, []func(string) bool{onlyFrom(otp.GroupLetters + otp.GroupDigits)}},
		{"union", "cn", 40, []func(string) bool{onlyFrom(otp.GroupLetters + otp.GroupDigits)}},
		{"plus: each group present", "+cns", 3, []func(string) bool{onlyFrom(cns), hasEach(otp.GroupLetters, otp.GroupDigits, otp.GroupPunctuation)}},
		{"plus: longer", "+cn", 12, []func(string) bool{onlyFrom(otp.GroupLetters + otp.GroupDigits), hasEach(otp.GroupLetters, otp.GroupDigits)}},
		{"minus s", "-s", 200, []func(string) bool{onlyFrom(otp.GroupLetters + otp.GroupDigits)}},
		{"minus cn", "-cn", 200, []func(string) bool{onlyFrom(otp.GroupPunctuation)}},
		{"exact alphabet", "[abc]", 60, []func(string) bool{onlyFrom("abc"), hasEach("a", "b", "c")}},
		{"exact single character", "[x]", 5, []func(string) bool{func(s string) bool { return s == "xxxxx" }}},
		{"exact alphabet, unicode", "[äöü]", 30, []func(string) bool{onlyFrom("äöü")}},
		{"plus with explicit set", "+n[#!]", 2, []func(string) bool{hasEach(otp.GroupDigits, "#!")}},
		{"minus explicit characters", "-[abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ]s", 40, []func(string) bool{onlyFrom(otp.GroupDigits)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 50 {
				s, err := otp.Generate(tc.length, tc.contents, seeded(uint64(i)))
				if err != nil {
					t.Fatal(err)
				}
				if n := utf8.RuneCountInString(s); n != tc.length {
					t.Fatalf("Generate = %q has %d characters, want %d", s, n, tc.length)
				}
				for j, check := range tc.checks {
					if !check(s) {
						t.Fatalf("Generate = %q fails check %d", s, j)
					}
				}
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name     string
		contents string
		length   int
		rnd      io.Reader
		want     error
	}{
		{"unknown code", "cx", 8, nil, otp.ErrContents},
		{"unclosed bracket", "[abc", 8, nil, otp.ErrContents},
		{"empty bracket", "[]", 8, nil, otp.ErrContents},
		{"plus alone", "+", 8, nil, otp.ErrContents},
		{"minus alone", "-", 8, nil, otp.ErrContents},
		{"minus base58", "-8", 8, nil, otp.ErrContents},
		{"minus everything", "-cns", 8, nil, otp.ErrContents},
		{"minus every character", "-cs[0123456789]", 8, nil, otp.ErrContents},
		{"prefix twice", "++c", 8, nil, otp.ErrContents},
		{"invalid utf-8", "[\xff]", 8, nil, otp.ErrContents},
		{"zero length", "cn", 0, nil, otp.ErrContents},
		{"negative length", "cn", -1, nil, otp.ErrContents},
		{"too long", "cn", otp.MaxGenerateLength + 1, nil, otp.ErrContents},
		{"shorter than required groups", "+cns", 2, nil, otp.ErrContents},
		{"failing reader", "cn", 8, brokenReader{}, otp.ErrRandom},
		{"reader that is always rejected", "[abc]", 8, constReader(0xff), otp.ErrRandom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := otp.Generate(tc.length, tc.contents, tc.rnd)
			if !errors.Is(err, tc.want) || s != "" {
				t.Errorf("Generate = %q, %v; want error %v", s, err, tc.want)
			}
		})
	}
}

func TestGenerateNoModuloBias(t *testing.T) {
	// Bytes 0…255 once each: with 3 characters, 255 is rejected and every
	// character gets exactly 85 of the remaining 255 values. Plain modulo
	// would give 'a' one more.
	s, err := otp.Generate(255, "[abc]", &cycleReader{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range "abc" {
		if n := strings.Count(s, string(c)); n != 85 {
			t.Errorf("%c appears %d times, want 85", c, n)
		}
	}
}

func TestGenerateUniformity(t *testing.T) {
	// Smoke test with crypto/rand: 62 characters, 62 000 draws, each count
	// within ±25 % of 1000 (about 8 standard deviations).
	const n = 62_000
	var b strings.Builder
	for b.Len() < n {
		s, err := otp.Generate(min(otp.MaxGenerateLength, n-b.Len()), "cn", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s)
	}
	counts := map[rune]int{}
	for _, r := range b.String() {
		counts[r]++
	}
	if len(counts) != 62 {
		t.Fatalf("%d distinct characters, want 62", len(counts))
	}
	for r, c := range counts {
		if c < 750 || c > 1250 {
			t.Errorf("%c appears %d times, want about 1000", r, c)
		}
	}
}

func TestSerial(t *testing.T) {
	re := regexp.MustCompile(`^[A-Z]+[0-9]{4,}[0-9A-F]{4}$`)
	tests := []struct {
		name     string
		prefix   string
		existing int
		rnd      io.Reader
		want     string
	}{
		{"spec example", "OATH", 1, strings.NewReader("\xa1\xb2"), "OATH0001A1B2"},
		{"totp", "TOTP", 3, strings.NewReader("\xa7\xf2"), "TOTP0003A7F2"},
		{"zero", "PISP", 0, strings.NewReader("\x00\x0f"), "PISP0000000F"},
		{"more than 4 digits", "OATH", 12345, strings.NewReader("\xff\xff"), "OATH12345FFFF"},
		{"negative count", "OATH", -5, strings.NewReader("\x00\x00"), "OATH00000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := otp.Serial(tc.prefix, tc.existing, tc.rnd)
			if err != nil || got != tc.want {
				t.Errorf("Serial = %q, %v; want %q", got, err, tc.want)
			}
			if !re.MatchString(got) {
				t.Errorf("Serial = %q does not match %s", got, re)
			}
		})
	}
	t.Run("crypto/rand", func(t *testing.T) {
		got, err := otp.Serial("OATH", 42, nil)
		if err != nil || !regexp.MustCompile(`^OATH0042[0-9A-F]{4}$`).MatchString(got) {
			t.Errorf("Serial = %q, %v", got, err)
		}
	})
	t.Run("short reader", func(t *testing.T) {
		if _, err := otp.Serial("OATH", 1, strings.NewReader("\x01")); !errors.Is(err, otp.ErrRandom) {
			t.Errorf("Serial error = %v, want ErrRandom", err)
		}
	})
}
