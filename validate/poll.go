package validate

import (
	"context"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

// Poll is /validate/polltransaction: Value is true once a challenge of
// r.TransactionID was answered correctly and not yet used. It writes its
// audit entry.
func (v *Validator) Poll(ctx context.Context, r Request) (Response, error) {
	a := v.newAuditor(r, ActionPoll, EventPoll, false)
	var res Response
	err := v.pre(ctx, a, &r)
	if err == nil {
		res, err = v.poll(ctx, r)
	}
	res, err = a.finish(ctx, res, err)
	if perr := v.post(ctx, a, res, err); perr != nil {
		return Response{}, perr
	}
	return res, err
}

// poll is Poll before the audit.
func (v *Validator) poll(ctx context.Context, r Request) (Response, error) {
	txid := strings.TrimSpace(r.TransactionID)
	if txid == "" {
		return Response{}, apierr.MissingParameter("transaction_id")
	}
	chs, err := v.cfg.Tokens.Challenges(ctx, token.ChallengeFilter{TransactionID: txid})
	if err != nil {
		return Response{}, err
	}
	ok := false
	for _, ch := range chs {
		ok = ok || ch.OTPValid
	}
	res := Response{Value: ok, ChallengeStatus: "pending"}
	if ok {
		res.ChallengeStatus = "accept"
	}
	return res, nil
}
