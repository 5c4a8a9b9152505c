package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/authsrv/authsrv"
)

// jwtCmd is "jwt rotate" and "jwt list": the JWT key ring of the data
// directory, through a running server's control socket when one holds the
// directory (it signs with the new key at once), else directly.
func (e *env) jwtCmd(args []string) error {
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "list") {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	sub := args[0]
	var c common
	fs := e.flags("jwt "+sub, &c)
	var opt authsrv.JWTRotation
	if sub == "rotate" {
		fs.BoolVar(&opt.DropOld, "drop-old", false, "drop the older keys at once: every session and API key signed before is refused (a key that leaked)")
	}
	if err := e.parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := c.requireDataDir(false); err != nil {
		return err
	}
	// A directory without keys is no server's yet: rotating would make one.
	if !hasJWTKey(c.dataDir) {
		return fmt.Errorf("no JWT key in %s (start the server once to create it)", c.dataDir)
	}
	s, cc, err := e.open(&c)
	if err != nil {
		return err
	}
	if s != nil {
		defer func() { _ = s.Close() }()
	}
	if sub == "rotate" {
		var k authsrv.JWTKey
		if s != nil {
			k, err = s.Ops().RotateJWTKey(e.ctx, cliCaller, opt)
		} else {
			k, err = cc.RotateJWTKey(e.ctx, opt)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "new JWT key %s signs from now on\n", k.KID)
	}
	var keys []authsrv.JWTKey
	if s != nil {
		keys = s.JWTKeys()
	} else if keys, err = cc.JWTKeys(e.ctx); err != nil {
		return err
	}
	for _, k := range keys {
		if sub == "rotate" && k.Legacy && !k.Current {
			fmt.Fprintf(e.stderr, "tokens without a key id (API keys created before the key ring) verify with %s until %s only: create new API keys (authsrv api createtoken) before then\n",
				k.KID, k.VerifyUntil.UTC().Format(time.RFC3339))
		}
	}
	for _, k := range keys {
		state := "current"
		if !k.Current {
			state = "verifies until " + k.VerifyUntil.UTC().Format(time.RFC3339)
		}
		legacy := ""
		if k.Legacy {
			legacy = "\talso tokens without kid"
		}
		fmt.Fprintf(e.stdout, "%s\tcreated %s\t%s%s\n", k.KID, k.Created.UTC().Format(time.RFC3339), state, legacy)
	}
	return nil
}

// hasJWTKey reports whether dir holds a JWT key ring or key file.
func hasJWTKey(dir string) bool {
	for _, name := range []string{authsrv.JWTKeysFile, authsrv.JWTKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
