// Command radius embeds authsrv's RADIUS server: a passwd user with an HOTP token, a NAS on loopback, and one Access-Request sent with layeh's client.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	rad "layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/radius"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
)

func main() {
	dir := must(os.MkdirTemp("", "authsrv-radius"))
	defer os.RemoveAll(dir)
	s := must(authsrv.New(authsrv.WithDataDir(dir)))
	defer s.Close()
	ctx, local, passwd, key := context.Background(), caller.Caller{}, filepath.Join(dir, "passwd"), []byte("12345678901234567890")
	must(0, os.WriteFile(passwd, []byte("alice:x:1000:1000:Alice:/home/alice:/bin/sh\n"), 0o600))
	must(s.Ops().SetResolver(ctx, local, "local", map[string]string{"type": "passwdresolver", "fileName": passwd}))
	must(s.Ops().SetRealm(ctx, local, "example", []realm.Entry{{Name: "local"}}))
	must(s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "HOTP0001", User: authsrv.Target{User: "alice", Realm: "example"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", key), "pin": "1234"}}))
	// The RADIUS server knows one NAS, this program, whose users are in realm example.
	secret := []byte("nas-shared-secret")
	srv := must(radius.New(radius.Config{Checker: s.Validator(),
		Clients: []radius.Client{{Network: netip.MustParsePrefix("127.0.0.1/32"), Secret: secret, Realm: "example"}}}))
	conn := must(net.ListenPacket("udp", "127.0.0.1:0"))
	go srv.Serve(ctx, conn)
	// The NAS: PAP with a Message-Authenticator (HMAC-MD5 of the packet, RFC 3579), which the server requires.
	p := rad.New(rad.CodeAccessRequest, secret)
	must(0, rfc2869.MessageAuthenticator_Set(p, make([]byte, 16)))
	must(0, rfc2865.UserName_SetString(p, "alice"))
	must(0, rfc2865.UserPassword_SetString(p, "1234"+otp.HOTP(key, 0, 6, otp.SHA1)))
	mac := hmac.New(md5.New, secret)
	mac.Write(must(p.Encode()))
	must(0, rfc2869.MessageAuthenticator_Set(p, mac.Sum(nil)))
	answer := must(rad.Exchange(ctx, p, conn.LocalAddr().String()))
	fmt.Printf("alice, PIN + OTP over RADIUS: %s (%s)\n", answer.Code, rfc2865.ReplyMessage_GetString(answer))
}

func must[T any](v T, rest ...any) T { // stops at the error, the last result of a call
	if err, _ := rest[len(rest)-1].(error); err != nil {
		log.Fatal(err)
	}
	return v
}
