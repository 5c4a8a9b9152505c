package server

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/tokenfile"
	"github.com/authsrv/authsrv/token"
)

// importLimits bound token import files (the request body limit applies
// first).
var importLimits = tokenfile.Limits{MaxBytes: 4 << 20, MaxRecords: 50000}

// postTokenLoad is POST /token/load/{filename} (admin): the form file
// "file" in the format "type" (oathcsv, yubikeycsv, pskc; pskc with "psk"
// as hex AES key or "password", and "pskcValidateMAC"), imported into the
// realms "tokenrealms".
func postTokenLoad(c *call) (answer, error) {
	data, _, ok := c.p.file("file")
	if !ok {
		s, err := c.p.str("file")
		if err != nil || s == "" {
			return answer{}, apierr.MissingParameter("file")
		}
		data = []byte(s)
	}
	typ, err := c.p.required("type")
	if err != nil {
		return answer{}, err
	}
	realms, err := c.p.list("tokenrealms")
	if err != nil {
		return answer{}, err
	}
	for _, r := range realms {
		if !c.isRealm(r) {
			return answer{}, apierr.New(apierr.Parameter, "The realm "+r+" does not exist.")
		}
	}
	var recs []tokenfile.Record
	var fails []tokenfile.Failure
	switch strings.ToLower(typ) {
	case "oathcsv":
		recs, fails, err = tokenfile.ParseOATHCSV(bytes.NewReader(data), importLimits)
	case "yubikeycsv":
		recs, fails, err = tokenfile.ParseYubikeyCSV(bytes.NewReader(data), importLimits)
	case "pskc":
		var opt tokenfile.PSKCOptions
		if psk, _ := c.p.str("psk"); psk != "" {
			if opt.PresharedKey, err = hex.DecodeString(strings.TrimSpace(psk)); err != nil {
				return answer{}, apierr.New(apierr.Parameter, "The preshared key (psk) must be hex.")
			}
		}
		opt.Password, _ = c.p.str("password")
		opt.ValidateMAC, _ = c.p.str("pskcValidateMAC")
		recs, fails, err = tokenfile.ParsePSKC(bytes.NewReader(data), opt, importLimits)
	default:
		return answer{}, apierr.New(apierr.TokenImport, "Unknown file type: "+typ+" (known: oathcsv, yubikeycsv, pskc)")
	}
	switch {
	case errors.Is(err, tokenfile.ErrTooLarge), errors.Is(err, tokenfile.ErrMalformed):
		return answer{}, apierr.New(apierr.TokenImport, err.Error())
	case err != nil:
		return answer{}, err
	}
	toImport := make([]token.ImportRecord, len(recs))
	for i, r := range recs {
		toImport[i] = token.ImportRecord(r)
	}
	n, failed := c.a.s.Tokens().Import(c.ctx, toImport, realms)
	notImported := []map[string]any{}
	for _, f := range fails {
		notImported = append(notImported, map[string]any{"serial": f.Serial, "line": f.Line, "reason": f.Reason})
	}
	for _, f := range failed {
		notImported = append(notImported, map[string]any{"serial": f.Serial, "reason": f.Reason})
	}
	c.entry.Info = audit.Text("imported "+strconv.Itoa(n)+" tokens", 256)
	return answer{value: map[string]any{"n_imported": n, "n_not_imported": len(notImported)},
		detail: map[string]any{"not_imported": notImported}}, nil
}
