// Command embed uses authsrv as a library: a passwd user gets an HOTP token and authenticates without HTTP (as caller.Caller{}, a trusted local administrator: no rights checked, every change audited).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

func main() {
	dir := must(os.MkdirTemp("", "authsrv-embed"))
	defer os.RemoveAll(dir)
	s := must(authsrv.New(authsrv.WithDataDir(dir)))
	defer s.Close()
	ctx, local, passwd, key := context.Background(), caller.Caller{}, filepath.Join(dir, "passwd"), []byte("12345678901234567890")
	must(0, os.WriteFile(passwd, []byte("alice:x:1000:1000:Alice:/home/alice:/bin/sh\n"), 0o600))
	must(s.Ops().SetResolver(ctx, local, "local", map[string]string{"type": "passwdresolver", "fileName": passwd}))
	must(s.Ops().SetRealm(ctx, local, "example", []realm.Entry{{Name: "local"}}))
	must(s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "HOTP0001", User: authsrv.Target{User: "alice", Realm: "example"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", key), "pin": "1234"}}))
	for _, code := range []string{otp.HOTP(key, 0, 6, otp.SHA1), "000000"} {
		fmt.Println("alice, PIN + OTP accepted:", must(s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "example", Pass: "1234" + code})).Value)
	}
}

func must[T any](v T, rest ...any) T { // stops at the error, the last result of a call
	if err, _ := rest[len(rest)-1].(error); err != nil {
		log.Fatal(err)
	}
	return v
}
