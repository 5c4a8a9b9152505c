package token

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

// HOTP is the RFC 4226 event-based token (prefix OATH).
type HOTP struct{}

// Name implements Type.
func (HOTP) Name() string { return "hotp" }

// Prefix implements Type.
func (HOTP) Prefix() string { return "OATH" }

// Resyncer is implemented by types whose counter can be resynchronised
// with two consecutive OTP values (/token/resync).
type Resyncer interface {
	// Resync looks for otp1 and otp2 as consecutive values and returns the
	// change to commit (nil, false when they do not match).
	Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error)
}

// Hash returns the token's hash algorithm (tokeninfo hashlib, SHA-1 when
// missing).
func (t *Token) Hash() otp.Hash { return otp.HashOrSHA1(t.Info[InfoHashlib]) }

// Enroll implements Type: otpkey (hex or base32check) or genkey, otplen,
// hashlib, 2-step enrollment.
func (h HOTP) Enroll(ctx context.Context, e *Enroll) error {
	return enrollOATH(e, "hotp", 0)
}

// keyFromParams reads otpkey/genkey as privacyIDEA's HOTP does: genkey wins
// over otpkey, and neither generates a key (keysize or the hash's size).
func keyFromParams(e *Enroll, genkeyWins bool) ([]byte, bool, error) {
	p := e.Params
	key, hasKey := p.Get("otpkey")
	gen := p.Bool("genkey")
	if hasKey && key != "" && gen && !genkeyWins {
		return nil, false, ErrGenkeyAndOtpkey
	}
	if hasKey && key != "" && !gen {
		k, err := otp.ParseKey(strings.TrimSpace(key), p.Str("otpkeyformat"))
		if err != nil {
			return nil, false, paramErr("The otpkey is not valid: it must be %s", keyFormatName(p.Str("otpkeyformat")))
		}
		if len(k) > 256 {
			return nil, false, paramErr("The otpkey is too long")
		}
		return k, false, nil
	}
	size := otp.DefaultKeySize(e.Token.Hash())
	if v := p.Str("keysize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 || n > 128 {
			return nil, false, paramErr("keysize must be a number from 10 to 128")
		}
		size = n
	}
	k, err := e.Service.RandomBytes(size)
	return k, true, err
}

func keyFormatName(f string) string {
	if strings.EqualFold(f, otp.KeyFormatBase32Check) {
		return "base32check"
	}
	return "hex"
}

// enrollOATH is the enrollment shared by the HOTP family (hotp, totp and
// the types that inherit HOTP's init detail).
func enrollOATH(e *Enroll, typ string, period int) error {
	t, p := e.Token, e.Params
	// Second step of a 2-step enrollment: the client part arrives.
	if !e.New && t.RolloutState == StateClientWait && p.Has("otpkey") {
		return finish2Step(e)
	}
	if t.Info[InfoHashlib] == "" {
		t.SetInfo(InfoHashlib, string(e.Service.defaultHash(typ)))
	}
	if err := otp.ValidateDigits(t.OTPLen); err != nil {
		return paramErr("otplen must be a number from %d to %d", otp.MinDigits, otp.MaxDigits)
	}
	key, _, err := keyFromParams(e, true)
	if err != nil {
		return err
	}
	if p.Bool("2stepinit") {
		return start2Step(e, key, typ, period)
	}
	e.Key = key
	e.Detail["otpkey"] = e.keyDetail(key, true)
	return addURLs(e, key, typ, period)
}

// defaultHash is the hash of a new token of the HOTP family typ enrolled
// without hashlib: the system setting totp.hashlib for the time-based
// types (totp, daypassword), hotp.hashlib for the others, as
// privacyIDEA's token classes inherit it; SHA-1 when it is unset or not a
// hash we know.
func (s *Service) defaultHash(typ string) otp.Hash {
	set := s.settings()
	v := set.HOTPHashlib
	if typ == "totp" || typ == "daypassword" {
		v = set.TOTPHashlib
	}
	if h, err := otp.ParseHash(v); err == nil && v != "" {
		return h
	}
	return otp.SHA1
}

// keyDetail is the otpkey detail object.
func (e *Enroll) keyDetail(key []byte, b32 bool) map[string]any {
	h := hex.EncodeToString(key)
	d := map[string]any{"description": "OTP seed", "value": "seed://" + h}
	e.addImage("otpkey", d, "seed://"+h)
	if b32 {
		d["value_b32"] = otp.FormatBase32(key)
	}
	return d
}

// addImage asks for d's "img", the QR code of s, unless the caller has no
// use for the image of the detail entry name (otpkey, googleurl, oathurl).
// Init draws it after the token is committed: not inside the store
// transaction (which may run more than once), and not at all for an
// enrollment that fails.
func (e *Enroll) addImage(name string, d map[string]any, s string) {
	if e.NoImages || (e.imagesOf != nil && !slices.Contains(e.imagesOf, name)) {
		return
	}
	e.images = append(e.images, pendingImage{d, s})
}

// drawQR draws one image (tests count the calls).
var drawQR = otp.QRDataURI

// pendingImage is a QR code to draw: content into into["img"].
type pendingImage struct {
	into    map[string]any
	content string
}

// drawImages draws each image once. Content too long for a QR code gets
// no image (the detail keeps its value).
func drawImages(imgs []pendingImage) {
	for _, im := range imgs {
		if img, err := drawQR(im.content); err == nil {
			im.into["img"] = img
		}
	}
}

// Label substitutes the tokenlabel/tokenissuer templates: legacy <s> <u>
// <r>, then {serial} {user} {realm} {givenname} {surname}.
func (e *Enroll) Label(tmpl string) string {
	login, realm := "", ""
	if e.Owner != nil {
		login, realm = e.Owner.Login, e.Owner.Realm
	}
	r := strings.NewReplacer("<s>", e.Token.Serial, "<u>", login, "<r>", realm,
		"{serial}", e.Token.Serial, "{user}", login, "{realm}", realm,
		"{givenname}", e.OwnerInfo["givenname"], "{surname}", e.OwnerInfo["surname"])
	return r.Replace(tmpl)
}

// DefaultIssuer is the issuer of the otpauth URL (the name an
// authenticator app shows above the code) when neither the tokenissuer
// parameter nor the tokenissuer enrollment policy gives one.
const DefaultIssuer = "authsrv"

// addURLs adds googleurl and oathurl to the detail.
func addURLs(e *Enroll, key []byte, typ string, period int) error {
	p := e.Params
	label := p.Str("tokenlabel")
	if label == "" {
		label = "<s>"
	}
	issuer := p.Str("tokenissuer")
	if issuer == "" {
		issuer = DefaultIssuer
	}
	// The token's length: the otplen parameter or DefaultOtpLen.
	up := otp.URLParams{Type: typ, Label: e.Label(label), Issuer: e.Label(issuer), Serial: e.Token.Serial,
		Key: key, Digits: e.Token.OTPLen, Hash: e.Token.Hash(), Period: period}
	for _, k := range []string{"2step_salt", "2step_output", "2step_difficulty"} {
		if v, ok := e.Detail[k]; ok {
			up.Extras = append(up.Extras, otp.Param{Name: k, Value: toString(v)})
		}
	}
	if v := p.Str("appimageurl"); v != "" {
		up.Extras = append(up.Extras, otp.Param{Name: "image", Value: v})
	}
	if p.Bool("force_app_pin") {
		up.Extras = append(up.Extras, otp.Param{Name: "pin", Value: "True"})
	}
	gu := otp.OtpauthURL(up)
	g := map[string]any{"description": "URL for google Authenticator", "value": gu}
	e.addImage("googleurl", g, gu)
	e.Detail["googleurl"] = g
	ou := otp.OathURL(e.Label(label), key, typ == "totp")
	o := map[string]any{"description": "URL for OATH token", "value": ou}
	e.addImage("oathurl", o, ou)
	e.Detail["oathurl"] = o
	return nil
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

const (
	twoStepServerKey = "2step_serverkey"
	default2StepDiff = 10000
	default2StepCli  = 8
)

func start2Step(e *Enroll, serverKey []byte, typ string, period int) error {
	p := e.Params
	clientSize, difficulty := default2StepCli, default2StepDiff
	if v := p.Str("2step_clientsize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 || n > 64 {
			return paramErr("2step_clientsize must be a number from 4 to 64")
		}
		clientSize = n
	}
	if v := p.Str("2step_difficulty"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 || n > 1000000 {
			return paramErr("2step_difficulty must be a number from 1000 to 1000000")
		}
		difficulty = n
	}
	if v := p.Str("2step_serversize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 || n > 128 {
			return paramErr("2step_serversize must be a number from 10 to 128")
		}
		k, err := e.Service.RandomBytes(n)
		if err != nil {
			return err
		}
		serverKey = k
	}
	t := e.Token
	t.RolloutState = StateClientWait
	t.Active = false
	t.SetInfo("2step_clientsize", strconv.Itoa(clientSize))
	t.SetInfo("2step_difficulty", strconv.Itoa(difficulty))
	e.SetSecret(twoStepServerKey, serverKey)
	e.Key = serverKey
	e.Detail["otpkey"] = e.keyDetail(serverKey, true)
	e.Detail["2step_salt"] = clientSize
	e.Detail["2step_output"] = otp.DefaultKeySize(t.Hash())
	e.Detail["2step_difficulty"] = difficulty
	return addURLs(e, serverKey, typ, period)
}

func finish2Step(e *Enroll) error {
	t := e.Token
	client, err := hex.DecodeString(strings.TrimSpace(e.Params.Str("otpkey")))
	if err != nil {
		return paramErr("The client part of the 2-step key must be hex")
	}
	if len(client) != t.InfoInt("2step_clientsize", default2StepCli) {
		return paramErr("The client part of the 2-step key must have %d bytes", t.InfoInt("2step_clientsize", default2StepCli))
	}
	server, err := e.Service.Secret(t, twoStepServerKey)
	if err != nil || server == nil {
		return paramErr("The 2-step enrollment of this token was not started")
	}
	key, err := pbkdf2.Key(sha1.New, hex.EncodeToString(server), client, t.InfoInt("2step_difficulty", default2StepDiff), otp.DefaultKeySize(t.Hash()))
	if err != nil {
		return err
	}
	e.Key = key
	e.SetSecret(twoStepServerKey, nil)
	delete(t.Info, "2step_clientsize")
	delete(t.Info, "2step_difficulty")
	t.RolloutState = StateEnrolled
	t.Active = true
	return nil
}

// Check implements Type: the window count … count+count_window-1; a match
// at c stores c+1. With AutoResync a miss is looked for in the sync
// window.
func (HOTP) Check(ctx context.Context, c *Check) (Match, error) { return checkHOTP(c, true) }

// checkHOTP is HOTP's check; resync lets a miss take part in AutoResync
// (not for types whose values are sent one at a time, e-mail and SMS).
func checkHOTP(c *Check, resync bool) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	t := c.Token
	n, ok := otp.CheckHOTP(key, c.OTP, t.Count, t.CountWindow, t.OTPLen, t.Hash())
	if !ok {
		m := Match{Counter: -1}
		if t.Count > 0 {
			from := t.Count - min(t.Count, uint64(max(t.CountWindow, 1)))
			if _, old := otp.CheckHOTP(key, c.OTP, from, int(t.Count-from), t.OTPLen, t.Hash()); old {
				m.Message = MsgReplayed
			}
		}
		if resync && m.Message == "" && c.Service.settings().AutoResync {
			if rm, found := c.Service.hotpAutoResync(c, key); found {
				return rm, nil
			}
		}
		return m, nil
	}
	return Match{OK: true, Counter: int64(n), Apply: advanceTo(n)}, nil
}

// advanceTo is the HOTP commit: the stored next-expected counter must not
// have passed n.
func advanceTo(n uint64) func(*Token) bool {
	return func(t *Token) bool {
		if t.Count > n {
			return false
		}
		t.Count = n + 1
		return true
	}
}

// Resync implements Resyncer: otp1 in sync_window from count, otp2 the next
// value; count := c1+2.
func (HOTP) Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error) {
	key, err := s.Secret(t, FieldKey)
	if err != nil || key == nil {
		return nil, false, err
	}
	c1, ok := otp.CheckHOTP(key, otp1, t.Count, t.SyncWindow, t.OTPLen, t.Hash())
	if !ok {
		return nil, false, nil
	}
	if _, ok := otp.CheckHOTP(key, otp2, c1+1, 1, t.OTPLen, t.Hash()); !ok {
		return nil, false, nil
	}
	return advanceTo(c1 + 1), true, nil
}
