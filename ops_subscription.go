package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/subscription"
)

// rightManageSubscription is the admin right of every subscription
// operation.
const rightManageSubscription = "managesubscription"

// SubscriptionRow is a stored subscription as GET /subscriptions/ lists
// it: with the days since its end and what is in use.
type SubscriptionRow struct {
	subscription.Subscription
	// Timedelta is whole days from date_till to now: negative while the
	// subscription is in force.
	Timedelta int
	// ActiveTokens counts the active tokens that have an owner.
	ActiveTokens int
	// ActiveUsers counts the users who own an active token.
	ActiveUsers int
}

// Subscriptions lists the stored subscriptions, or those of application
// (compared without case) when it is not "", each with its timedelta and
// the counts in use (right managesubscription, event subscription_get).
func (o *Ops) Subscriptions(ctx context.Context, who caller.Caller, application string) ([]SubscriptionRow, error) {
	var out []SubscriptionRow
	err := o.readConfig(ctx, who, "subscription_get", "GET /subscriptions/"+application, rightManageSubscription, Target{},
		func(ctx context.Context, r *opRun) error {
			subs, err := o.s.Subscriptions().List(ctx, application)
			if err != nil {
				return err
			}
			u, err := o.s.SubscriptionUsage(ctx)
			if err != nil {
				return err
			}
			now := o.s.cfg.now()
			out = make([]SubscriptionRow, 0, len(subs))
			for _, sub := range subs {
				out = append(out, SubscriptionRow{Subscription: sub, Timedelta: subscription.Timedelta(sub, now),
					ActiveTokens: u.ActiveTokens, ActiveUsers: u.ActiveUsers})
			}
			return nil
		})
	return out, err
}

// SubscriptionStatus compares the subscriptions with what is in use: the
// server's state first, then each client plugin's (right
// managesubscription, event subscription_status). An expired or exceeded
// subscription carries a warning; it stops nothing.
func (o *Ops) SubscriptionStatus(ctx context.Context, who caller.Caller) (SubscriptionStatus, error) {
	var out SubscriptionStatus
	err := o.readConfig(ctx, who, "subscription_status", "GET /subscriptions/status", rightManageSubscription, Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.subscriptionStatus(ctx)
			return err
		})
	return out, err
}

// AddSubscription stores the subscription file (YAML, signed with the key
// of WithSubscriptionKey), replacing the subscription of the same
// application (right managesubscription, event subscription_save). A file
// that does not parse or whose signature does not verify, and any file
// when no key is configured, is refused with a 400 error; nothing is
// stored then.
func (o *Ops) AddSubscription(ctx context.Context, who caller.Caller, file []byte) (subscription.Subscription, error) {
	var out subscription.Subscription
	err := o.adminOnlyOp(ctx, who, "subscription_save", "POST /subscriptions/", rightManageSubscription,
		func(ctx context.Context, r *opRun) error {
			if sub, err := subscription.Parse(file); err == nil {
				r.Entry.Info = audit.Text("application: "+sub.Application, 512)
			}
			var err error
			out, err = o.s.Subscriptions().Add(ctx, file, r.Audit)
			return err
		})
	return out, err
}

// DeleteSubscription removes the subscription of application and returns
// its id, or -1 when there is none (right managesubscription, event
// subscription_delete).
func (o *Ops) DeleteSubscription(ctx context.Context, who caller.Caller, application string) (int, error) {
	id := -1
	err := o.adminOnlyOp(ctx, who, "subscription_delete", "DELETE /subscriptions/"+application, rightManageSubscription,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("application: "+application, 512)
			var err error
			id, err = o.s.Subscriptions().Delete(ctx, application, r.Audit)
			return err
		})
	return id, err
}
