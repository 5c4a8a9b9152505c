package sql

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/authsrv/authsrv/resolver"
)

// Internals for the external tests.

var (
	ValidIdent     = validIdent
	VerifyPassword = verifyPassword
	HashPassword   = hashPassword
	LikePattern    = likePattern
	ErrHashCost    = errHashCost
	ErrHashFormat  = errHashFormat
	HashTypes      = hashTypes
)

// Cond is a parsed Where condition.
type Cond struct{ Column, Op, Value string }

// ParseWhere parses a Where filter.
func ParseWhere(s string) ([]Cond, error) {
	cs, err := parseWhere(s)
	var out []Cond
	for _, c := range cs {
		out = append(out, Cond{c.column, c.op, c.value})
	}
	return out, err
}

// SetCostCaps lowers the verification cost caps until tb ends.
func SetCostCaps(tb testing.TB, phpassLog2, shaRounds, bcryptCost int) {
	a, b, c := maxPHPassLog2, maxSHACryptRounds, maxBcryptCost
	maxPHPassLog2, maxSHACryptRounds, maxBcryptCost = phpassLog2, shaRounds, bcryptCost
	tb.Cleanup(func() { maxPHPassLog2, maxSHACryptRounds, maxBcryptCost = a, b, c })
}

// SetWriteCosts lowers the cost of written hashes until tb ends.
func SetWriteCosts(tb testing.TB, phpassLog2, sha256Rounds, sha512Rounds int) {
	a, b, c := phpassWriteLog2, sha256CryptWriteRnds, sha512CryptWriteRnds
	phpassWriteLog2, sha256CryptWriteRnds, sha512CryptWriteRnds = phpassLog2, sha256Rounds, sha512Rounds
	tb.Cleanup(func() { phpassWriteLog2, sha256CryptWriteRnds, sha512CryptWriteRnds = a, b, c })
}

// PGConfig and MySQLConfig build the driver configurations of cfg.
func PGConfig(cfg resolver.Config) (*pgx.ConnConfig, error) {
	c, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	return pgConfig(c)
}

func MySQLConfig(cfg resolver.Config) (*mysql.Config, error) {
	c, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	return mysqlConfig(c)
}

// Censor hides secret in err's text.
var Censor = censor
