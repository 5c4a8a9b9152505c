package main

import (
	"strconv"
	"testing"
)

// rfcKey is the RFC 4226 Appendix D test secret.
var rfcKey = []byte("12345678901234567890")

func TestHOTPRFC4226(t *testing.T) {
	want := []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}
	g := newHOTP(rfcKey, 6)
	for c, w := range want {
		t.Run("counter "+strconv.Itoa(c), func(t *testing.T) {
			if got := g.At(uint64(c)); got != w {
				t.Errorf("At(%d) = %s, want %s", c, got, w)
			}
		})
	}
}

func TestHOTPDigits(t *testing.T) {
	cases := []struct {
		name    string
		digits  int
		counter uint64
		want    string
	}{
		{"8 digits at 1", 8, 1, "94287082"},  // spec §7.1
		{"7 digits at 0", 7, 0, "4755224"},   // 1284755224 mod 10^7
		{"leading zero", 8, 7, "82162583"},   // 82162583 has 8 digits
		{"9 digits pads", 9, 7, "082162583"}, // truncated value 82162583
		{"6 digits at 2", 6, 2, "359152"},    // 137359152 mod 10^6
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := newHOTP(rfcKey, tc.digits).At(tc.counter); got != tc.want {
				t.Errorf("At(%d) = %s, want %s", tc.counter, got, tc.want)
			}
		})
	}
}

func TestWrongOTPNeverValid(t *testing.T) {
	g := newHOTP(rfcKey, 6)
	for _, counter := range []uint64{0, 1, 5, 99, 100, 101, 1000} {
		w := wrongOTP(g, counter)
		if len(w) != 6 {
			t.Fatalf("wrongOTP(%d) = %q, want 6 digits", counter, w)
		}
		from := uint64(0)
		if counter > 100 {
			from = counter - 100
		}
		for c := from; c < counter+10; c++ {
			if g.At(c) == w {
				t.Errorf("wrongOTP(%d) = %s is the valid value at counter %d", counter, w, c)
			}
		}
	}
}

func BenchmarkHOTP(b *testing.B) {
	g := newHOTP(rfcKey, 6)
	b.ReportAllocs()
	var c uint64
	for b.Loop() {
		_ = g.At(c)
		c++
	}
}
