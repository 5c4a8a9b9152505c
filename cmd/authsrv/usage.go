package main

import (
	"fmt"
	"strings"
)

// command is one line of the command list that "authsrv -h" prints.
type command struct {
	use  string // the command and its arguments
	does string // what it does, short enough for one line
}

// commands lists every subcommand run dispatches, one line each; a test
// checks that none is missing.
var commands = []command{
	{"serve", "run the server (the default; creates the data directory on first start)"},
	{"admin add NAME", "create a local administrator (password from stdin or a prompt)"},
	{"admin list", "list the local administrators"},
	{"admin delete NAME", "delete a local administrator"},
	{"admin passwd NAME", "set a local administrator's password"},
	{"admin disable|enable NAME", "disable (its tokens stop working at once) or enable an administrator"},
	{"jwt rotate [-drop-old]", "add a JWT signing key (the old ones verify until their tokens expire)"},
	{"jwt list", "list the JWT signing keys"},
	{"api createtoken [-validity DAYS]", "print an API key (a validate JWT) for the api_key_required policy"},
	{"backup [-out FILE]", "write a consistent backup (works while the server runs)"},
	{"restore [-force] FILE", "restore a backup into the data directory"},
	{"audit verify [-db FILE]", "check the audit log's hash chain, signatures and checkpoints"},
	{"compact", "shrink the store file to its data (stop the server first)"},
	{"store copy -from SRC -to DST [-force]", "copy all data between a bbolt file and PostgreSQL, either way, and verify it"},
	{"import privacyidea", "bring a privacyIDEA installation (its database and encKey) into a new data directory"},
	{"config check FILE", "check a configuration file (-config): prints ok, or the bad key and line"},
	{"ssh-keys UNIXUSER", "print a user's SSH keys for OpenSSH's AuthorizedKeysCommand"},
	{"version", "print the version"},
	{"help", "print this list (also -h)"},
}

// usage is the text of "authsrv -h".
var usage = usageText(commands)

func usageText(cmds []command) string {
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.use))
	}
	var b strings.Builder
	b.WriteString("usage: authsrv [command] [flags]\n\ncommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.use, c.does)
	}
	b.WriteString(`
Run "authsrv COMMAND -h" for a command's flags. Every flag can also be set
as AUTHSRV_<FLAG> in the environment, with dashes as underscores (for
example AUTHSRV_DATA_DIR); flags win.

The data directory (-data-dir) is ` + CheckoutDataDir + `, or, when systemd runs
authsrv as a service, $STATE_DIRECTORY or ` + ServiceDataDir + `. Only serve
creates it; every other command refuses one that does not exist.
`)
	return b.String()
}

// isHelp reports whether arg asks for the command list.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
