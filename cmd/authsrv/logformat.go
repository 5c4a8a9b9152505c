package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// logFormatUsage is the -log-format flag's help.
const logFormatUsage = "log format: json (one JSON object a line, for collectors) or text (one line a message for people; in colour on a terminal)"

// logger is the command's logger on standard error, in c's -log-level
// and -log-format.
func (e *env) logger(c *common) (zerolog.Logger, error) {
	return newLogger(e.stderr, c.logLevel, c.logFormat)
}

// newLogger builds a logger writing to w. The text format goes through
// zerolog's ConsoleWriter, with colours only when w is a terminal (the
// journal and log files get no escape sequences) and full timestamps.
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("log level %q: %w", level, err)
	}
	switch format {
	case "json":
	case "text":
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: time.RFC3339}
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q: want json or text", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
