package machine

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
)

// paramFilename is the hosts resolver's one parameter.
const paramFilename = "filename"

// maxHostsFile caps the hosts file a resolver reads (a hosts file of
// 16 MiB holds some 300 000 machines).
const maxHostsFile = 16 << 20

func hostsKind() kind {
	return kind{
		params: []string{paramFilename},
		validate: func(r *Resolvers, cfg map[string]string) error {
			name := cfg[paramFilename]
			if name == "" {
				return apierr.MissingParameter(paramFilename)
			}
			if err := r.files.Check(name); err != nil {
				return apierr.New(apierr.Parameter, "The hosts file is refused: "+fileroot.Describe(err, name))
			}
			return nil
		},
		build: func(_ context.Context, r *Resolvers, name string, cfg map[string]string) (backend, error) {
			return newHosts(name, cfg[paramFilename], r.files), nil
		},
		test: func(context.Context, *Resolvers, map[string]string) (bool, string) {
			return false, "Not Implemented"
		},
	}
}

// hostsFile is a machine resolver on a file in /etc/hosts format: each
// line "<ip> <hostname> [<alias>...]"; lines with fewer than two columns
// and comments are skipped, the rest of a line after "#" is a comment.
// The machine id is the IP text as written. The file is read again when
// it changed (another file, size or modification time), and parsed
// machines are kept until then.
type hostsFile struct {
	name  string
	path  string
	files fileroot.Confinement

	mu   sync.Mutex
	stat fileStat
	list []Machine
}

var _ backend = (*hostsFile)(nil)

func newHosts(name, path string, files fileroot.Confinement) *hostsFile {
	return &hostsFile{name: name, path: path, files: files}
}

// fileStat identifies one version of the file.
type fileStat struct {
	fi    fs.FileInfo
	size  int64
	mtime time.Time
}

func (a fileStat) same(b fileStat) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) && a.size == b.size && a.mtime.Equal(b.mtime)
}

// load returns the file's machines, reading the file when it changed. A
// file that cannot be opened under the file roots, or is too large, or
// holds a line whose first column is no IP address, is an error.
func (h *hostsFile) load() ([]Machine, error) {
	f, err := h.files.Open(h.path)
	if err != nil {
		return nil, h.fileErr(fileroot.Describe(err, h.path))
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, h.fileErr(fileroot.Describe(err, h.path))
	}
	st := fileStat{fi: fi, size: fi.Size(), mtime: fi.ModTime()}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.list != nil && h.stat.same(st) {
		return h.list, nil
	}
	if fi.Size() > maxHostsFile {
		return nil, h.fileErr(fmt.Sprintf("The file has %d bytes, more than the limit of %d bytes.", fi.Size(), maxHostsFile))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHostsFile+1))
	if err != nil {
		return nil, h.fileErr(fileroot.Describe(err, h.path))
	}
	if len(data) > maxHostsFile {
		return nil, h.fileErr(fmt.Sprintf("The file has more than the limit of %d bytes.", maxHostsFile))
	}
	list, err := parseHosts(h.name, string(data))
	if err != nil {
		return nil, h.fileErr(err.Error())
	}
	h.stat, h.list = st, list
	return list, nil
}

func (h *hostsFile) fileErr(reason string) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf("The hosts file %s of the machine resolver %s cannot be used: %s", h.path, h.name, reason))
}

// parseHosts reads a hosts file's text.
func parseHosts(resolverName, text string) ([]Machine, error) {
	out := []Machine{}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %q is not an IP address", i+1, truncate(fields[0], 64))
		}
		out = append(out, Machine{ID: fields[0], Hostname: fields[1:], IP: addr.String(), Resolver: resolverName})
	}
	return out, nil
}

// truncate cuts s to at most n bytes (for error texts).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func (h *hostsFile) machines(_ context.Context, _ MachineFilter) ([]Machine, error) {
	list, err := h.load()
	if err != nil {
		return nil, err
	}
	out := make([]Machine, len(list))
	for i, m := range list {
		out[i] = m.clone()
	}
	return out, nil
}

func (h *hostsFile) named(_ context.Context, hostname string) ([]Machine, error) {
	list, err := h.load()
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, m := range list {
		for _, n := range m.Hostname {
			if strings.EqualFold(n, hostname) {
				out = append(out, m.clone())
				break
			}
		}
	}
	return out, nil
}

func (h *hostsFile) get(_ context.Context, id string) (Machine, bool, error) {
	list, err := h.load()
	if err != nil {
		return Machine{}, false, err
	}
	for _, m := range list {
		if m.ID == id {
			return m.clone(), true, nil
		}
	}
	return Machine{}, false, nil
}

func (h *hostsFile) close() {}

// clone copies m's hostname list, so that callers cannot change the
// cache.
func (m Machine) clone() Machine {
	m.Hostname = append([]string(nil), m.Hostname...)
	return m
}
