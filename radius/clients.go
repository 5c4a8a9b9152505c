package radius

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Client is a NAS the server answers: an address or network, the shared
// secret, the realm of its users and whether it may omit the
// Message-Authenticator. It holds a secret; String redacts it.
type Client struct {
	// Network is the client's address (a /32 or /128) or network.
	Network netip.Prefix
	// Secret is the shared secret (at least one byte).
	Secret []byte
	// Realm, when set, is the realm of a request whose user gave none.
	Realm string
	// Legacy accepts Access-Requests without a Message-Authenticator from
	// this client (an old NAS). A Message-Authenticator that is present
	// is verified all the same.
	Legacy bool
}

// String describes the client without its secret.
func (c Client) String() string {
	return fmt.Sprintf("radius.Client{Network: %s, Realm: %q, Legacy: %v, Secret: <redacted>}", c.Network, c.Realm, c.Legacy)
}

// GoString is String, so that %#v redacts too.
func (c Client) GoString() string { return c.String() }

// ErrClientsFile marks a clients file that cannot be used.
var ErrClientsFile = errors.New("radius clients file")

// LoadClients reads a clients file: one client per line,
//
//	ADDRESS-OR-CIDR  SECRET|secret_file=PATH  [realm=REALM]  [legacy]
//
// Blank lines and lines starting with # are ignored. A SECRET is the rest
// of the word (no spaces; put such a secret in a file). A secret file
// holds the secret alone (one trailing line break is cut); a relative
// PATH is relative to the clients file. A file that holds a secret, the
// clients file or a secret file, must not be readable by group or others.
func LoadClients(path string) ([]Client, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClientsFile, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClientsFile, err)
	}
	clients, inline, err := parseClients(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrClientsFile, path, err)
	}
	if inline && st.Mode().Perm()&0o044 != 0 {
		return nil, fmt.Errorf("%w %s: holds secrets but is readable by group or others (mode %s): chmod go-r it, or use secret_file=", ErrClientsFile, path, st.Mode().Perm())
	}
	return clients, nil
}

// readSecretFile reads a secret file, refusing one that group or others
// may read.
func readSecretFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o044 != 0 {
		return nil, fmt.Errorf("secret file %s is readable by group or others (mode %s): chmod go-r it", path, st.Mode().Perm())
	}
	return os.ReadFile(path)
}

// ParseClients parses the text of a clients file (see LoadClients); a
// relative secret_file is relative to dir.
func ParseClients(data []byte, dir string) ([]Client, error) {
	clients, _, err := parseClients(data, dir)
	return clients, err
}

// parseClients also reports whether a secret is written in the text.
func parseClients(data []byte, dir string) (clients []Client, inline bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	seen := map[netip.Prefix]bool{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, false, fmt.Errorf("line %d: want ADDRESS SECRET [realm=R] [legacy]", n)
		}
		var c Client
		if c.Network, err = parsePrefix(f[0]); err != nil {
			return nil, false, fmt.Errorf("line %d: %w", n, err)
		}
		if seen[c.Network] {
			return nil, false, fmt.Errorf("line %d: %s listed twice", n, c.Network)
		}
		seen[c.Network] = true
		if p, ok := strings.CutPrefix(f[1], "secret_file="); ok {
			if p == "" {
				return nil, false, fmt.Errorf("line %d: empty secret_file", n)
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := readSecretFile(p)
			if err != nil {
				return nil, false, fmt.Errorf("line %d: %w", n, err)
			}
			c.Secret = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		} else {
			c.Secret, inline = []byte(f[1]), true
		}
		if len(c.Secret) == 0 {
			return nil, false, fmt.Errorf("line %d: empty secret", n)
		}
		for _, opt := range f[2:] {
			switch r, isRealm := strings.CutPrefix(opt, "realm="); {
			case isRealm && r != "":
				c.Realm = r
			case opt == "legacy":
				c.Legacy = true
			default:
				return nil, false, fmt.Errorf("line %d: unknown option %q (want realm=R or legacy)", n, opt)
			}
		}
		clients = append(clients, c)
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	return clients, inline, nil
}

// parsePrefix reads an address (a host prefix) or a CIDR network.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("address %q: %w", s, err)
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("address %q: write IPv4 networks as IPv4", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address %q: %w", s, err)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// clientTable finds the client of a source address: the most specific
// network that holds it.
type clientTable []*clientState

func (t clientTable) lookup(a netip.Addr) *clientState {
	a = a.Unmap().WithZone("")
	var best *clientState
	for _, c := range t {
		if c.Network.Contains(a) && (best == nil || c.Network.Bits() > best.Network.Bits()) {
			best = c
		}
	}
	return best
}
