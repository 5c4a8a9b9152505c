package authsrv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/tokenfile"
	"github.com/authsrv/authsrv/token"
)

// importLimits bound token import files (a server's body limit applies
// first).
var importLimits = tokenfile.Limits{MaxBytes: 4 << 20, MaxRecords: 50000}

// importBatchSize is the most tokens one transaction of an import writes:
// a batch commits in a few milliseconds, so an import can stop at its
// deadline between two of them.
const importBatchSize = 500

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
	// NotAttempted counts the records after the point where the import
	// stopped (Stopped says why); importing the file again brings them in,
	// and refuses the serials imported already.
	NotAttempted int
	// Stopped is "" for an import that went through the whole file, else
	// why it stopped early: the deadline of ctx, the caller's
	// cancellation, or a store failure.
	Stopped string
}

// ImportTokens imports a token file (administrators, right
// "importtokens"). The tokens are written in batches of up to
// importBatchSize, each batch in one store transaction with an audit entry
// that names how many tokens it imported: all or nothing per batch,
// whatever becomes of the client. A file of one batch has one entry,
// "imported N tokens".
//
// Before each batch the import checks ctx: when ctx is done, or its
// deadline is nearer than the slowest batch took so far, it stops, and
// answers (and audits) what it imported and how many records it did not
// attempt. The HTTP server gives ctx the deadline of its answer, so a file
// too large to import in time is imported in part and reported, never cut
// off without an answer.
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
		return o.importBatches(ctx, r, toImport, req.Realms, &res)
	})
	return res, err
}

// importBatches writes recs batch by batch into res, each batch with its
// audit entry, and stops early as ImportTokens says. A store failure is
// an error while nothing was imported; after a batch has committed, it
// stops the import and is reported in res, like a deadline.
func (o *Ops) importBatches(ctx context.Context, r *opRun, recs []token.ImportRecord, realms []string, res *TokenImportResult) error {
	deadline, hasDeadline := ctx.Deadline()
	var slowest time.Duration
	batches := 0
	// final is set while the last committed entry tells the whole story
	// (the file's last batch, with every token it brought).
	final := false
	for start := 0; start < len(recs); start += importBatchSize {
		end := min(start+importBatchSize, len(recs))
		stop := ""
		switch {
		case ctx.Err() != nil:
			stop = stopReason(ctx.Err())
		case hasDeadline && time.Until(deadline) < slowest:
			stop = stopReason(context.DeadlineExceeded)
		}
		began := time.Now()
		var b *token.ImportBatch
		if stop == "" {
			b = o.s.tokens.PrepareImport(ctx, recs[start:end], realms)
			if err := ctx.Err(); err != nil {
				// The batch is incomplete (lookups failed with ctx): it
				// was not attempted.
				stop = stopReason(err)
			}
		}
		if stop != "" {
			res.NotAttempted, res.Stopped = len(recs)-start, stop
			break
		}
		for _, f := range b.Failed {
			res.NotImported = append(res.NotImported, TokenImportFailure{Serial: f.Serial, Reason: f.Reason})
		}
		serials := b.Serials()
		if len(serials) == 0 {
			continue
		}
		batches++
		total := res.Imported + len(serials)
		last := end == len(recs)
		switch {
		case last && batches == 1:
			r.Entry.Info = "imported " + strconv.Itoa(total) + " tokens"
		case last:
			r.Entry.Info = fmt.Sprintf("imported %d tokens (batch %d, the last: %d tokens in all)", len(serials), batches, total)
		default:
			r.Entry.Info = fmt.Sprintf("imported %d tokens (batch %d: %d tokens so far)", len(serials), batches, total)
		}
		if err := o.s.tokens.CommitImport(ctx, b, r.Audit); err != nil {
			batches--
			if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				// ctx ended before the transaction began: nothing of
				// the batch was written.
				res.NotAttempted, res.Stopped = len(serials)+len(recs)-end, stopReason(cerr)
				break
			}
			ae, refused := errors.AsType[*apierr.Error](err)
			if !refused && res.Imported == 0 {
				r.Entry.Info = ""
				return err
			}
			reason := "the token store failed"
			if refused {
				// A serial created since the batch was prepared: this
				// batch is refused, the next ones go on.
				reason = ae.Error()
			}
			for _, serial := range serials {
				res.NotImported = append(res.NotImported, TokenImportFailure{Serial: serial, Reason: reason})
			}
			if refused {
				continue
			}
			res.NotAttempted, res.Stopped = len(recs)-end, stopReason(err)
			break
		}
		res.Imported = total
		final = last
		slowest = max(slowest, time.Since(began))
	}
	if final {
		return nil
	}
	// The last committed entry does not describe the whole import: a
	// summary follows it. An import that stopped early did not do what
	// was asked, and its summary is a failure (the batch entries before it
	// are the successes that brought tokens in).
	if res.Stopped == "" {
		r.written = false // run writes it
		r.Entry.Info = "imported " + strconv.Itoa(res.Imported) + " tokens"
		return nil
	}
	r.Entry.Info = audit.Text(fmt.Sprintf("imported %d tokens, then stopped: %s; %d records not attempted", res.Imported, res.Stopped, res.NotAttempted), 256)
	if _, err := o.s.audit.Write(context.WithoutCancel(ctx), r.entry(false, nil)); err != nil {
		o.s.cfg.log.Error().Err(err).Str("component", "audit").Str("request_id", r.who.RequestID).Msg("audit write failed")
		return apierr.New(apierr.Server, "Internal server error.")
	}
	r.written = true
	return nil
}

// stopReason says why an import stopped before the end of its file.
func stopReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the deadline of the request came"
	case errors.Is(err, context.Canceled):
		return "the request was cancelled"
	default:
		return "the token store failed"
	}
}
