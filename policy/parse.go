package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// acceptedForms lists, for error messages, every form [Parse] accepts.
const acceptedForms = `sync-every-commit, sync-every-n(N) or sync-every-n=N, ` +
	`sync-interval(D) or sync-interval=D, sync-interval-postponed(D,MAX), ` +
	`buffered-interval(D,WRITE), async-commit(D,BYTES), sync-never, postgres-async, ` +
	`innodb=0|1|2, appendfsync=always|everysec|no, sync_binlog=N ` +
	`(D, MAX, WRITE are Go durations such as 1s or 200ms; N and BYTES are integers)`

// Parse returns the policy s names. It is the inverse of [Policy.String]:
// for every policy p that passes [Policy.Validate], Parse(p.String())
// returns p. It also accepts:
//
//   - "sync-every-n=N" and "sync-interval=D" for the one-parameter families;
//   - "postgres-async" for [PostgresAsync];
//   - the settings the mirror constructors take, as they are written in the
//     servers' configuration files: "innodb=0|1|2" (or
//     "innodb_flush_log_at_trx_commit=0|1|2", see [InnoDB]),
//     "appendfsync=always|everysec|no" (see [AppendFsync]) and
//     "sync_binlog=N" (see [SyncBinlog]).
//
// Durations are written as [time.ParseDuration] reads them ("1s", "200ms"),
// counts and byte sizes as decimal integers. Family and setting names are
// matched case-insensitively; spaces around names, parameters and commas are
// ignored. The parsed policy is validated, so a successful Parse returns a
// policy [Open] accepts.
//
// A malformed or invalid s returns an error that names the bad part and
// lists the accepted forms; it matches [ErrInvalid] with errors.Is. Parse is
// safe for concurrent use.
//
// [Open]: https://pkg.go.dev/github.com/durawal/durawal/wal#Open
func Parse(s string) (Policy, error) {
	p, err := parse(strings.TrimSpace(s))
	if errors.Is(err, ErrInvalid) { // from a mirror constructor: already names the setting
		return Policy{}, fmt.Errorf("parse %q: %w; accepted forms: %s", s, err, acceptedForms)
	}
	if err != nil {
		return Policy{}, fmt.Errorf("%w: parse %q: %s; accepted forms: %s", ErrInvalid, s, err, acceptedForms)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("parse %q: %w", s, err)
	}
	return p, nil
}

// parse does the work of Parse; its errors name the bad part only.
func parse(s string) (Policy, error) {
	if s == "" {
		return Policy{}, fmt.Errorf("empty policy")
	}
	name, args, err := split(s)
	if err != nil {
		return Policy{}, err
	}
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d parameter(s), got %d", name, n, len(args))
		}
		return nil
	}
	switch name {
	case KindSyncEveryCommit.String():
		return SyncEveryCommit(), want(0)
	case KindSyncNever.String():
		return SyncNever(), want(0)
	case "postgres-async":
		return PostgresAsync(), want(0)
	case KindSyncEveryN.String():
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "n", args[0])
		return SyncEveryN(n), err
	case KindSyncInterval.String():
		if err := want(1); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "interval", args[0])
		return SyncInterval(d), err
	case KindSyncIntervalPostponed.String(), KindBufferedInterval.String():
		if err := want(2); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "interval", args[0])
		if err != nil {
			return Policy{}, err
		}
		if name == KindBufferedInterval.String() {
			w, err := parseDuration(name, "write delay", args[1])
			return BufferedInterval(d, w), err
		}
		m, err := parseDuration(name, "max postpone", args[1])
		return SyncIntervalPostponed(d, m), err
	case KindAsyncCommit.String():
		if err := want(2); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "writer delay", args[0])
		if err != nil {
			return Policy{}, err
		}
		b, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return Policy{}, fmt.Errorf("%s: flush-after %q is not a byte count", name, args[1])
		}
		return AsyncCommit(d, b), nil
	case "innodb", "innodb_flush_log_at_trx_commit":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "level", args[0])
		if err != nil {
			return Policy{}, err
		}
		return InnoDB(n)
	case "appendfsync":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		return AppendFsync(strings.ToLower(args[0]))
	case "sync_binlog":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "n", args[0])
		if err != nil {
			return Policy{}, err
		}
		return SyncBinlog(n)
	}
	return Policy{}, fmt.Errorf("unknown policy %q", name)
}

// split cuts s into a lower-case name and its parameters, written either
// "name(a,b)" or "name=a".
func split(s string) (name string, args []string, err error) {
	if i := strings.IndexAny(s, "(="); i >= 0 {
		name = strings.ToLower(strings.TrimSpace(s[:i]))
		rest := s[i+1:]
		if s[i] == '(' {
			body, ok := strings.CutSuffix(strings.TrimSpace(rest), ")")
			if !ok {
				return "", nil, fmt.Errorf("%s: missing closing parenthesis", name)
			}
			rest = body
		}
		for a := range strings.SplitSeq(rest, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				return "", nil, fmt.Errorf("%s: empty parameter", name)
			}
			args = append(args, a)
		}
		return name, args, nil
	}
	return strings.ToLower(s), nil, nil
}

func parseInt(name, what, a string) (int, error) {
	n, err := strconv.Atoi(a)
	if err != nil {
		return 0, fmt.Errorf("%s: %s %q is not an integer", name, what, a)
	}
	return n, nil
}

func parseDuration(name, what, a string) (time.Duration, error) {
	d, err := time.ParseDuration(a)
	if err != nil {
		return 0, fmt.Errorf("%s: %s %q is not a duration (e.g. 1s, 200ms)", name, what, a)
	}
	return d, nil
}

// MarshalText returns [Policy.String] as bytes, so that a Policy is written
// by its name in JSON, YAML and TOML and can be used with [flag.TextVar].
// Policy is a comparable struct, so the methods live on it directly and no
// wrapper type is needed: a Policy field of a configuration struct encodes
// and decodes as text. An invalid policy (see [Policy.Validate]) returns an
// error matching [ErrInvalid]. Safe for concurrent use.
func (p Policy) MarshalText() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return []byte(p.String()), nil
}

// UnmarshalText sets *p to [Parse](string(text)). On error *p is left
// unchanged and the error matches [ErrInvalid]. It writes *p, so it must not
// run concurrently with other uses of the same *p.
func (p *Policy) UnmarshalText(text []byte) error {
	q, err := Parse(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}
