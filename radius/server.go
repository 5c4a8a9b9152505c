package radius

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	rad "layeh.com/radius"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/validate"
)

// Checker decides an authentication request: (*validate.Validator).Check,
// which (*authsrv.Server).Validator() returns.
type Checker interface {
	Check(ctx context.Context, r validate.Request) (validate.Response, error)
}

var _ Checker = (*validate.Validator)(nil)

// Defaults of Config's zero values.
const (
	DefaultMaxInFlight     = 256
	DefaultMaxPerClient    = 32
	DefaultDuplicateWindow = 5 * time.Second
	DefaultRequestTimeout  = 30 * time.Second
)

// UserAgent and Action are what the validate request's caller carries:
// the audit's user agent and action columns, and what policies on user
// agents match.
const (
	UserAgent = "authsrv-radius"
	Action    = "RADIUS Access-Request"
)

// maxCache bounds the duplicate cache: past it new requests are dropped
// as if the server were busy.
const maxCache = 1 << 16

// Config configures a Server.
type Config struct {
	// Checker decides every request (required).
	Checker Checker
	// Clients are the NASes answered (at least one); a packet from any
	// other address is dropped silently. The most specific network of a
	// source address decides.
	Clients []Client
	// Mapping copies values of the decision into Accept and Challenge
	// answers (default: none).
	Mapping []Mapping
	// Log receives the component's lines (default: none). Secrets and
	// passwords are never logged.
	Log zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxInFlight bounds the requests decided at once, MaxPerClient those
	// of one client; a request beyond either is dropped (the NAS
	// retransmits).
	MaxInFlight, MaxPerClient int
	// DuplicateWindow is how long an answer is kept for retransmissions
	// of its request.
	DuplicateWindow time.Duration
	// RequestTimeout bounds one decision.
	RequestTimeout time.Duration
}

// Drop reasons.
const (
	dropUnknownClient = iota
	dropMalformed
	dropNoMessageAuthenticator
	dropBadMessageAuthenticator
	dropBusy
	dropInFlight
	numDrops
)

var dropNames = [numDrops]string{"unknown_client", "malformed", "no_message_authenticator", "bad_message_authenticator", "busy", "duplicate_in_flight"}

// Stats counts what the server did since it was made.
type Stats struct {
	// Answered counts the answers sent, Duplicates those of them taken
	// from the duplicate cache.
	Answered, Duplicates uint64
	// Dropped counts the packets dropped, by reason: unknown_client,
	// malformed, no_message_authenticator, bad_message_authenticator,
	// busy, duplicate_in_flight.
	Dropped map[string]uint64
}

// Server answers Access-Requests. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	clients clientTable
	global  chan struct{}

	answered, duplicates atomic.Uint64
	drops                [numDrops]atomic.Uint64

	reportMu   sync.Mutex
	reportedAt time.Time
	reported   [numDrops]uint64

	cacheMu  sync.Mutex
	cache    map[dupKey]*cached
	sweptAt  time.Time
	handlers sync.WaitGroup
}

// clientState is a client and its requests in flight.
type clientState struct {
	Client
	inFlight atomic.Int32
}

// dupKey identifies a request for duplicate detection (RFC 5080 2.2.2).
type dupKey struct {
	src  netip.AddrPort
	id   byte
	auth [16]byte
}

// cached is an answer (nil while the request is decided) and when it
// expires.
type cached struct {
	answer  []byte
	expires time.Time
}

// New checks cfg and returns a Server; it starts nothing.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Checker == nil {
		errs = append(errs, errors.New("radius: no Checker"))
	}
	if len(cfg.Clients) == 0 {
		errs = append(errs, errors.New("radius: no clients"))
	}
	s := &Server{cfg: cfg, cache: map[dupKey]*cached{}}
	seen := map[netip.Prefix]bool{}
	for i, c := range cfg.Clients {
		switch {
		case !c.Network.IsValid():
			errs = append(errs, fmt.Errorf("radius: client %d: no address", i))
		case len(c.Secret) == 0:
			errs = append(errs, fmt.Errorf("radius: client %s: empty secret", c.Network))
		case seen[c.Network.Masked()]:
			errs = append(errs, fmt.Errorf("radius: client %s listed twice", c.Network))
		}
		c.Network = c.Network.Masked()
		c.Secret = append([]byte(nil), c.Secret...)
		seen[c.Network] = true
		s.clients = append(s.clients, &clientState{Client: c})
	}
	for _, m := range cfg.Mapping {
		if err := m.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("radius: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.cfg.MaxInFlight <= 0 {
		s.cfg.MaxInFlight = DefaultMaxInFlight
	}
	if s.cfg.MaxPerClient <= 0 {
		s.cfg.MaxPerClient = DefaultMaxPerClient
	}
	if s.cfg.DuplicateWindow <= 0 {
		s.cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if s.cfg.RequestTimeout <= 0 {
		s.cfg.RequestTimeout = DefaultRequestTimeout
	}
	s.log = cfg.Log.With().Str("component", "radius").Logger()
	s.global = make(chan struct{}, s.cfg.MaxInFlight)
	s.reportedAt = s.cfg.Now()
	return s, nil
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	st := Stats{Answered: s.answered.Load(), Duplicates: s.duplicates.Load(), Dropped: map[string]uint64{}}
	for i := range s.drops {
		st.Dropped[dropNames[i]] = s.drops[i].Load()
	}
	return st
}

// ListenAndServe serves Access-Requests on the UDP address addr until
// ctx is done (see Serve).
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return s.Serve(ctx, conn)
}

// Serve answers the Access-Requests arriving on conn until ctx is done,
// then stops reading, lets the requests in flight finish and answer (each
// within RequestTimeout), and returns nil. It returns early with the
// error of a failed read. The caller closes conn.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	work := context.WithoutCancel(ctx)
	buf := make([]byte, rad.MaxPacketLength+1)
	var err error
	for {
		n, from, rerr := conn.ReadFrom(buf)
		if rerr != nil {
			if ctx.Err() == nil {
				err = rerr
			}
			break
		}
		s.report()
		src := addrPort(from)
		c := s.clients.lookup(src.Addr())
		if c == nil {
			s.drop(dropUnknownClient)
			continue
		}
		if n > rad.MaxPacketLength {
			s.drop(dropMalformed)
			continue
		}
		if !s.acquire(c) {
			s.drop(dropBusy)
			continue
		}
		pkt := append([]byte(nil), buf[:n]...)
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			out := s.handle(work, c, src, pkt)
			// The slot is free before the answer leaves: a NAS with
			// MaxPerClient requests outstanding sends its next one as
			// soon as it has an answer.
			s.release(c)
			if out != nil {
				if _, werr := conn.WriteTo(out, from); werr != nil {
					s.log.Warn().Err(werr).Str("nas", src.Addr().String()).Msg("answer not sent")
				}
			}
		}()
	}
	s.handlers.Wait()
	s.report()
	return err
}

func addrPort(a net.Addr) netip.AddrPort {
	if u, ok := a.(*net.UDPAddr); ok {
		ap := u.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

func (s *Server) acquire(c *clientState) bool {
	select {
	case s.global <- struct{}{}:
	default:
		return false
	}
	if c.inFlight.Add(1) > int32(s.cfg.MaxPerClient) {
		c.inFlight.Add(-1)
		<-s.global
		return false
	}
	return true
}

func (s *Server) release(c *clientState) {
	c.inFlight.Add(-1)
	<-s.global
}

func (s *Server) drop(reason int) { s.drops[reason].Add(1) }

// report logs the drops of the last minute, at most once a minute.
func (s *Server) report() {
	now := s.cfg.Now()
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	if now.Sub(s.reportedAt) < time.Minute {
		return
	}
	s.reportedAt = now
	ev := s.log.Warn()
	some := false
	for i := range s.drops {
		n := s.drops[i].Load()
		if d := n - s.reported[i]; d > 0 {
			ev = ev.Uint64(dropNames[i], d)
			some = true
		}
		s.reported[i] = n
	}
	if some {
		ev.Msg("RADIUS packets dropped in the last minute")
	} else {
		ev.Discard()
	}
}

// request is a decoded Access-Request.
type request struct {
	id          byte
	auth        [16]byte
	user        []byte
	password    []byte // hidden, as on the wire; nil: none
	state       []byte // nil: none
	proxyStates [][]byte
	notPAP      bool // CHAP-Password or EAP-Message
}

// Attribute types read or checked.
const (
	attrUserName             = 1
	attrUserPassword         = 2
	attrCHAPPassword         = 3
	attrNASIPAddress         = 4
	attrNASPort              = 5
	attrServiceType          = 6
	attrReplyMessage         = 18
	attrState                = 24
	attrProxyState           = 33
	attrNASPortType          = 61
	attrEAPMessage           = 79
	attrMessageAuthenticator = 80
	attrNASIPv6Address       = 95
)

// decode checks an Access-Request of client c: its length, its
// attributes' lengths and its Message-Authenticator. It returns a drop
// reason, or -1 with the request.
func decode(c *clientState, b []byte) (*request, int) {
	if len(b) < 20 || rad.Code(b[0]) != rad.CodeAccessRequest {
		return nil, dropMalformed
	}
	length := int(binary.BigEndian.Uint16(b[2:4]))
	if length < 20 || length > rad.MaxPacketLength || length > len(b) {
		return nil, dropMalformed
	}
	b = b[:length]
	r := &request{id: b[1]}
	copy(r.auth[:], b[4:20])
	maAt := -1
	for i := 20; i < len(b); {
		if len(b)-i < 2 {
			return nil, dropMalformed
		}
		t, l := b[i], int(b[i+1])
		if l < 2 || i+l > len(b) {
			return nil, dropMalformed
		}
		v := b[i+2 : i+l]
		switch t {
		case attrUserName:
			if r.user != nil || len(v) == 0 {
				return nil, dropMalformed
			}
			r.user = v
		case attrUserPassword:
			if r.password != nil || len(v) < 16 || len(v) > 128 || len(v)%16 != 0 {
				return nil, dropMalformed
			}
			r.password = v
		case attrCHAPPassword:
			if len(v) != 17 {
				return nil, dropMalformed
			}
			r.notPAP = true
		case attrNASIPAddress, attrNASPort, attrServiceType, attrNASPortType:
			if len(v) != 4 {
				return nil, dropMalformed
			}
		case attrNASIPv6Address:
			if len(v) != 16 {
				return nil, dropMalformed
			}
		case attrState:
			if r.state != nil || len(v) == 0 {
				return nil, dropMalformed
			}
			r.state = v
		case attrProxyState:
			if len(v) == 0 {
				return nil, dropMalformed
			}
			r.proxyStates = append(r.proxyStates, v)
		case attrEAPMessage:
			r.notPAP = true
		case attrMessageAuthenticator:
			if maAt >= 0 || len(v) != 16 {
				return nil, dropMalformed
			}
			maAt = i + 2
		}
		i += l
	}
	if r.user == nil || (r.password != nil && r.notPAP) {
		return nil, dropMalformed
	}
	if maAt < 0 {
		if !c.Legacy || r.notPAP {
			return nil, dropNoMessageAuthenticator
		}
		return r, -1
	}
	got := append([]byte(nil), b[maAt:maAt+16]...)
	zeroed := append([]byte(nil), b...)
	clear(zeroed[maAt : maAt+16])
	mac := hmac.New(md5.New, c.Secret)
	mac.Write(zeroed)
	if subtle.ConstantTimeCompare(mac.Sum(nil), got) != 1 {
		return nil, dropBadMessageAuthenticator
	}
	return r, -1
}

// handle answers one packet of client c from src; nil drops it.
func (s *Server) handle(ctx context.Context, c *clientState, src netip.AddrPort, b []byte) []byte {
	r, reason := decode(c, b)
	if reason >= 0 {
		s.drop(reason)
		return nil
	}
	key := dupKey{src: src, id: r.id, auth: r.auth}
	if out, dup, ok := s.begin(key); dup {
		if out == nil {
			s.drop(dropInFlight)
			return nil
		}
		s.duplicates.Add(1)
		s.answered.Add(1)
		return out
	} else if !ok {
		s.drop(dropBusy)
		return nil
	}
	out := s.answer(ctx, c, src, r)
	s.end(key, out)
	if out == nil {
		s.drop(dropMalformed)
		return nil
	}
	s.answered.Add(1)
	return out
}

// begin looks key up in the duplicate cache: dup with the cached answer
// (nil while in flight), or a new entry (ok false when the cache is
// full).
func (s *Server) begin(key dupKey) (out []byte, dup, ok bool) {
	now := s.cfg.Now()
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if e, found := s.cache[key]; found && now.Before(e.expires) {
		return e.answer, true, true
	}
	if len(s.cache) >= maxCache/2 && now.Sub(s.sweptAt) >= time.Second {
		s.sweptAt = now
		for k, e := range s.cache {
			if !now.Before(e.expires) {
				delete(s.cache, k)
			}
		}
	}
	if len(s.cache) >= maxCache {
		return nil, false, false
	}
	s.cache[key] = &cached{expires: now.Add(s.cfg.RequestTimeout + s.cfg.DuplicateWindow)}
	return nil, false, true
}

// end stores the answer of key for DuplicateWindow.
func (s *Server) end(key dupKey, out []byte) {
	now := s.cfg.Now()
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if e, ok := s.cache[key]; ok {
		e.answer, e.expires = out, now.Add(s.cfg.DuplicateWindow)
	}
}

// isTransactionID reports whether a State is one of ours: a transaction
// id is 20 decimal digits.
func isTransactionID(s []byte) bool {
	if len(s) != 20 {
		return false
	}
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// Messages of answers decided here, without a check.
const (
	MsgNotPAP       = "only PAP is supported"
	MsgUnknownState = "the State of this request is not a challenge of this server"
)

// answer decides a decoded request and encodes the answer.
func (s *Server) answer(ctx context.Context, c *clientState, src netip.AddrPort, r *request) []byte {
	start := s.cfg.Now()
	id := requestID()
	log := s.log.With().Str("request_id", id).Str("nas", src.Addr().String()).Logger()
	if r.notPAP {
		log.Info().Str("result", "reject").Msg(MsgNotPAP)
		return encode(rad.CodeAccessReject, r, c.Secret, MsgNotPAP, nil, nil, nil)
	}
	if r.state != nil && !isTransactionID(r.state) {
		log.Info().Str("result", "reject").Msg("State not ours")
		return encode(rad.CodeAccessReject, r, c.Secret, MsgUnknownState, nil, nil, nil)
	}
	var pass []byte
	if r.password != nil {
		var err error
		if pass, err = rad.UserPassword(r.password, c.Secret, r.auth[:]); err != nil {
			return encode(rad.CodeAccessReject, r, c.Secret, "", nil, nil, nil)
		}
	}
	req := validate.Request{
		Caller: caller.Caller{Role: caller.APIKey, Client: src.Addr(), UserAgent: UserAgent, Action: Action,
			RequestID: id},
		User: string(r.user), Pass: string(pass), TransactionID: string(r.state),
	}
	clear(pass)
	if c.Realm != "" && !strings.Contains(req.User, "@") {
		req.Realm = c.Realm
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.cfg.Checker.Check(log.WithContext(cctx), req)
	ev := log.Info().Str("user", req.User).Int64("duration_ms", s.cfg.Now().Sub(start).Milliseconds())
	switch {
	case err != nil:
		_, _, msg, _, internal := apierr.Wire(err)
		if internal {
			log.Error().Err(err).Msg("RADIUS request failed")
		}
		ev.Str("result", "reject").Msg(msg)
		return encode(rad.CodeAccessReject, r, c.Secret, msg, nil, nil, nil)
	case res.Value:
		ev.Str("result", "accept").Msg(res.Message)
		return encode(rad.CodeAccessAccept, r, c.Secret, message(res), nil, s.cfg.Mapping, res.Detail())
	case res.TransactionID != "":
		ev.Str("result", "challenge").Msg(res.Message)
		return encode(rad.CodeAccessChallenge, r, c.Secret, res.Message, []byte(res.TransactionID), s.cfg.Mapping, res.Detail())
	default:
		ev.Str("result", "reject").Msg(message(res))
		return encode(rad.CodeAccessReject, r, c.Secret, message(res), nil, nil, nil)
	}
}

// message is the Reply-Message of a decision: none when no_detail_on_*
// hides the detail.
func message(res validate.Response) string {
	if res.NoDetail {
		return ""
	}
	return res.Message
}

func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxMessage caps a Reply-Message (split into attributes of 253 bytes).
const maxMessage = 1012

// encode builds an answer to r: the Message-Authenticator first, then
// State, Reply-Message, the mapped attributes and the Proxy-States in
// their order; then the Response Authenticator.
func encode(code rad.Code, r *request, secret []byte, msg string, state []byte, maps []Mapping, detail map[string]any) []byte {
	p := &rad.Packet{Code: code, Identifier: r.id, Authenticator: r.auth, Secret: secret}
	p.Add(attrMessageAuthenticator, make(rad.Attribute, 16))
	if state != nil {
		p.Add(attrState, rad.Attribute(state))
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	for m := msg; m != ""; {
		n := min(len(m), 253)
		p.Add(attrReplyMessage, rad.Attribute(m[:n]))
		m = m[n:]
	}
	if detail != nil {
		addMapped(p, maps, detail)
	}
	for _, ps := range r.proxyStates {
		p.Add(attrProxyState, rad.Attribute(ps))
	}
	b, err := p.MarshalBinary()
	switch {
	case err != nil && detail != nil:
		// Too long with the mapped attributes: answer without them.
		return encode(code, r, secret, msg, state, nil, nil)
	case err != nil && msg != "":
		return encode(code, r, secret, "", state, nil, nil)
	case err != nil:
		return nil // the Proxy-States alone are too long
	}
	mac := hmac.New(md5.New, secret)
	mac.Write(b) // the Request Authenticator is in place (RFC 3579 3.2)
	copy(b[22:38], mac.Sum(nil))
	h := md5.New()
	h.Write(b[:4])
	h.Write(r.auth[:])
	h.Write(b[20:])
	h.Write(secret)
	copy(b[4:20], h.Sum(nil))
	return b
}
