package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/piimport"
)

// relocList is the repeatable -relocate OLD=NEW flag.
type relocList map[string]string

func (r relocList) String() string {
	parts := make([]string, 0, len(r))
	for k, v := range r {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (r relocList) Set(v string) error {
	old, now, ok := strings.Cut(v, "=")
	if !ok || old == "" || now == "" {
		return errors.New("want OLD=NEW (a path stored in privacyIDEA's database, and where it is now)")
	}
	if !filepath.IsAbs(old) {
		return fmt.Errorf("%s: the stored path is absolute", old)
	}
	abs, err := filepath.Abs(now)
	if err != nil {
		return err
	}
	r[filepath.Clean(old)] = abs
	return nil
}

// importCmd is "import privacyidea": it brings a privacyIDEA installation
// into a new data directory and prints what it brought over.
func (e *env) importCmd(args []string) error {
	if len(args) == 0 || args[0] != "privacyidea" {
		fmt.Fprint(e.stderr, "usage: authsrv import privacyidea -db URL -enckey FILE [-pepper-file FILE] [-pi-config FILE] [-relocate OLD=NEW]... [-dry-run]\n")
		return errUsage
	}
	var c common
	fs := e.flags("import", &c)
	source := fs.String("db", "", "privacyIDEA's database: its SQLALCHEMY_DATABASE_URI (sqlite:////path, mysql+pymysql://..., postgresql://...) or a SQLite file (default: from -pi-config)")
	encFile := fs.String("enckey", "", "privacyIDEA's encKey file, PI_ENCFILE (default: from -pi-config)")
	pepperFile := fs.String("pepper-file", "", "a file holding privacyIDEA's PI_PEPPER, for the local administrators' passwords (default: from -pi-config; without it they are not imported)")
	piConfig := fs.String("pi-config", "", "privacyIDEA's pi.cfg: -db, -enckey and the pepper default to its SQLALCHEMY_DATABASE_URI, PI_ENCFILE and PI_PEPPER")
	reloc := relocList{}
	fs.Var(reloc, "relocate", "OLD=NEW: a path stored in privacyIDEA's database (a passwd or hosts file, a CA directory) and where it is now; repeatable")
	dryRun := fs.Bool("dry-run", false, "import into a throw-away store and print the table: write nothing")
	fileRoots := &c.fileRoots
	fs.Var(fileRoots, "file-root", "directory tree the imported passwd files may lie in (repeatable; default "+DefaultFileRoot+" and the data directory's files subfolder)")
	if err := e.parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	var pepper []byte
	if *piConfig != "" {
		cfg, err := readPIConfig(*piConfig)
		if err != nil {
			return err
		}
		if *source == "" {
			*source = cfg["SQLALCHEMY_DATABASE_URI"]
		}
		if *encFile == "" {
			*encFile = cfg["PI_ENCFILE"]
		}
		if p := cfg["PI_PEPPER"]; p != "" && *pepperFile == "" {
			pepper = []byte(p)
		}
	}
	if *source == "" || *encFile == "" {
		return errors.New("give privacyIDEA's database (-db) and encKey file (-enckey), or its pi.cfg (-pi-config)")
	}
	encKey, err := os.ReadFile(*encFile)
	if err != nil {
		return fmt.Errorf("encKey file: %w", err)
	}
	if *pepperFile != "" {
		b, err := os.ReadFile(*pepperFile)
		if err != nil {
			return fmt.Errorf("pepper file: %w", err)
		}
		pepper = bytes.TrimRight(b, "\r\n")
	}
	if err := c.notOnPostgres("import", "import into a new data directory, then \"authsrv store copy -from DATADIR -to postgres://...\""); err != nil {
		return err
	}
	if err := c.checkRoots(); err != nil {
		return err
	}
	log, err := e.logger(&c)
	if err != nil {
		return err
	}
	opts, err := c.options(log)
	if err != nil {
		return err
	}
	res, err := piimport.Import(e.ctx, piimport.Options{
		Source:        *source,
		EncKey:        encKey,
		Pepper:        pepper,
		DataDir:       c.dataDir,
		DryRun:        *dryRun,
		Relocate:      reloc,
		ServerOptions: opts,
	})
	if err != nil {
		return err
	}
	if err := res.WriteTable(e.stdout); err != nil {
		return err
	}
	n := res.Imported()
	if *dryRun {
		fmt.Fprintf(e.stdout, "dry run of privacyIDEA %s: %d objects would be imported (%d not); nothing was written\n", res.Version, n, len(res.Rows)-n)
		return nil
	}
	fmt.Fprintf(e.stdout, "imported %d objects of privacyIDEA %s into %s (%d not imported)\n", n, res.Version, res.DataDir, len(res.Rows)-n)
	return nil
}

// readPIConfig reads the string settings of a pi.cfg: lines
// NAME = "value" or NAME = 'value'. pi.cfg is Python; anything else
// (numbers, lists, expressions) is left out, and a setting this command
// needs that is not a plain string must be given by its flag.
func readPIConfig(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pi.cfg: %w", err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, val, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if len(val) < 2 || (val[0] != '"' && val[0] != '\'') {
			continue
		}
		s, err := strconv.Unquote(`"` + strings.ReplaceAll(val[1:len(val)-1], `"`, `\"`) + `"`)
		if err != nil || val[len(val)-1] != val[0] {
			continue
		}
		out[name] = s
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pi.cfg: %w", err)
	}
	return out, nil
}
