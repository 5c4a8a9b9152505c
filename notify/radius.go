package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/radclient"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/store"
)

// radiusBucket holds one record per RADIUS server, keyed by its identifier.
const radiusBucket = "radiusservers"

// RADIUS defaults (privacyIDEA's).
const (
	defaultRadiusPort       = 1812
	defaultRadiusRetries    = 3
	defaultRadiusTimeout    = 5
	defaultRadiusDictionary = "/etc/privacyidea/dictionary"
	maxRadiusSecret         = 255
	maxRadiusRetries        = 10
)

// ErrRadiusFailed is the cause of every RADIUS exchange that brought no
// valid answer (no answer in time, or only answers that failed
// verification, which usually means a wrong shared secret).
var ErrRadiusFailed = apierr.New(apierr.ConfigAdmin, "The RADIUS server gave no valid answer.")

// RadiusServer is a RADIUS server definition. Reads return Secret as
// [Censored].
type RadiusServer struct {
	Identifier string // spaces become "_"
	Server     string // host name or IP address
	Port       int    // 0 means 1812
	Secret     string // required; at most 255 bytes
	// Retries is the number of sends, as in privacyIDEA (pyrad): 3 means
	// the request goes out at most three times (0 means 3, at most 10).
	// Each send waits Timeout seconds (0 means 5, at most 60).
	Retries int
	Timeout int
	// Dictionary is stored for privacyIDEA compatibility (default
	// /etc/privacyidea/dictionary); authsrv uses built-in attribute
	// definitions and never reads it.
	Dictionary  string
	Description string
	// Options are stored as given (privacyIDEA sends e.g.
	// {"message_authenticator": true}); authsrv always sends and requires
	// a Message-Authenticator. The string option "nas_identifier" sets
	// the NAS-Identifier (default "authsrv").
	Options map[string]any
}

// String describes the definition without its secret.
func (d RadiusServer) String() string {
	return fmt.Sprintf("RadiusServer(%s %s:%d)", d.Identifier, d.Server, d.Port)
}

type radiusRecord struct {
	store.Versioned
	Identifier  string         `json:"identifier"`
	Server      string         `json:"server"`
	Port        int            `json:"port"`
	Secret      []byte         `json:"secret_sealed"`
	Retries     int            `json:"retries"`
	Timeout     int            `json:"timeout"`
	Dictionary  string         `json:"dictionary,omitempty"`
	Description string         `json:"description,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Rev         uint64         `json:"rev"`
}

func normalizeRadius(d *RadiusServer) error {
	d.Identifier = strings.ReplaceAll(strings.TrimSpace(d.Identifier), " ", "_")
	if err := validIdentifier("RADIUS server", d.Identifier); err != nil {
		return err
	}
	if err := hostPort(&d.Server, &d.Port, defaultRadiusPort); err != nil {
		return err
	}
	switch {
	case d.Retries == 0:
		d.Retries = defaultRadiusRetries
	case d.Retries < 0 || d.Retries > maxRadiusRetries:
		return paramErr("The retries must be between 1 and %d.", maxRadiusRetries)
	}
	t, err := timeoutSeconds("The timeout", d.Timeout, defaultRadiusTimeout)
	if err != nil {
		return err
	}
	d.Timeout = t
	if d.Dictionary == "" {
		d.Dictionary = defaultRadiusDictionary
	}
	if d.Secret == "" {
		return apierr.MissingParameter("secret")
	}
	if len(d.Secret) > maxRadiusSecret {
		return ErrRadiusSecretTooLong
	}
	if d.Options != nil {
		if _, err := json.Marshal(d.Options); err != nil {
			return paramErr("The options must be a JSON object.")
		}
	}
	return nil
}

// SetRadius creates or replaces the RADIUS server def.Identifier (spaces
// in it become "_"). A Secret equal to [Censored] keeps the stored one; a
// new definition needs a real secret. Each of also runs in the same
// transaction after the write.
func (s *Service) SetRadius(ctx context.Context, def RadiusServer, also ...func(store.Tx) error) error {
	if err := normalizeRadius(&def); err != nil {
		return err
	}
	id := def.Identifier
	sealed, err := s.sealIfNew(def.Secret, radiusBucket, id, "secret")
	if err != nil {
		return err
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(radiusBucket)
		secret := sealed
		if def.Secret == Censored {
			var old radiusRecord
			err := store.GetJSON(b, []byte(id), &old)
			if errors.Is(err, store.ErrNotFound) || (err == nil && old.Secret == nil) {
				return apierr.MissingParameter("secret")
			}
			if err != nil {
				return err
			}
			secret = old.Secret
		}
		rec := radiusRecord{
			Identifier: id, Server: def.Server, Port: def.Port, Secret: secret, Retries: def.Retries,
			Timeout: def.Timeout, Dictionary: def.Dictionary, Description: def.Description, Options: def.Options,
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Schema, rec.Rev = schema, rev
		if err := store.PutJSON(b, []byte(id), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return fmt.Errorf("radius server %s: %w", id, err)
	}
	return nil
}

func (r radiusRecord) def() RadiusServer {
	return RadiusServer{
		Identifier: r.Identifier, Server: r.Server, Port: r.Port, Secret: censor(r.Secret),
		Retries: r.Retries, Timeout: r.Timeout, Dictionary: r.Dictionary, Description: r.Description,
		Options: r.Options,
	}
}

// RadiusServers returns every RADIUS server definition, ordered by
// identifier, with secrets censored.
func (s *Service) RadiusServers(ctx context.Context) ([]RadiusServer, error) {
	return listDefs(ctx, s.st, radiusBucket, radiusRecord.def, func(d RadiusServer) string { return d.Identifier })
}

// DeleteRadius removes the RADIUS server id; also runs in the change's
// transaction.
func (s *Service) DeleteRadius(ctx context.Context, id string, also ...func(store.Tx) error) error {
	return deleteDef(ctx, s.st, radiusBucket, id, ErrRadiusNotFound, also)
}

// RadiusCode is the kind of answer a RADIUS server gave to an
// Access-Request; the values are RFC 2865's packet codes.
type RadiusCode int

// The answers of a RADIUS server.
const (
	RadiusAccept    RadiusCode = 2
	RadiusReject    RadiusCode = 3
	RadiusChallenge RadiusCode = 11
)

// String returns the RFC name of the code, such as "Access-Accept".
func (c RadiusCode) String() string { return radclient.Code(c).String() }

// RadiusResponse is a RADIUS server's verified answer.
type RadiusResponse struct {
	// Code is RadiusAccept, RadiusReject or RadiusChallenge.
	Code RadiusCode
	// ReplyMessage is the concatenation of the Reply-Message attributes in
	// packet order.
	ReplyMessage string
	// State is the State attribute (sent with a challenge); nil without.
	State []byte
}

// RadiusAuth sends one Access-Request for user and password (and the State
// of a previous Access-Challenge, or nil) to the RADIUS server id and
// returns its verified answer. A reject or challenge is a result, not an
// error; no valid answer within the retries is an error wrapping
// [ErrRadiusFailed].
func (s *Service) RadiusAuth(ctx context.Context, id, user, password string, state []byte) (RadiusResponse, error) {
	var rec radiusRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(radiusBucket), []byte(id), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return ErrRadiusNotFound
		}
		return err
	})
	if err != nil {
		return RadiusResponse{}, err
	}
	secret, err := s.open(rec.Secret, radiusBucket, id, "secret")
	if err != nil {
		return RadiusResponse{}, err
	}
	nas, _ := rec.Options["nas_identifier"].(string)
	// radclient counts resends after the first try, and reads 0 as its
	// default: one try is -1.
	retries := rec.Retries - 1
	if rec.Retries <= 1 {
		retries = -1
	}
	start := time.Now()
	resp, err := radclient.Exchange(ctx, radclient.Request{
		Addr:          net.JoinHostPort(hostOnly(rec.Server), strconv.Itoa(rec.Port)),
		Secret:        []byte(secret),
		Username:      user,
		Password:      password,
		State:         state,
		NASIdentifier: nas,
		Timeout:       time.Duration(rec.Timeout) * time.Second,
		Retries:       retries,
		Control:       s.dial.ControlContext,
	})
	if err != nil {
		var reason string
		switch {
		case errors.Is(err, radclient.ErrInvalidRequest):
			return RadiusResponse{}, paramErr("The RADIUS request cannot be sent: the user name, password or state is too long.")
		case ctx.Err() != nil:
			return RadiusResponse{}, fmt.Errorf("radius server %s: %w", id, ctx.Err())
		case errors.Is(err, netguard.ErrRefused):
			r, _ := netguard.Refusal(err)
			reason = "it could not be reached: " + r.Error()
		case errors.Is(err, radclient.ErrInvalidResponse):
			reason = "it gave no valid answer (check the shared secret)"
		case errors.Is(err, radclient.ErrTimeout):
			reason = "it did not answer in time"
		default:
			reason = "it could not be reached"
		}
		s.log.Warn().Str("radiusserver", id).Str("result", "failed").AnErr("error", err).Msg("radius request failed: " + reason)
		return RadiusResponse{}, apierr.New(apierr.ConfigAdmin,
			fmt.Sprintf("The RADIUS server %s failed: %s.", id, reason)).Wrap(errors.Join(ErrRadiusFailed, err))
	}
	s.log.Debug().Str("radiusserver", id).Str("result", resp.Code.String()).
		Int64("duration_ms", time.Since(start).Milliseconds()).Msg("radius request answered")
	return RadiusResponse{Code: RadiusCode(resp.Code), ReplyMessage: resp.ReplyMessage, State: resp.State}, nil
}

// TestRadius sends one Access-Request to the RADIUS server id and reports
// whether it answered Access-Accept. A reject or challenge is false with
// no error; no valid answer is an error.
func (s *Service) TestRadius(ctx context.Context, id, user, password string) (bool, error) {
	resp, err := s.RadiusAuth(ctx, id, user, password, nil)
	if err != nil {
		return false, err
	}
	return resp.Code == RadiusAccept, nil
}
