package token

import (
	"context"
	"strconv"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

// Paper is the paper token (prefix PPR): an HOTP token whose next values
// are printed once at enrollment, then checked like HOTP.
type Paper struct{}

var (
	_ Type     = Paper{}
	_ Resyncer = Paper{}
)

const (
	defaultPaperCount = 100
	maxPaperCount     = 1000
)

// Name implements Type.
func (Paper) Name() string { return "paper" }

// Prefix implements Type.
func (Paper) Prefix() string { return "PPR" }

// Enroll implements Type: as HOTP (otpkey or genkey, otplen, hashlib; no
// 2-step enrollment, whose key is unknown when the list is printed) plus
// "otps", the values for counters 0 … papertoken_count-1 (100, at most
// 1000) keyed by their decimal index.
func (Paper) Enroll(ctx context.Context, e *Enroll) error {
	n, err := intParam(e.Params, "papertoken_count", defaultPaperCount, 1, maxPaperCount)
	if err != nil {
		return err
	}
	if e.Params.Bool("2stepinit") {
		return paramErr("2stepinit is not possible for paper tokens")
	}
	if err := enrollOATH(e, "paper", 0); err != nil {
		return err
	}
	e.Detail["otps"] = hotpList(e.Key, n, e.Token.OTPLen, e.Token.Hash())
	return nil
}

// hotpList returns the HOTP values of counters 0 … n-1, keyed by the
// decimal counter.
func hotpList(key []byte, n, digits int, h otp.Hash) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[strconv.Itoa(i)] = otp.HOTP(key, uint64(i), digits, h)
	}
	return out
}

// Check implements Type: as HOTP.
func (Paper) Check(ctx context.Context, c *Check) (Match, error) { return HOTP{}.Check(ctx, c) }

// Resync implements Resyncer: as HOTP.
func (Paper) Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error) {
	return HOTP{}.Resync(ctx, s, t, otp1, otp2, now)
}
