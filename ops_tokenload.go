package authsrv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/tokenfile"
	"github.com/authsrv/authsrv/token"
)

// importLimits bound token import files (a server's body limit applies
// first).
var importLimits = tokenfile.Limits{MaxBytes: 4 << 20, MaxRecords: 50000}

// TokenImport is a token file to import.
type TokenImport struct {
	// Format is oathcsv, yubikeycsv or pskc.
	Format string
	// Name is the file's name (for the audit).
	Name string
	File []byte
	// PSK is the pre-shared AES key of a PSKC file (hex), Password the
	// password of its derived key, ValidateMAC how its MAC is checked
	// (privacyIDEA's pskcValidateMAC).
	PSK, Password, ValidateMAC string
	// Realms become the token realms of every imported token; each must
	// exist.
	Realms []string
}

// TokenImportFailure is an entry of the file that was not imported.
type TokenImportFailure struct {
	Serial string
	// Line is the entry's line in the file, 0 when it was refused after
	// reading.
	Line   int
	Reason string
}

// TokenImportResult is what an import did.
type TokenImportResult struct {
	Imported    int
	NotImported []TokenImportFailure
}

// ImportTokens imports a token file (administrators, right
// "importtokens"). Every token of the file is written in one store
// transaction with the audit entry, which names how many tokens it
// imported: an import is all or nothing, whatever becomes of the client.
func (o *Ops) ImportTokens(ctx context.Context, who caller.Caller, req TokenImport) (TokenImportResult, error) {
	var res TokenImportResult
	err := o.run(ctx, who, opSpec{event: "token_load", action: "POST /token/load/" + req.Name, right: "importtokens"}, func(ctx context.Context, r *opRun) error {
		if !who.IsAdmin() {
			return errAdminOnly
		}
		for _, rl := range req.Realms {
			if !o.s.realms.Exists(ctx, rl) {
				return errNoRealm(rl)
			}
		}
		var recs []tokenfile.Record
		var fails []tokenfile.Failure
		var err error
		switch strings.ToLower(req.Format) {
		case "oathcsv":
			recs, fails, err = tokenfile.ParseOATHCSV(bytes.NewReader(req.File), importLimits)
		case "yubikeycsv":
			recs, fails, err = tokenfile.ParseYubikeyCSV(bytes.NewReader(req.File), importLimits)
		case "pskc":
			var opt tokenfile.PSKCOptions
			if psk := strings.TrimSpace(req.PSK); psk != "" {
				if opt.PresharedKey, err = hex.DecodeString(psk); err != nil {
					return apierr.New(apierr.Parameter, "The preshared key (psk) must be hex.")
				}
			}
			opt.Password, opt.ValidateMAC = req.Password, req.ValidateMAC
			recs, fails, err = tokenfile.ParsePSKC(bytes.NewReader(req.File), opt, importLimits)
		default:
			return apierr.New(apierr.TokenImport, "Unknown file type: "+req.Format+" (known: oathcsv, yubikeycsv, pskc)")
		}
		switch {
		case errors.Is(err, tokenfile.ErrTooLarge), errors.Is(err, tokenfile.ErrMalformed):
			return apierr.New(apierr.TokenImport, err.Error())
		case err != nil:
			return err
		}
		for _, f := range fails {
			res.NotImported = append(res.NotImported, TokenImportFailure{Serial: f.Serial, Line: f.Line, Reason: f.Reason})
		}
		toImport := make([]token.ImportRecord, len(recs))
		for i, rec := range recs {
			toImport[i] = token.ImportRecord(rec)
		}
		b := o.s.tokens.PrepareImport(ctx, toImport, req.Realms)
		for _, f := range b.Failed {
			res.NotImported = append(res.NotImported, TokenImportFailure{Serial: f.Serial, Reason: f.Reason})
		}
		n := len(b.Serials())
		r.Entry.Info = audit.Text("imported "+strconv.Itoa(n)+" tokens", 256)
		if err := o.s.tokens.CommitImport(ctx, b, r.Audit); err != nil {
			r.Entry.Info = ""
			return err
		}
		res.Imported = n
		return nil
	})
	return res, err
}
