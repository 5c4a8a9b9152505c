// Package caconnector owns the CA connector definitions (privacyIDEA's
// /caconnector/ configuration) and the certificate authority behind the
// "local" type: a CA key and certificate in files, which signs certificate
// requests with Go's crypto/x509 (never by running openssl), keeps the
// revocation list of the certificates it issued in the store, and writes
// the CRL to a file.
//
// A local CA definition keeps privacyIDEA's keys. cakey and cacert name
// the CA's PEM key (unencrypted RSA, ECDSA or Ed25519; PKCS#1, SEC 1 or
// PKCS#8) and certificate; relative names are beneath WorkingDir. CRL
// (default crl.pem beneath WorkingDir) is where the CRL is written,
// CRL_Validity_Period its validity and CRL_Overlap_Period (days) how long
// before its next update it is written again. templates names the
// templates file (see Template). openssl.cnf, CSRDir and CertificateDir
// are accepted and kept for compatibility but not used: requests and
// certificates are not written to files (the certificates live in the
// tokens), and no openssl configuration is read.
//
// Buckets: caconnectors (the definitions, keyed by the lower-cased name),
// caconnector.revoked (revoked serials by issuer) and caconnector.crl (the
// CRL state by issuer). The revocations belong to the CA (its subject),
// not to the definition: deleting and re-creating a connector of the same
// CA keeps them, as openssl's index file outlives privacyIDEA's database
// row.
//
// Package caconnector is on floor 2: it imports only floor 1 (apierr,
// store, fileroot) and never net/http server types.
package caconnector

import (
	"context"
	"errors"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/store"
)

const (
	bucketDefs    = "caconnectors"
	bucketRevoked = "caconnector.revoked"
	bucketCRL     = "caconnector.crl"
	defSchema     = 1
)

// TypeLocal is the type of the local CA.
const TypeLocal = "local"

// The configuration keys of the local CA (privacyIDEA's names).
const (
	KeyCAKey          = "cakey"
	KeyCACert         = "cacert"
	KeyOpenSSLConf    = "openssl.cnf"
	KeyWorkingDir     = "WorkingDir"
	KeyCSRDir         = "CSRDir"
	KeyCertificateDir = "CertificateDir"
	KeyCRL            = "CRL"
	KeyCRLValidity    = "CRL_Validity_Period"
	KeyCRLOverlap     = "CRL_Overlap_Period"
	KeyTemplates      = "templates"
)

// localKeys are the keys a local CA definition stores, with their types
// as privacyIDEA describes them.
var localKeys = map[string]string{
	KeyCAKey: "string", KeyCACert: "string", KeyOpenSSLConf: "string", KeyWorkingDir: "string",
	KeyCSRDir: "string", KeyCertificateDir: "string", KeyCRL: "string",
	KeyCRLValidity: "int", KeyCRLOverlap: "int", KeyTemplates: "string",
}

// Defaults of the local CA (privacyIDEA's).
const (
	DefaultCRLValidityDays = 30
	DefaultCRLOverlapDays  = 2
	DefaultCertDays        = 365
	DefaultCRLFile         = "crl.pem"
)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_\-.]+$`)

// Errors of the package.
var (
	ErrNotFound = apierr.New(apierr.ResourceNotFound, "The requested CAConnector could not be found.")
	ErrBadName  = apierr.New(apierr.Parameter, "non conformant characters in the name: only letters, digits, '_', '-' and '.' are allowed")
)

// Def is a CA connector definition as reads show it.
type Def struct {
	ID   int
	Name string
	Type string
	// Data are the configuration values as stored (strings, as
	// privacyIDEA keeps them).
	Data map[string]string
	// Templates are the certificate templates of the templates file (nil
	// when the file is not set or does not read now).
	Templates map[string]Template
}

type defRecord struct {
	store.Versioned
	ID   int               `json:"id"`
	Name string            `json:"name"`
	Type string            `json:"type"`
	Data map[string]string `json:"data"`
	// Issuer identifies the CA certificate's subject when the definition
	// was saved (issuerID).
	Issuer string `json:"issuer"`
}

// Config wires the service.
type Config struct {
	Store store.Store
	// Files confines the files a definition names (the CA key and
	// certificate, the templates) and where the CRL may be written.
	Files fileroot.Confinement
	Log   zerolog.Logger
	Now   func() time.Time
	Rand  io.Reader
}

// Service keeps the CA connectors and runs the local CAs.
type Service struct {
	cfg Config
	// crlMu serialises CRL generation in this process.
	crlMu sync.Mutex
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// Types lists the connector types.
func Types() []string { return []string{TypeLocal} }

func key(name string) []byte { return []byte(strings.ToLower(name)) }

// CheckName applies the name rules of resolvers: letters, digits, '_',
// '-' and '.', at most 128, not only dots.
func CheckName(name string) error {
	if strings.TrimSpace(name) == "" {
		return apierr.MissingParameter("caconnector")
	}
	if !nameRe.MatchString(name) || len(name) > 128 || strings.Trim(name, ".") == "" {
		return ErrBadName
	}
	return nil
}

// Set creates the CA connector name or changes its configuration (only the
// keys given change; "" removes a key) and returns its id. The type of an
// existing connector cannot change. The resulting local CA must load: its
// key and certificate read, match, and can sign; its templates file
// parses; its CRL path may be written. Otherwise nothing is stored. Each
// of also runs in the transaction of the write.
func (s *Service) Set(ctx context.Context, name, typ string, params map[string]string, also ...func(store.Tx) error) (int, error) {
	if err := CheckName(name); err != nil {
		return 0, err
	}
	if typ == "" {
		return 0, apierr.MissingParameter("type")
	}
	if !slices.Contains(Types(), typ) {
		return 0, apierr.Newf(apierr.Parameter, "connector type : %s not in %v", typ, Types())
	}
	old, err := s.get(ctx, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	data := map[string]string{}
	if old != nil {
		if old.Type != typ {
			return 0, apierr.New(apierr.ConfigAdmin, "CA Connector with similar name and other type already exists: "+name)
		}
		maps.Copy(data, old.Data)
	}
	for k, v := range params {
		if _, ok := localKeys[k]; !ok {
			continue
		}
		if v == "" {
			delete(data, k)
			continue
		}
		if len(v) > 1024 || strings.ContainsAny(v, "\x00\r\n") {
			return 0, apierr.Newf(apierr.Parameter, "The value of %s must be one line of at most 1024 bytes.", k)
		}
		data[k] = v
	}
	ca, err := s.load(data)
	if err != nil {
		return 0, err
	}
	var id int
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucketDefs)
		var rec defRecord
		switch err := store.GetJSON(b, key(name), &rec); {
		case errors.Is(err, store.ErrNotFound):
			n, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec = defRecord{ID: int(n), Name: name, Type: typ}
		case err != nil:
			return err
		case rec.Type != typ:
			return apierr.New(apierr.ConfigAdmin, "CA Connector with similar name and other type already exists: "+name)
		}
		rec.Schema = defSchema
		rec.Data = data
		rec.Issuer = ca.issuer
		if err := store.PutJSON(b, key(name), rec); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		return store.RunAlso(tx, also)
	})
	return id, err
}

// get returns the stored definition of name; ErrNotFound when unknown.
func (s *Service) get(ctx context.Context, name string) (*defRecord, error) {
	var rec defRecord
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		return store.GetJSON(tx.Bucket(bucketDefs), key(name), &rec)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// Get returns the definition of name; ErrNotFound when unknown.
func (s *Service) Get(ctx context.Context, name string) (Def, error) {
	rec, err := s.get(ctx, name)
	if err != nil {
		return Def{}, err
	}
	return s.def(rec), nil
}

func (s *Service) def(rec *defRecord) Def {
	d := Def{ID: rec.ID, Name: rec.Name, Type: rec.Type, Data: maps.Clone(rec.Data)}
	if d.Data == nil {
		d.Data = map[string]string{}
	}
	if p := rec.Data[KeyTemplates]; p != "" {
		if path, err := resolvePath(rec.Data, p); err == nil {
			if t, err := s.readTemplates(path); err == nil {
				d.Templates = t
			}
		}
	}
	return d
}

// List returns the definitions ordered by name; only the one named name
// when it is not "" (none when unknown).
func (s *Service) List(ctx context.Context, name string) ([]Def, error) {
	var recs []defRecord
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		recs = recs[:0]
		b := tx.Bucket(bucketDefs)
		return b.ForEach(nil, func(k, _ []byte) error {
			var rec defRecord
			if err := store.GetJSON(b, k, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := []Def{}
	for i := range recs {
		if name == "" || strings.EqualFold(recs[i].Name, name) {
			out = append(out, s.def(&recs[i]))
		}
	}
	slices.SortFunc(out, func(a, b Def) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Names lists the connector names.
func (s *Service) Names(ctx context.Context) ([]string, error) {
	list, err := s.List(ctx, "")
	names := make([]string, 0, len(list))
	for _, d := range list {
		names = append(names, d.Name)
	}
	return names, err
}

// Delete removes the CA connector name and returns its id; ErrNotFound
// when unknown. The CA's revocations stay (see the package comment).
func (s *Service) Delete(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	var id int
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucketDefs)
		var rec defRecord
		if err := store.GetJSON(b, key(name), &rec); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrNotFound
			}
			return err
		}
		if err := b.Delete(key(name)); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		return store.RunAlso(tx, also)
	})
	return id, err
}

// SpecificOptions answers GET /caconnector/specific/<type> for the
// configuration entered so far: the local CA needs cakey and cacert and
// has no further options (privacyIDEA answers {}).
func (s *Service) SpecificOptions(typ string, params map[string]string) (map[string]any, error) {
	if !slices.Contains(Types(), typ) {
		return nil, apierr.Newf(apierr.Parameter, "connector type : %s not in %v", typ, Types())
	}
	for _, k := range []string{KeyCAKey, KeyCACert} {
		if params[k] == "" {
			return nil, apierr.Newf(apierr.CA, "required argument '%s' is missing.", k)
		}
	}
	return map[string]any{}, nil
}
