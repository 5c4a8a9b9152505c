package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/radius"
)

// radiusFlags are serve's flags of the built-in RADIUS server (off unless
// -radius-listen is given).
type radiusFlags struct {
	listen, clients, mapping string
}

func (r *radiusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.listen, "radius-listen", "", "UDP address of the built-in RADIUS server, e.g. 127.0.0.1:1812 (default: off; needs -radius-clients)")
	fs.StringVar(&r.clients, "radius-clients", "", "file of the RADIUS clients, one a line: ADDRESS-OR-CIDR SECRET|secret_file=PATH [realm=REALM] [legacy] (legacy: no Message-Authenticator required); mode 0600 when it holds secrets")
	fs.StringVar(&r.mapping, "radius-mapping", "", "file of attribute mappings into Accept and Challenge answers, one a line: KEY = Attribute (serial = Class, user.email = Reply-Message) (default: none)")
}

// config checks the flags and reads the files: nil when RADIUS is off.
func (r *radiusFlags) config(log zerolog.Logger) (*radius.Config, error) {
	if r.listen == "" {
		if r.clients != "" || r.mapping != "" {
			return nil, errors.New("-radius-clients and -radius-mapping need -radius-listen")
		}
		return nil, nil
	}
	if r.clients == "" {
		return nil, errors.New("-radius-listen needs -radius-clients")
	}
	clients, err := radius.LoadClients(r.clients)
	if err != nil {
		return nil, fmt.Errorf("-radius-clients: %w", err)
	}
	cfg := &radius.Config{Clients: clients, Log: log}
	if r.mapping != "" {
		if cfg.Mapping, err = radius.LoadMapping(r.mapping); err != nil {
			return nil, fmt.Errorf("-radius-mapping: %w", err)
		}
	}
	return cfg, nil
}

// radiusListener is the running RADIUS server.
type radiusListener struct {
	conn net.PacketConn
	done chan error
}

// startRADIUS serves cfg's clients with checker on the -radius-listen
// address until ctx is done; nil when RADIUS is off.
func (r *radiusFlags) start(ctx context.Context, cfg *radius.Config, checker radius.Checker) (*radiusListener, error) {
	if cfg == nil {
		return nil, nil
	}
	cfg.Checker = checker
	srv, err := radius.New(*cfg)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenPacket("udp", r.listen)
	if err != nil {
		return nil, fmt.Errorf("-radius-listen: %w", err)
	}
	l := &radiusListener{conn: conn, done: make(chan error, 1)}
	go func() { l.done <- srv.Serve(ctx, conn) }()
	return l, nil
}

// addr is the UDP address served.
func (l *radiusListener) addr() string { return l.conn.LocalAddr().String() }

// wait lets the requests in flight finish (Serve returns once ctx, the
// serve context, is done) or gives up when drain is done, and closes the
// socket.
func (l *radiusListener) wait(drain context.Context) error {
	if l == nil {
		return nil
	}
	defer func() { _ = l.conn.Close() }()
	select {
	case err := <-l.done:
		return err
	case <-drain.Done():
		return fmt.Errorf("RADIUS requests in flight: %w", drain.Err())
	}
}
