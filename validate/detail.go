package validate

// Detail is privacyIDEA's detail object of a /validate decision:
// nil when no_detail_on_success or no_detail_on_fail removed it.
func (res Response) Detail() map[string]any {
	if res.NoDetail {
		return nil
	}
	d := map[string]any{"message": res.Message}
	if res.Serial != "" {
		d["serial"] = res.Serial
	}
	if res.Type != "" {
		d["type"] = res.Type
	}
	if res.HasOTPLen {
		d["otplen"] = res.OTPLen
	}
	if res.NextPINChange != "" {
		d["next_pin_change"], d["pin_change"] = res.NextPINChange, res.PINChange
	}
	if len(res.Challenges) > 0 {
		multi := make([]map[string]any, len(res.Challenges))
		for i, c := range res.Challenges {
			multi[i] = challengeDetail(c)
		}
		d["multi_challenge"] = multi
		d["messages"] = res.Messages
		d["transaction_id"], d["transaction_ids"] = res.TransactionID, res.TransactionIDs
		d["client_mode"] = res.ClientMode
		if res.PreferredClientMode != "" {
			d["preferred_client_mode"] = res.PreferredClientMode
		}
		if res.Attributes != nil {
			d["attributes"] = res.Attributes
		}
		if res.Image != "" {
			d["image"] = res.Image
		}
		if res.Link != "" {
			d["link"] = res.Link
		}
		if res.Enrollment {
			d["enroll_via_multichallenge"] = true
			d["enroll_via_multichallenge_optional"] = res.EnrollmentOptional
		}
	}
	if res.UserAttributes != nil {
		d["user"] = res.UserAttributes
	}
	if res.AddResolver {
		d["user-resolver"], d["user-realm"] = res.User.Resolver, res.User.Realm
	}
	return d
}

// challengeDetail is one entry of multi_challenge.
func challengeDetail(c Challenge) map[string]any {
	m := map[string]any{"transaction_id": c.TransactionID, "serial": c.Serial, "type": c.Type,
		"client_mode": c.ClientMode, "message": c.Message}
	if len(c.Attributes) > 0 {
		m["attributes"] = c.Attributes
	}
	if c.Image != "" {
		m["image"] = c.Image
	}
	if c.Link != "" {
		m["link"] = c.Link
	}
	return m
}

// TriggerDetail is the detail of /validate/triggerchallenge: that of a
// challenge, or empty lists when no challenge was made (with the send
// error among the messages).
func (res Response) TriggerDetail() map[string]any {
	if len(res.Challenges) > 0 {
		return res.Detail()
	}
	msgs := res.Messages
	if msgs == nil {
		msgs = []string{}
	}
	return map[string]any{"messages": msgs, "multi_challenge": []map[string]any{}, "transaction_ids": []string{}}
}
