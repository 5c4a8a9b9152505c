package eventing

import (
	"context"
	"strings"

	"github.com/rs/zerolog"
)

const (
	defaultLoggerName = "pi-eventlogger"
	defaultLogMessage = "event={action} triggered"
)

// loggingLevels maps the level option to zerolog's levels.
var loggingLevels = map[string]zerolog.Level{
	"ERROR": zerolog.ErrorLevel, "WARNING": zerolog.WarnLevel, "INFO": zerolog.InfoLevel, "DEBUG": zerolog.DebugLevel,
}

// loggingModule is the Logging module: it writes one line to the server's log.
// privacyIDEA names a Python logger; here the name is the line's logger
// field. The message takes the notification tags except the secret ones
// ({pin}, {registrationcode} and the enrollment URLs stay as written).
type loggingModule struct{ s *Service }

func newLogging(s *Service) Module { return &loggingModule{s: s} }

var _ Module = (*loggingModule)(nil)

func (l *loggingModule) Name() string        { return "Logging" }
func (l *loggingModule) Positions() []string { return []string{Post, Pre} }
func (l *loggingModule) DefaultAbort() bool  { return false }

func (l *loggingModule) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{"logging": {
		"name": {Type: "str", Description: "The logger name, written as the logger field (default " + defaultLoggerName + ")."},
		"message": {Type: "str", Description: "The message; it may contain the notification tags except {pin}, " +
			"{registrationcode} and the enrollment URLs (default " + defaultLogMessage + ")."},
		"level": {Type: "str", Description: "The level of the line (default INFO).", Value: []string{"ERROR", "WARNING", "INFO", "DEBUG"}},
	}}, nil
}

// loggingLevel returns the level an option names ("" is INFO).
func loggingLevel(v string) (zerolog.Level, bool) {
	if strings.TrimSpace(v) == "" {
		return zerolog.InfoLevel, true
	}
	lv, ok := loggingLevels[strings.ToUpper(strings.TrimSpace(v))]
	return lv, ok
}

func (l *loggingModule) Check(_ context.Context, d Definition) error {
	if _, ok := loggingLevel(d.Options["level"]); !ok {
		return paramErr("The level must be one of ERROR, WARNING, INFO or DEBUG.")
	}
	return nil
}

func (l *loggingModule) Do(ctx context.Context, r *Run) error {
	if !strings.EqualFold(r.Def.Action, "logging") {
		return paramErr("Unknown action for Logging: " + r.Def.Action)
	}
	o := r.Def.Options
	lv, ok := loggingLevel(o["level"])
	if !ok {
		return paramErr("The level must be one of ERROR, WARNING, INFO or DEBUG.")
	}
	log := l.s.cfg.Log
	if log.GetLevel() > lv {
		return nil // the line would be dropped: skip building it
	}
	name := o["name"]
	if name == "" {
		name = defaultLoggerName
	}
	msg := o["message"]
	if msg == "" {
		msg = defaultLogMessage
	}
	msg = replaceTags(msg, withoutSecrets(r.Tags(ctx, false)))
	log.WithLevel(lv).Str("component", "eventing").Str("logger", name).Str("event", r.Call.Event).
		Str("handler", r.Def.Name).Str("request_id", r.Call.Caller.RequestID).Msg(msg)
	return nil
}
