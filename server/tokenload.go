package server

import (
	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
)

// postTokenLoad is POST /token/load/{filename} (admin): the form file
// "file" in the format "type" (oathcsv, yubikeycsv, pskc; pskc with "psk"
// as hex AES key or "password", and "pskcValidateMAC"), imported into the
// realms "tokenrealms". The value is privacyIDEA's n_imported and
// n_not_imported, plus n_not_attempted: the records after the point where
// an import stopped at its deadline (detail "stopped" says why), which a
// second upload of the file brings in.
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
	req := authsrv.TokenImport{Format: typ, File: data, Realms: realms}
	req.Name, _ = c.p.str("filename")
	req.PSK, _ = c.p.str("psk")
	req.Password, _ = c.p.str("password")
	req.ValidateMAC, _ = c.p.str("pskcValidateMAC")
	res, err := c.a.s.Ops().ImportTokens(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	notImported := []map[string]any{}
	for _, f := range res.NotImported {
		m := map[string]any{"serial": f.Serial, "reason": f.Reason}
		if f.Line > 0 {
			m["line"] = f.Line
		}
		notImported = append(notImported, m)
	}
	detail := map[string]any{"not_imported": notImported}
	if res.Stopped != "" {
		detail["stopped"] = res.Stopped
	}
	return answer{value: map[string]any{"n_imported": res.Imported, "n_not_imported": len(notImported), "n_not_attempted": res.NotAttempted},
		detail: detail}, nil
}
