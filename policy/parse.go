package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Parse returns the policy s names. The language below is the only one
// durawal's documentation, examples and tools use for policies; it is also
// what [Policy.UnmarshalText] (and so [flag.TextVar], JSON, YAML and TOML)
// reads, and [Policy.String] writes its canonical form.
//
// A policy is a name, optionally followed by its parameters:
//
//	policy = name [ "(" [ arg { "," arg } ] ")" | "=" arg ] .
//
// "name=arg" is the same as "name(arg)", and "name()" the same as "name".
// Names are matched ignoring case and the separators '-' and '_', so the
// canonical "sync-interval(1s)", the constructor's spelling
// "SyncInterval(1s)" and "sync_interval=1s" are one policy. Spaces around
// names, parameters and commas are ignored. The names and their parameters:
//
//	name                            parameters              the policy
//	sync-every-commit               —                       SyncEveryCommit()
//	sync-every-n                    N                       SyncEveryN(N)
//	sync-interval                   D                       SyncInterval(D)
//	sync-interval-postponed         D, MAX                  SyncIntervalPostponed(D, MAX)
//	buffered-interval               D, WRITE                BufferedInterval(D, WRITE)
//	async-commit                    D, BYTES                AsyncCommit(D, BYTES)
//	sync-never                      —                       SyncNever()
//	postgres-async                  —                       PostgresAsync()
//	innodb                          0, 1 or 2               InnoDB(level)
//	innodb_flush_log_at_trx_commit  0, 1 or 2               InnoDB(level)
//	appendfsync                     always, everysec or no  AppendFsync(word)
//	sync_binlog                     N                       SyncBinlog(N)
//
// D, MAX and WRITE are durations as [time.ParseDuration] reads them ("1s",
// "200ms", "1m30s"), without a sign. N is a decimal integer: digits only, no
// sign, no leading zero. BYTES is such an integer, optionally followed by
// one of the units B, KiB, MiB or GiB (powers of 1024; "1MiB" is 1048576).
// The settings' words (appendfsync's) are matched ignoring case.
//
// The parsed policy is validated, so a successful Parse returns a policy
// [Open] accepts, and for every policy p that passes [Policy.Validate],
// Parse(p.String()) returns p.
//
// Every error matches [ErrInvalid] with errors.Is and reads
//
//	policy: invalid policy: parse "<s>": <what is wrong>
//
// where <s> is the input (its first 64 bytes, then "…", when longer) and
// <what is wrong> names the bad part: an unknown name (with the list of
// names), a wrong number of parameters, a parameter that is not a
// duration or an integer, an integer out of range, or the range
// [Policy.Validate] or the settings' constructor wants. Parse is safe for
// concurrent use.
//
// [Open]: https://pkg.go.dev/github.com/durawal/durawal/wal#Open
func Parse(s string) (Policy, error) {
	p, err := parse(strings.TrimSpace(s))
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		detail := err.Error()
		var ie *invalidError
		if errors.As(err, &ie) {
			detail = ie.detail
		}
		return Policy{}, invalid("parse %q: %s", clip(s), detail)
	}
	return p, nil
}

// names lists the names Parse knows, for the unknown-name error.
const names = "sync-every-commit, sync-every-n, sync-interval, sync-interval-postponed, " +
	"buffered-interval, async-commit, sync-never, postgres-async, innodb, appendfsync, sync_binlog"

// clipAt is how many bytes of a bad input an error quotes.
const clipAt = 64

// clip returns s, cut to clipAt bytes (at a rune boundary) with "…" when
// longer.
func clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	i := clipAt
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// normalize returns a name as Parse matches it: lower case, without '-'
// and '_'.
func normalize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToLower(name))
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
			return fmt.Errorf("%s takes %d parameter%s, got %d", name, n, plural(n), len(args))
		}
		return nil
	}
	switch normalize(name) {
	case "synceverycommit":
		return SyncEveryCommit(), want(0)
	case "syncnever":
		return SyncNever(), want(0)
	case "postgresasync":
		return PostgresAsync(), want(0)
	case "synceveryn":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "n", args[0], math.MaxInt)
		return SyncEveryN(int(n)), err
	case "syncinterval":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "interval", args[0])
		return SyncInterval(d), err
	case "syncintervalpostponed", "bufferedinterval":
		if err := want(2); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "interval", args[0])
		if err != nil {
			return Policy{}, err
		}
		if normalize(name) == "bufferedinterval" {
			w, err := parseDuration(name, "write delay", args[1])
			return BufferedInterval(d, w), err
		}
		m, err := parseDuration(name, "max postpone", args[1])
		return SyncIntervalPostponed(d, m), err
	case "asynccommit":
		if err := want(2); err != nil {
			return Policy{}, err
		}
		d, err := parseDuration(name, "writer delay", args[0])
		if err != nil {
			return Policy{}, err
		}
		b, err := parseBytes(name, "flush-after", args[1])
		return AsyncCommit(d, b), err
	case "innodb", "innodbflushlogattrxcommit":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "level", args[0], math.MaxInt)
		if err != nil {
			return Policy{}, err
		}
		return InnoDB(int(n))
	case "appendfsync":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		return AppendFsync(strings.ToLower(args[0]))
	case "syncbinlog":
		if err := want(1); err != nil {
			return Policy{}, err
		}
		n, err := parseInt(name, "n", args[0], math.MaxInt)
		if err != nil {
			return Policy{}, err
		}
		return SyncBinlog(int(n))
	}
	return Policy{}, fmt.Errorf("unknown policy %q; the names are %s", clip(name), names)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// split cuts s into its name and its parameters, written "name",
// "name()", "name(a,b)" or "name=a".
func split(s string) (name string, args []string, err error) {
	i := strings.IndexAny(s, "(=")
	if i < 0 {
		return s, nil, checkName(s)
	}
	name = strings.TrimSpace(s[:i])
	if err := checkName(name); err != nil {
		return "", nil, err
	}
	rest := s[i+1:]
	if s[i] == '=' {
		if strings.ContainsAny(rest, "()") {
			return "", nil, fmt.Errorf("%s: name=value takes one value without parentheses", name)
		}
		a := strings.TrimSpace(rest)
		if a == "" {
			return "", nil, fmt.Errorf("%s: empty parameter", name)
		}
		return name, []string{a}, nil
	}
	body, ok := strings.CutSuffix(strings.TrimSpace(rest), ")")
	if !ok {
		return "", nil, fmt.Errorf("%s: missing closing parenthesis", name)
	}
	if strings.ContainsAny(body, "()=") {
		return "", nil, fmt.Errorf("%s: unexpected '(', ')' or '=' among the parameters", name)
	}
	if strings.TrimSpace(body) == "" {
		return name, nil, nil
	}
	for a := range strings.SplitSeq(body, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return "", nil, fmt.Errorf("%s: empty parameter", name)
		}
		args = append(args, a)
	}
	return name, args, nil
}

// checkName accepts a name made of letters, digits, '-' and '_' that
// starts with a letter.
func checkName(name string) error {
	for i, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i == 0 && !letter || !letter && r != '-' && r != '_' && (r < '0' || r > '9') {
			return fmt.Errorf("%q is not a policy name (letters, digits, '-' and '_')", clip(name))
		}
	}
	if name == "" {
		return fmt.Errorf("missing policy name")
	}
	return nil
}

// parseInt reads a decimal integer in 0..maxVal: digits only, no sign, no
// leading zero.
func parseInt(name, what, a string, maxVal uint64) (uint64, error) {
	if a == "" || strings.Trim(a, "0123456789") != "" || len(a) > 1 && a[0] == '0' {
		return 0, fmt.Errorf("%s: %s %q is not a decimal integer (digits only, no sign or leading zero)", name, what, clip(a))
	}
	n, err := strconv.ParseUint(a, 10, 64)
	if err != nil || n > maxVal {
		return 0, fmt.Errorf("%s: %s %s is out of range (at most %d)", name, what, clip(a), maxVal)
	}
	return n, nil
}

// byteUnits are the units a byte count may carry, longest first.
var byteUnits = []struct {
	suffix string
	shift  uint
}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// parseBytes reads a byte count: a decimal integer as parseInt reads it,
// optionally followed by B, KiB, MiB or GiB.
func parseBytes(name, what, a string) (int64, error) {
	num, shift := a, uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(a, u.suffix); ok {
			num, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	maxVal := uint64(math.MaxInt64) >> shift
	n, err := parseInt(name, what, num, maxVal)
	if err != nil && strings.Contains(err.Error(), "out of range") {
		return 0, fmt.Errorf("%s: %s %s is out of range (at most %d bytes)", name, what, clip(a), int64(math.MaxInt64))
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %s %q is not a byte count (an integer, optionally with B, KiB, MiB or GiB)", name, what, clip(a))
	}
	return int64(n << shift), nil
}

// parseDuration reads a duration as time.ParseDuration does, without a
// sign.
func parseDuration(name, what, a string) (time.Duration, error) {
	d, err := time.ParseDuration(a)
	if err != nil || a[0] == '+' || a[0] == '-' {
		return 0, fmt.Errorf("%s: %s %q is not a duration (e.g. 1s, 200ms; no sign)", name, what, clip(a))
	}
	return d, nil
}

// formatBytes writes n with the largest unit of byteUnits that divides it
// exactly, as parseBytes reads it back; 0 and counts that are no multiple of
// 1024 are plain integers.
func formatBytes(n int64) string {
	for _, u := range byteUnits[:3] {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
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
