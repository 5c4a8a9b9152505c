package secret

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// KeySize is the length in bytes of an encryption key: AES-256.
const KeySize = 32

// keyFileMode is the mode of a key file we create.
const keyFileMode fs.FileMode = 0o400

// LoadOrCreateKeyFile reads the raw 32-byte key at path, or creates it from
// rnd when the file does not exist, so the first start of a server makes its
// own key and later starts reuse it. created reports that the file was made
// by this call. A new file is written exclusively (a concurrent creator
// wins and its key is read instead) with mode 0400, and the file and its
// directory are synced before the key is returned.
//
// A key file that group or others may access is refused: its key must be
// considered exposed, and the error says to chmod it to 0400 (0600 is also
// accepted). rnd nil means crypto/rand.Reader.
func LoadOrCreateKeyFile(path string, rnd io.Reader) (key []byte, created bool, err error) {
	if path == "" {
		return nil, false, errors.New("secret: key file: empty path")
	}
	key, err = readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	key, err = createKeyFile(path, rnd)
	if errors.Is(err, fs.ErrExist) {
		// Someone else created it between our read and our create.
		key, err = readKeyFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("secret: key file %s was removed while being created: %w", path, err)
		}
		return key, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// readKeyFile returns an error wrapping fs.ErrNotExist when path is missing.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("secret: key file %s cannot be opened: %w", path, err)
	}
	defer f.Close()

	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secret: key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secret: key file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("secret: key file %s has mode %04o, so group or others may access it; "+
			"refusing to use it: run chmod 0400 %s (0600 is also accepted) and consider the key exposed",
			path, perm, path)
	}

	// Read one byte more than a key, so a longer file is detected without
	// reading an arbitrarily large one.
	buf := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, buf)
	switch {
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
	default:
		return nil, fmt.Errorf("secret: key file %s cannot be read: %w", path, err)
	}
	if n != KeySize {
		size := fi.Size()
		hint := ""
		if size == 2*KeySize || size == 2*KeySize+1 {
			hint = " (it may be hex-encoded; the file must hold the raw bytes)"
		} else if size == 44 || size == 45 {
			hint = " (it may be base64-encoded; the file must hold the raw bytes)"
		}
		return nil, fmt.Errorf("secret: key file %s has %d bytes, want exactly %d raw bytes%s", path, size, KeySize, hint)
	}
	return buf[:KeySize:KeySize], nil
}

func createKeyFile(path string, rnd io.Reader) ([]byte, error) {
	// Draw the key first, so a failing source leaves no empty file behind.
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(rnd, key); err != nil {
		return nil, fmt.Errorf("secret: key file %s: reading random key: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, keyFileMode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("secret: key file %s cannot be created: %w", path, err)
	}
	werr := writeKey(f, key)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("secret: key file %s cannot be written: %w", path, werr)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("secret: key file %s: syncing its directory: %w", path, err)
	}
	return key, nil
}

func writeKey(f *os.File, key []byte) error {
	// The umask may only have removed bits; set the mode exactly anyway.
	if runtime.GOOS != "windows" {
		if err := f.Chmod(keyFileMode); err != nil {
			return err
		}
	}
	if _, err := f.Write(key); err != nil {
		return err
	}
	return f.Sync()
}

// syncDir makes the new directory entry durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for sync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
