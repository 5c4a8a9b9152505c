package eventing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/user"
)

// The recipient types of the UserNotification options To and reply_to.
const (
	toTokenOwner    = "tokenowner"
	toLoggedInUser  = "logged_in_user"
	toInternalAdmin = "internal admin"
	toAdminRealm    = "admin realm"
	toEmail         = "email"
)

// Texts of UserNotification.
const (
	defaultSubject = "An action was performed on your token."
	defaultBody    = `Hello {user},

the action {action} was performed on your token {serial} on {date} at {time}.

You can review your tokens here:
{url}
`
	// qrCID is how a template names the attached QR code image
	// (<img src="cid:token_image">), as privacyIDEA's attachment is named.
	qrCID = "cid:token_image"
	// maxNotificationFile caps the body savefile writes.
	maxNotificationFile = 1 << 20
)

// errNoRecipient is the cause of a notification that has nobody to go to:
// the handler fails (and is audited as failed), the operation goes on.
var errNoRecipient = apierr.New(apierr.ConfigAdmin, "no recipient")

// userNotification is the UserNotification module: it tells someone about
// an operation by e-mail or SMS, or writes a file for another program to
// pick up. It runs after the operation committed (or before it began), so
// the message is sent outside any store transaction and never twice.
type userNotification struct{ s *Service }

func newUserNotification(s *Service) Module { return &userNotification{s: s} }

var _ Module = (*userNotification)(nil)

func (m *userNotification) Name() string        { return "UserNotification" }
func (m *userNotification) Positions() []string { return []string{Post, Pre} }
func (m *userNotification) DefaultAbort() bool  { return false }

// tagList names the tags for the option descriptions.
const tagList = "{admin}, {realm}, {action}, {serial}, {url}, {user}, {givenname}, {surname}, {username}, " +
	"{userrealm}, {tokentype}, {tokendescription}, {registrationcode}, {recipient_givenname}, " +
	"{recipient_surname}, {googleurl_value}, {googleurl_img}, {pushurl_value}, {pushurl_img}, " +
	"{container_url_value}, {container_url_img}, {time}, {date}, {client_ip}, {ua_browser}, {ua_string}, {pin}"

func (m *userNotification) Actions(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	var smtp, gateways, superusers []string
	if n := m.s.cfg.Notify; n != nil {
		servers, err := n.SMTPServers(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range servers {
			smtp = append(smtp, d.Identifier)
		}
		gws, err := n.Gateways(ctx, 0)
		if err != nil {
			return nil, err
		}
		for _, g := range gws {
			gateways = append(gateways, g.Name)
		}
	}
	if m.s.cfg.Realms != nil {
		superusers = m.s.cfg.Realms.Superusers()
	}
	recipients := func(prefix string, types []string, attrDefault string) map[string]OptionSpec {
		o := map[string]OptionSpec{}
		for _, t := range types {
			spec := OptionSpec{Type: "str", VisibleIf: prefix, VisibleValue: t}
			switch t {
			case toTokenOwner, toLoggedInUser:
				spec.Description = "The user attribute that holds the address (default: " + attrDefault + ")."
			case toAdminRealm:
				spec.Required = true
				spec.Description = "Every user of this realm with an address gets the notification."
				spec.Value = superusers
			case toInternalAdmin:
				spec.Description = "authsrv administrators have no address: this recipient type always fails."
			case toEmail:
				spec.Description = "A comma separated list of e-mail addresses."
			}
			o[prefix+" "+t] = spec
		}
		return o
	}
	mailTypes := []string{toTokenOwner, toLoggedInUser, toInternalAdmin, toAdminRealm, toEmail}
	sendmail := map[string]OptionSpec{
		"emailconfig": {Type: "str", Required: true, Description: "The SMTP server definition the mail is sent through.", Value: smtp},
		"mimetype":    {Type: "str", Description: "Send the mail as plain text or as HTML (tag values are HTML-escaped).", Value: []string{"plain", "html"}},
		"attach_qrcode": {Type: "bool", Description: "Show the enrollment QR code in an HTML mail (refer to it as cid:token_image, " +
			"or it is added at the end)."},
		"subject":  {Type: "str", Description: "The subject of the mail; it may contain the tags of the body. Default: " + defaultSubject},
		"reply_to": {Type: "str", Description: "The Reply-To header of the mail.", Value: append([]string{""}, mailTypes...)},
		"body": {Type: "text", Description: "The text of the mail. It may contain the tags " + tagList +
			". A body of the form file:<path> is refused: authsrv reads no template files."},
		"To": {Type: "str", Required: true, Description: "Who gets the mail (default: the token owner).", Value: mailTypes},
	}
	for k, v := range recipients("To", mailTypes, "email") {
		sendmail[k] = v
	}
	for k, v := range recipients("reply_to", mailTypes, "email") {
		sendmail[k] = v
	}
	smsTypes := []string{toTokenOwner, toLoggedInUser, toAdminRealm}
	sendsms := map[string]OptionSpec{
		"smsconfig": {Type: "str", Required: true, Description: "The SMS gateway the message is sent through.", Value: gateways},
		"body":      {Type: "text", Description: "The text of the SMS. It may contain the tags " + tagList + "."},
		"To":        {Type: "str", Required: true, Description: "Who gets the SMS (default: the token owner).", Value: smsTypes},
	}
	for k, v := range recipients("To", smsTypes, "mobile") {
		sendsms[k] = v
	}
	savefile := map[string]OptionSpec{
		"body": {Type: "text", Required: true, Description: "The content of the file. It may contain the tags " + tagList + "."},
		"filename": {Type: "str", Required: true, Description: "The name of the file below the notification spool directory. " +
			"It may contain the tags and {random}; an existing file is overwritten."},
	}
	return map[string]map[string]OptionSpec{"sendmail": sendmail, "sendsms": sendsms, "savefile": savefile}, nil
}

// Check refuses options that can never work. The action name itself is
// not checked (privacyIDEA stores any); an unknown action fails when run.
func (m *userNotification) Check(_ context.Context, d Definition) error {
	o := d.Options
	if err := checkBody(o["body"]); err != nil {
		return err
	}
	switch strings.ToLower(d.Action) {
	case "sendmail":
		if strings.TrimSpace(o["emailconfig"]) == "" {
			return apierr.MissingParameter("emailconfig")
		}
		if err := checkRecipientOption(o, "To", false); err != nil {
			return err
		}
		if err := checkRecipientOption(o, "reply_to", true); err != nil {
			return err
		}
		if mt := strings.ToLower(o["mimetype"]); mt != "" && mt != "plain" && mt != "html" {
			return paramErr("The mimetype must be plain or html.")
		}
		if strings.ContainsAny(o["subject"], "\r\n") {
			return paramErr("The subject must be one line.")
		}
	case "sendsms":
		if strings.TrimSpace(o["smsconfig"]) == "" {
			return apierr.MissingParameter("smsconfig")
		}
		if err := checkRecipientOption(o, "To", false); err != nil {
			return err
		}
	case "savefile":
		if m.s.cfg.SpoolDir == "" {
			return errNoSpoolDir
		}
		name := o["filename"]
		if strings.TrimSpace(name) == "" {
			return apierr.MissingParameter("filename")
		}
		if err := checkSpoolName(name); err != nil {
			return err
		}
	}
	return nil
}

// checkBody refuses a "file:" template. privacyIDEA reads any file the
// server can read there; authsrv's event handler service has no file
// confinement (fileroot) to read it under, and an administrator must not
// be able to mail the server's own files to anyone, so templates are
// given inline only.
func checkBody(body string) error {
	if strings.HasPrefix(body, "file:") {
		return paramErr("Body templates from files (file:<path>) are not supported: give the template text in the body option.")
	}
	return nil
}

// checkRecipientOption checks the recipient type of option key (To or
// reply_to) and the options that go with it.
func checkRecipientOption(o map[string]string, key string, replyTo bool) error {
	t, set := o[key]
	if !set || (replyTo && t == "") {
		return nil
	}
	switch t {
	case toTokenOwner, toLoggedInUser, toInternalAdmin:
	case toAdminRealm:
		if strings.TrimSpace(o[key+" "+toAdminRealm]) == "" {
			return apierr.MissingParameter(key + " " + toAdminRealm)
		}
	case toEmail:
		list := notifySplitCSV(o[key+" "+toEmail])
		if len(list) == 0 {
			return apierr.MissingParameter(key + " " + toEmail)
		}
		for _, a := range list {
			if strings.ContainsAny(a, "\r\n") {
				return paramErr(fmt.Sprintf("The %s address contains a line break.", key))
			}
			if _, err := mail.ParseAddress(a); err != nil {
				return paramErr(fmt.Sprintf("The %s address %q is not a valid e-mail address.", key, a))
			}
		}
	default:
		return paramErr(fmt.Sprintf("Unknown recipient type for %s: %s", key, t))
	}
	return nil
}

func notifySplitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (m *userNotification) Do(ctx context.Context, r *Run) error {
	o := r.Def.Options
	body := o["body"]
	if body == "" {
		body = defaultBody
	}
	if err := checkBody(body); err != nil {
		return err
	}
	switch action := strings.ToLower(r.Def.Action); action {
	case "sendmail":
		return m.sendMail(ctx, r, body)
	case "sendsms":
		return m.sendSMS(ctx, r, body)
	case "savefile":
		return m.saveFile(ctx, r, body)
	default:
		return paramErr("Unknown action for UserNotification: " + r.Def.Action)
	}
}

func (m *userNotification) notifier() (*notify.Service, error) {
	if m.s.cfg.Notify == nil {
		return nil, apierr.New(apierr.ConfigAdmin, "Notifications are not available: no notification service is configured.")
	}
	return m.s.cfg.Notify, nil
}

func (m *userNotification) sendMail(ctx context.Context, r *Run, body string) error {
	n, err := m.notifier()
	if err != nil {
		return err
	}
	o := r.Def.Options
	isHTML := strings.EqualFold(o["mimetype"], "html")
	rc, err := m.recipient(ctx, r, "To", "email")
	if err != nil {
		return err
	}
	tags := r.Tags(ctx, isHTML)
	plain := r.Tags(ctx, false)
	tags["recipient_givenname"], tags["recipient_surname"] = rc.givenname, rc.surname
	plain["recipient_givenname"], plain["recipient_surname"] = rc.givenname, rc.surname
	if isHTML {
		tags["recipient_givenname"], tags["recipient_surname"] = html.EscapeString(rc.givenname), html.EscapeString(rc.surname)
	}
	subject := o["subject"]
	if subject == "" {
		subject = defaultSubject
	}
	// The subject is a header: it takes the plain values, on one line.
	subject = strings.Map(func(c rune) rune {
		if c == '\r' || c == '\n' {
			return ' '
		}
		return c
	}, replaceTags(subject, plain))
	text := replaceTags(body, tags)
	if IsTrue(o["attach_qrcode"]) {
		text = withQRCode(text, isHTML, plain)
	}
	replyTo := ""
	if t := o["reply_to"]; t != "" {
		rt, err := m.recipient(ctx, r, "reply_to", "email")
		if err != nil {
			// The Reply-To header is a convenience: the mail still goes out.
			m.s.cfg.Log.Warn().Err(err).Str("component", "eventing").Str("handler", r.Def.Name).
				Str("request_id", r.Call.Caller.RequestID).Msg("notification: no Reply-To address")
		} else {
			// A mail has one Reply-To address here: the first one.
			replyTo = rt.addrs[0]
		}
	}
	err = n.SendMail(ctx, o["emailconfig"], notify.Mail{To: rc.addrs, Subject: subject, Body: text, HTML: isHTML, ReplyTo: replyTo})
	if err != nil {
		return err
	}
	m.s.cfg.Log.Debug().Str("component", "eventing").Str("handler", r.Def.Name).Int("recipients", len(rc.addrs)).
		Str("request_id", r.Call.Caller.RequestID).Msg("notification mail sent")
	return nil
}

// withQRCode shows the enrollment QR code in an HTML mail. notify.Mail
// has no attachments, so the image goes into the HTML as a data: URI:
// where the template refers to the attachment (cid:token_image), or else
// at the end. Plain text mails cannot show it and are left as they are.
// Only a PNG data: URI is used (never a URL to fetch).
func withQRCode(text string, isHTML bool, tags map[string]string) string {
	if !isHTML {
		return text
	}
	var img string
	for _, k := range []string{"googleurl_img", "pushurl_img", "container_url_img"} {
		if v := tags[k]; isPNGDataURI(v) {
			img = v
			break
		}
	}
	if img == "" {
		return text
	}
	if strings.Contains(text, qrCID) {
		return strings.ReplaceAll(text, qrCID, img)
	}
	return text + `<p><img src="` + img + `" alt="QR code"></p>`
}

// isPNGDataURI reports whether v is a base64 PNG data: URI (which needs no
// escaping inside an HTML attribute).
func isPNGDataURI(v string) bool {
	const prefix = "data:image/png;base64,"
	if !strings.HasPrefix(v, prefix) || len(v) == len(prefix) {
		return false
	}
	for _, c := range v[len(prefix):] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

func (m *userNotification) sendSMS(ctx context.Context, r *Run, body string) error {
	n, err := m.notifier()
	if err != nil {
		return err
	}
	o := r.Def.Options
	rc, err := m.recipient(ctx, r, "To", "mobile")
	if err != nil {
		return err
	}
	tags := r.Tags(ctx, false)
	tags["recipient_givenname"], tags["recipient_surname"] = rc.givenname, rc.surname
	text := replaceTags(body, tags)
	var errs []error
	for _, phone := range rc.addrs {
		if err := n.SendSMS(ctx, o["smsconfig"], phone, text); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	m.s.cfg.Log.Debug().Str("component", "eventing").Str("handler", r.Def.Name).Int("recipients", len(rc.addrs)).
		Str("request_id", r.Call.Caller.RequestID).Msg("notification SMS sent")
	return nil
}

// notifyRecipient is who a notification goes to: the addresses (e-mail or
// phone) and, for the tags, the name when it is one user.
type notifyRecipient struct {
	addrs              []string
	givenname, surname string
}

// recipient finds the recipient that option key (To or reply_to) names.
// attr is the user attribute of the address ("email" or "mobile"); the
// option "<key> tokenowner" or "<key> logged_in_user" may name another.
func (m *userNotification) recipient(ctx context.Context, r *Run, key, attr string) (notifyRecipient, error) {
	o := r.Def.Options
	typ := o[key]
	if typ == "" {
		typ = toTokenOwner
	}
	what := "e-mail address"
	if attr == "mobile" {
		what = "mobile number"
	}
	switch typ {
	case toTokenOwner:
		if a := strings.TrimSpace(o[key+" "+toTokenOwner]); a != "" {
			attr = a
		}
		u := r.User(ctx)
		if u.Login == "" {
			return notifyRecipient{}, fmt.Errorf("%w: the operation has no token owner", errNoRecipient)
		}
		return userRecipient(u, r.UserInfo(ctx), attr, what)
	case toLoggedInUser:
		if a := strings.TrimSpace(o[key+" "+toLoggedInUser]); a != "" {
			attr = a
		}
		cl := r.Call.Caller
		switch cl.Role {
		case caller.User:
			u := user.User{Login: cl.Name, Realm: cl.Realm, Resolver: cl.Resolver}
			return userRecipient(u, m.s.UserInfo(ctx, u), attr, what)
		case caller.Admin, caller.Local:
			// privacyIDEA's internal administrators may have an e-mail
			// address; authsrv's administrators have none.
			return notifyRecipient{}, fmt.Errorf("%w: the logged-in administrator has no %s (authsrv administrators have none)", errNoRecipient, what)
		default:
			return notifyRecipient{}, fmt.Errorf("%w: the operation has no logged-in user", errNoRecipient)
		}
	case toInternalAdmin:
		// privacyIDEA keeps an e-mail address with each internal
		// administrator; authsrv's administrators have no address, so
		// this recipient type cannot be served.
		return notifyRecipient{}, fmt.Errorf("%w: the internal administrator %q has no %s (authsrv administrators have none)",
			errNoRecipient, o[key+" "+toInternalAdmin], what)
	case toAdminRealm:
		name := strings.TrimSpace(o[key+" "+toAdminRealm])
		if name == "" {
			return notifyRecipient{}, fmt.Errorf("%w: no admin realm is configured", errNoRecipient)
		}
		if m.s.cfg.Realms == nil {
			return notifyRecipient{}, fmt.Errorf("%w: no realms are available", errNoRecipient)
		}
		users, err := m.s.cfg.Realms.Users(ctx, []string{name}, "", nil)
		if err != nil {
			return notifyRecipient{}, err
		}
		rc := notifyRecipient{givenname: "administrators of realm " + name}
		for _, l := range users {
			if a := strings.TrimSpace(l.Info.String(attr)); a != "" && !slices.Contains(rc.addrs, a) {
				rc.addrs = append(rc.addrs, a)
			}
		}
		if len(rc.addrs) == 0 {
			return notifyRecipient{}, fmt.Errorf("%w: no user of realm %s has a %s", errNoRecipient, name, what)
		}
		return rc, nil
	case toEmail:
		if attr == "mobile" {
			return notifyRecipient{}, fmt.Errorf("%w: the recipient type email gives no mobile number", errNoRecipient)
		}
		list := notifySplitCSV(o[key+" "+toEmail])
		if len(list) == 0 {
			return notifyRecipient{}, fmt.Errorf("%w: no e-mail address is configured", errNoRecipient)
		}
		return notifyRecipient{addrs: list}, nil
	default:
		return notifyRecipient{}, paramErr(fmt.Sprintf("Unknown recipient type for %s: %s", key, typ))
	}
}

// userRecipient is u with the address in attribute attr of info.
func userRecipient(u user.User, info map[string]string, attr, what string) (notifyRecipient, error) {
	a := strings.TrimSpace(info[attr])
	if a == "" {
		return notifyRecipient{}, fmt.Errorf("%w: the user %s has no %s (attribute %s)", errNoRecipient, u.String(), what, attr)
	}
	return notifyRecipient{addrs: []string{a}, givenname: info["givenname"], surname: info["surname"]}, nil
}

// errNoSpoolDir refuses savefile when the server has no spool directory.
var errNoSpoolDir = apierr.New(apierr.ConfigAdmin,
	"The notification handler cannot save files: no spool directory is configured.")

// checkSpoolName refuses a file name that does not stay below the spool
// directory: absolute, with a ".." component, empty or with a NUL byte.
func checkSpoolName(name string) error {
	if strings.IndexByte(name, 0) >= 0 || !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(name, `\`) {
		return paramErr(fmt.Sprintf("The notification file name %q is outside the spool directory.", name))
	}
	return nil
}

func (m *userNotification) saveFile(ctx context.Context, r *Run, body string) error {
	dir := m.s.cfg.SpoolDir
	if dir == "" {
		return errNoSpoolDir
	}
	name := r.Def.Options["filename"]
	if strings.TrimSpace(name) == "" {
		return apierr.MissingParameter("filename")
	}
	random, err := randomAlnum(m.s.cfg.Rand, 16)
	if err != nil {
		return err
	}
	tags := r.Tags(ctx, false)
	text := replaceTags(body, tags)
	if len(text) > maxNotificationFile {
		return paramErr("The notification file is too large.")
	}
	tags["random"] = random
	name = replaceTags(name, tags)
	if err := checkSpoolName(name); err != nil {
		return err
	}
	// os.Root keeps every step below the spool directory: a symbolic
	// link (of a directory on the way, or the file itself) that leads
	// out is refused.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return apierr.New(apierr.ConfigAdmin, "The notification spool directory cannot be opened.").Wrap(err)
	}
	defer func() { _ = root.Close() }()
	rel := filepath.FromSlash(name)
	if fi, err := root.Lstat(rel); err == nil {
		if !fi.Mode().IsRegular() {
			return paramErr(fmt.Sprintf("The notification file %q exists and is not a regular file.", name))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return spoolErr(name, err)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return spoolErr(name, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return paramErr(fmt.Sprintf("The notification file %q is not a regular file.", name))
	}
	_, werr := io.WriteString(f, text)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return apierr.New(apierr.ConfigAdmin, "The notification file could not be written.").Wrap(werr)
	}
	m.s.cfg.Log.Debug().Str("component", "eventing").Str("handler", r.Def.Name).Str("file", name).
		Str("request_id", r.Call.Caller.RequestID).Msg("notification file written")
	return nil
}

// spoolErr describes a failure to open a notification file: a path that
// leads out of the spool directory is a refusal, anything else a write
// failure.
func spoolErr(name string, err error) error {
	if strings.Contains(err.Error(), "escapes") || errors.Is(err, syscall.ELOOP) {
		return paramErr(fmt.Sprintf("The notification file name %q is outside the spool directory.", name))
	}
	return apierr.New(apierr.ConfigAdmin, "The notification file could not be written.").Wrap(err)
}

// randomAlnum returns n random letters and digits from rnd (crypto/rand
// when nil).
func randomAlnum(rnd io.Reader, n int) (string, error) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	if rnd == nil {
		rnd = rand.Reader
	}
	out := make([]byte, 0, n)
	buf := make([]byte, 32)
	for len(out) < n {
		if _, err := io.ReadFull(rnd, buf); err != nil {
			return "", fmt.Errorf("eventing: random file name: %w", err)
		}
		for _, b := range buf {
			// 248 = 4*62: values above would favour the first letters.
			if b < 248 && len(out) < n {
				out = append(out, alphabet[b%62])
			}
		}
	}
	return string(out), nil
}
