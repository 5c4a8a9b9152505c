package otp

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Character groups of privacyIDEA's contents codes.
const (
	GroupLetters     = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"       // c
	GroupDigits      = "0123456789"                                                 // n
	GroupPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"                         // s (Python string.punctuation)
	GroupBase58      = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz" // 8 (Bitcoin alphabet)
)

// MaxGenerateLength bounds Generate, so a bad policy can't ask for megabytes.
const MaxGenerateLength = 4096

// DefaultContents is used by Generate for an empty contents code: letters and
// digits, the default of privacyIDEA's pw.contents and registration.contents.
const DefaultContents = "cn"

// Errors of Generate and Serial.
var (
	// ErrContents is returned for a malformed contents code or a length that
	// the code can't satisfy.
	ErrContents = errors.New("otp: invalid contents")
	// ErrRandom is returned when the random source fails or keeps returning
	// values that rejection sampling discards.
	ErrRandom = errors.New("otp: random source")
)

// charset is a parsed contents code.
type charset struct {
	alphabet []rune   // every allowed character, without duplicates
	required [][]rune // with '+': groups that each need one character
}

// parseContents parses [+|-] followed by group codes c, n, s, 8 and [xyz]
// (an explicit set, no escapes; it may not contain ']').
//
//   - no prefix: the union of the groups;
//   - '+': the union, with at least one character of each group;
//   - '-': c, n and s minus the listed groups or characters (8 not allowed).
func parseContents(s string) (charset, error) {
	if s == "" {
		s = DefaultContents
	}
	mode := s[0]
	if mode == '+' || mode == '-' {
		s = s[1:]
	} else {
		mode = 0
	}
	if s == "" {
		return charset{}, fmt.Errorf("%w: no group after %q", ErrContents, string(mode))
	}
	var groups [][]rune
	for s != "" {
		var g string
		switch s[0] {
		case 'c':
			g, s = GroupLetters, s[1:]
		case 'n':
			g, s = GroupDigits, s[1:]
		case 's':
			g, s = GroupPunctuation, s[1:]
		case '8':
			if mode == '-' {
				return charset{}, fmt.Errorf("%w: '-' excludes only c, n, s or [...]", ErrContents)
			}
			g, s = GroupBase58, s[1:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return charset{}, fmt.Errorf("%w: unclosed '['", ErrContents)
			}
			if end == 1 {
				return charset{}, fmt.Errorf("%w: empty '[]'", ErrContents)
			}
			g, s = s[1:end], s[end+1:]
			if !utf8.ValidString(g) {
				return charset{}, fmt.Errorf("%w: invalid UTF-8 in '[...]'", ErrContents)
			}
		default:
			r, _ := utf8.DecodeRuneInString(s)
			return charset{}, fmt.Errorf("%w: unknown code %q", ErrContents, r)
		}
		groups = append(groups, dedup([]rune(g)))
	}
	if mode == '-' {
		excluded := dedup(slices.Concat(groups...))
		var alphabet []rune
		for _, r := range GroupLetters + GroupDigits + GroupPunctuation {
			if !slices.Contains(excluded, r) {
				alphabet = append(alphabet, r)
			}
		}
		if len(alphabet) == 0 {
			return charset{}, fmt.Errorf("%w: every character excluded", ErrContents)
		}
		return charset{alphabet: alphabet}, nil
	}
	cs := charset{alphabet: dedup(slices.Concat(groups...))}
	if mode == '+' {
		cs.required = groups
	}
	return cs, nil
}

func dedup(rs []rune) []rune {
	out := make([]rune, 0, len(rs))
	seen := make(map[rune]bool, len(rs))
	for _, r := range rs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// Generate returns length random characters chosen by a privacyIDEA contents
// code: "c" letters, "n" digits, "s" punctuation, "8" base58 (lost-token
// passwords), "[abc]" exactly these characters; a leading "+" requires at
// least one character of each listed group, a leading "-" takes c, n and s
// minus the listed groups. Groups combine ("+cn", "-s", "c[#!]"); "" means
// DefaultContents. Each character is drawn uniformly by rejection sampling.
// With "+", one character of each group is placed first and the result is
// shuffled. length counts characters (runes). A nil rnd means crypto/rand.
func Generate(length int, contents string, rnd io.Reader) (string, error) {
	cs, err := parseContents(contents)
	if err != nil {
		return "", err
	}
	if length < 1 || length > MaxGenerateLength {
		return "", fmt.Errorf("%w: length %d (want 1..%d)", ErrContents, length, MaxGenerateLength)
	}
	if len(cs.required) > length {
		return "", fmt.Errorf("%w: length %d is shorter than the %d required groups", ErrContents, length, len(cs.required))
	}
	s := newSampler(rnd)
	out := make([]rune, length)
	for i := range out {
		set := cs.alphabet
		if i < len(cs.required) {
			set = cs.required[i]
		}
		j, err := s.intn(len(set))
		if err != nil {
			return "", err
		}
		out[i] = set[j]
	}
	if len(cs.required) > 0 {
		for i := len(out) - 1; i > 0; i-- { // Fisher–Yates
			j, err := s.intn(i + 1)
			if err != nil {
				return "", err
			}
			out[i], out[j] = out[j], out[i]
		}
	}
	return string(out), nil
}

// sampler draws uniform integers from a byte stream by rejection sampling,
// so no value is favoured by a modulo.
type sampler struct {
	r   *bufio.Reader
	buf [4]byte
}

// maxRejects bounds the draws for one value; with a working source the
// chance of reaching it is below 2^-100.
const maxRejects = 100

func newSampler(rnd io.Reader) *sampler {
	if rnd == nil {
		rnd = rand.Reader
	}
	return &sampler{r: bufio.NewReaderSize(rnd, 64)}
}

// intn returns a uniform value in [0, n) for n >= 1.
func (s *sampler) intn(n int) (int, error) {
	if n <= 1 {
		return 0, nil
	}
	size, space := 1, uint64(1<<8)
	if n > 1<<8 {
		size, space = 4, 1<<32
	}
	limit := space - space%uint64(n) // values >= limit would bias the modulo
	for range maxRejects {
		if _, err := io.ReadFull(s.r, s.buf[:size]); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrRandom, err)
		}
		v := uint64(s.buf[0])
		if size == 4 {
			v = uint64(binary.BigEndian.Uint32(s.buf[:]))
		}
		if v < limit {
			return int(v % uint64(n)), nil
		}
	}
	return 0, fmt.Errorf("%w: too many rejected values", ErrRandom)
}

// Serial returns a new token serial as privacyIDEA makes it: prefix, the
// count of existing tokens of the type as at least 4 digits, and 4 random
// upper-case hex digits (e.g. "OATH0001A1B2"). A nil rnd means crypto/rand.
func Serial(prefix string, existing int, rnd io.Reader) (string, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [2]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRandom, err)
	}
	return fmt.Sprintf("%s%04d%04X", prefix, max(existing, 0), binary.BigEndian.Uint16(b[:])), nil
}
