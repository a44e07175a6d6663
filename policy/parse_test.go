package policy_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
)

// everyPolicy builds every constructor with several parameters.
func everyPolicy() []policy.Policy {
	ps := []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever(), policy.PostgresAsync()}
	for _, n := range []int{1, 2, 4, 1000, 1 << 30} {
		ps = append(ps, policy.SyncEveryN(n))
	}
	ds := []time.Duration{time.Millisecond, 200 * time.Millisecond, 1500 * time.Millisecond,
		time.Second, time.Minute + 3*time.Millisecond + 7, time.Hour}
	for _, d := range ds {
		ps = append(ps, policy.SyncInterval(d),
			policy.SyncIntervalPostponed(d, 0), policy.SyncIntervalPostponed(d, 2*time.Second),
			policy.SyncIntervalPostponed(d, time.Hour),
			policy.BufferedInterval(d, d), policy.BufferedInterval(d, time.Millisecond),
			policy.AsyncCommit(d, 0), policy.AsyncCommit(d, 1<<20), policy.AsyncCommit(d, 1<<62),
			policy.AsyncCommit(d, 1), policy.AsyncCommit(d, 1000), policy.AsyncCommit(d, 3<<10),
			policy.AsyncCommit(d, 5<<30), policy.AsyncCommit(d, 1<<63-1))
	}
	for _, level := range []int{0, 1, 2} {
		p, _ := policy.InnoDB(level)
		ps = append(ps, p)
	}
	for _, word := range []string{"always", "everysec", "no"} {
		p, _ := policy.AppendFsync(word)
		ps = append(ps, p)
	}
	for _, n := range []int{0, 1, 7} {
		p, _ := policy.SyncBinlog(n)
		ps = append(ps, p)
	}
	return ps
}

func TestParseRoundTrip(t *testing.T) {
	for _, p := range everyPolicy() {
		if err := p.Validate(); err != nil {
			t.Fatalf("test policy %v invalid: %v", p, err)
		}
		got, err := policy.Parse(p.String())
		if err != nil || got != p {
			t.Errorf("Parse(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
		text, err := p.MarshalText()
		if err != nil || string(text) != p.String() {
			t.Errorf("%v.MarshalText() = %q, %v", p, text, err)
		}
		var q policy.Policy
		if err := q.UnmarshalText(text); err != nil || q != p {
			t.Errorf("UnmarshalText(%q) = %v, %v", text, q, err)
		}
	}
}

func TestParseOtherForms(t *testing.T) {
	must := func(p policy.Policy, err error) policy.Policy {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		in   string
		want policy.Policy
	}{
		{"sync-every-n=4", policy.SyncEveryN(4)},
		{"sync-interval=1s", policy.SyncInterval(time.Second)},
		{" Sync-Interval-Postponed( 1s , 2s ) ", policy.SyncIntervalPostponed(time.Second, 2*time.Second)},
		{"postgres-async", policy.PostgresAsync()},
		{"innodb=0", must(policy.InnoDB(0))},
		{"innodb=1", must(policy.InnoDB(1))},
		{"innodb=2", must(policy.InnoDB(2))},
		{"innodb_flush_log_at_trx_commit=2", must(policy.InnoDB(2))},
		{"appendfsync=always", must(policy.AppendFsync("always"))},
		{"appendfsync=everysec", must(policy.AppendFsync("everysec"))},
		{"appendfsync=no", must(policy.AppendFsync("no"))},
		{"sync_binlog=0", must(policy.SyncBinlog(0))},
		{"sync_binlog=1", must(policy.SyncBinlog(1))},
		{"sync_binlog=100", must(policy.SyncBinlog(100))},
	} {
		got, err := policy.Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseConstructorSpelling(t *testing.T) {
	for _, c := range []struct {
		in   string
		want policy.Policy
	}{
		{"SyncEveryCommit", policy.SyncEveryCommit()},
		{"SyncEveryCommit()", policy.SyncEveryCommit()},
		{"SyncEveryN(4)", policy.SyncEveryN(4)},
		{"SyncInterval(1s)", policy.SyncInterval(time.Second)},
		{"sync_interval=1s", policy.SyncInterval(time.Second)},
		{"SyncIntervalPostponed(200ms, 2s)", policy.SyncIntervalPostponed(200*time.Millisecond, 2*time.Second)},
		{"BufferedInterval(200ms,50ms)", policy.BufferedInterval(200*time.Millisecond, 50*time.Millisecond)},
		{"AsyncCommit(100ms,1MiB)", policy.AsyncCommit(100*time.Millisecond, 1<<20)},
		{"async-commit(200ms,1MiB)", policy.PostgresAsync()},
		{"async-commit(200ms, 1 MiB)", policy.PostgresAsync()},
		{"async-commit(1s,4KiB)", policy.AsyncCommit(time.Second, 4096)},
		{"async-commit(1s,2GiB)", policy.AsyncCommit(time.Second, 2<<30)},
		{"async-commit(1s,100B)", policy.AsyncCommit(time.Second, 100)},
		{"async-commit(1s,0)", policy.AsyncCommit(time.Second, 0)},
		{"PostgresAsync()", policy.PostgresAsync()},
		{"SyncNever", policy.SyncNever()},
		{"InnoDB(2)", policy.SyncInterval(time.Second)},
		{"AppendFsync(EverySec)", policy.SyncIntervalPostponed(time.Second, 2*time.Second)},
		{"SyncBinlog(8)", policy.SyncEveryN(8)},
		{"innodb=0", policy.BufferedInterval(time.Second, time.Second)},
	} {
		got, err := policy.Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseBad(t *testing.T) {
	for _, c := range []struct{ in, part string }{
		{"", "empty policy"},
		{"fsync-always", `unknown policy "fsync-always"; the names are sync-every-commit,`},
		{"sync-every-n", "sync-every-n takes 1 parameter, got 0"},
		{"sync-every-n(x)", `sync-every-n: n "x" is not a decimal integer`},
		{"sync-every-n(0)", "sync-every-n: n = 0, want ≥ 1"},
		{"sync-every-n(4", "missing closing parenthesis"},
		{"sync-every-n(+3)", `n "+3" is not a decimal integer`},
		{"sync-every-n(3.0)", `n "3.0" is not a decimal integer`},
		{"sync-every-n(99999999999999999999)", "n 99999999999999999999 is out of range (at most 9223372036854775807)"},
		{"sync-every-n((4))", "unexpected '(', ')' or '='"},
		{"sync-every-n=(4)", "name=value takes one value without parentheses"},
		{"sync-every-commit(1)", "sync-every-commit takes 0 parameters, got 1"},
		{"sync every commit", `"sync every commit" is not a policy name`},
		{"(1s)", "missing policy name"},
		{"sync-interval(1)", `interval "1" is not a duration`},
		{"sync-interval(+1s)", `interval "+1s" is not a duration`},
		{"sync-interval(-1s)", `interval "-1s" is not a duration`},
		{"sync-interval(0s)", "interval 0s, want 1ms..1h"},
		{"sync-interval(2h)", "interval 2h0m0s"},
		{"sync-interval-postponed(1s)", "takes 2 parameters, got 1"},
		{"sync-interval-postponed(1s,)", "empty parameter"},
		{"sync-interval=", "empty parameter"},
		{"buffered-interval(1s,2s)", "write delay 2s"},
		{"async-commit(1s,1MB)", `flush-after "1MB" is not a byte count`},
		{"async-commit(1s,-1)", `flush-after "-1" is not a byte count`},
		{"async-commit(1s,01KiB)", `flush-after "01KiB" is not a byte count`},
		{"async-commit(1s,9999999999GiB)", "flush-after 9999999999GiB is out of range (at most 9223372036854775807 bytes)"},
		{"innodb=3", "innodb_flush_log_at_trx_commit=3, want 0, 1 or 2"},
		{"innodb=+1", `level "+1" is not a decimal integer`},
		{"innodb=01", `level "01" is not a decimal integer`},
		{"innodb=one", `level "one" is not a decimal integer`},
		{"appendfsync=sometimes", `appendfsync "sometimes", want always, everysec or no`},
		{"sync_binlog=-1", `n "-1" is not a decimal integer`},
		{"sync_binlog=-0", `n "-0" is not a decimal integer`},
	} {
		p, err := policy.Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error", c.in, p)
			continue
		}
		// One shape: ErrInvalid's text, the input, then what is wrong.
		prefix := fmt.Sprintf("policy: invalid policy: parse %q: ", c.in)
		if !errors.Is(err, policy.ErrInvalid) || !strings.HasPrefix(err.Error(), prefix) ||
			!strings.Contains(err.Error(), c.part) || strings.Count(err.Error(), "invalid policy") != 1 {
			t.Errorf("Parse(%q) error %q: want ErrInvalid, %q then %q", c.in, err, prefix, c.part)
		}
		var q policy.Policy = policy.SyncNever()
		if q.UnmarshalText([]byte(c.in)) == nil || q != policy.SyncNever() {
			t.Errorf("UnmarshalText(%q) changed the policy or returned nil", c.in)
		}
	}
	if _, err := policy.SyncEveryN(0).MarshalText(); !errors.Is(err, policy.ErrInvalid) {
		t.Errorf("MarshalText of an invalid policy: %v", err)
	}
}

// Whole error messages, so that a change of their shape is seen.
func TestParseErrorText(t *testing.T) {
	long := "sync-every-n(" + strings.Repeat("9", 200) + ")"
	for _, c := range []struct{ in, want string }{
		{"bogus=3", `policy: invalid policy: parse "bogus=3": unknown policy "bogus"; the names are sync-every-commit, sync-every-n, sync-interval, sync-interval-postponed, buffered-interval, async-commit, sync-never, postgres-async, innodb, appendfsync, sync_binlog`},
		{"innodb=3", `policy: invalid policy: parse "innodb=3": innodb_flush_log_at_trx_commit=3, want 0, 1 or 2`},
		{"sync-every-n(0)", `policy: invalid policy: parse "sync-every-n(0)": sync-every-n: n = 0, want ≥ 1`},
		{"SyncInterval(forever)", `policy: invalid policy: parse "SyncInterval(forever)": SyncInterval: interval "forever" is not a duration (e.g. 1s, 200ms; no sign)`},
		{long, `policy: invalid policy: parse "sync-every-n(` + strings.Repeat("9", 51) + `…": sync-every-n: n ` + strings.Repeat("9", 64) + `… is out of range (at most 9223372036854775807)`},
	} {
		_, err := policy.Parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) error:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

// Every family's String is its canonical text, and Parse reads it back.
func TestStringEveryKind(t *testing.T) {
	for _, c := range []struct {
		p    policy.Policy
		want string
	}{
		{policy.SyncEveryCommit(), "sync-every-commit"},
		{policy.SyncEveryN(3), "sync-every-n(3)"},
		{policy.SyncInterval(time.Second), "sync-interval(1s)"},
		{policy.SyncIntervalPostponed(time.Second, 2*time.Second), "sync-interval-postponed(1s,2s)"},
		{policy.BufferedInterval(time.Second, 50*time.Millisecond), "buffered-interval(1s,50ms)"},
		{policy.AsyncCommit(200*time.Millisecond, 1<<20), "async-commit(200ms,1MiB)"},
		{policy.AsyncCommit(200*time.Millisecond, 3072), "async-commit(200ms,3KiB)"},
		{policy.AsyncCommit(200*time.Millisecond, 1536), "async-commit(200ms,1536)"},
		{policy.AsyncCommit(200*time.Millisecond, 1000), "async-commit(200ms,1000)"},
		{policy.AsyncCommit(200*time.Millisecond, 0), "async-commit(200ms,0)"},
		{policy.AsyncCommit(200*time.Millisecond, 4<<30), "async-commit(200ms,4GiB)"},
		{policy.SyncNever(), "sync-never"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
		text, err := c.p.MarshalText()
		if err != nil || string(text) != c.want {
			t.Errorf("MarshalText() = %q, %v; want %q", text, err, c.want)
		}
		var q policy.Policy
		if err := q.UnmarshalText(text); err != nil || q != c.p {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, q, err, c.p)
		}
	}
}

func TestPolicyJSON(t *testing.T) {
	type config struct {
		Policy policy.Policy `json:"policy"`
	}
	b, err := json.Marshal(config{policy.SyncEveryN(4)})
	if err != nil || string(b) != `{"policy":"sync-every-n(4)"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var c config
	if err := json.Unmarshal([]byte(`{"policy":"appendfsync=everysec"}`), &c); err != nil ||
		c.Policy != policy.SyncIntervalPostponed(time.Second, 2*time.Second) {
		t.Fatalf("Unmarshal = %v, %v", c.Policy, err)
	}
	if err := json.Unmarshal([]byte(`{"policy":"innodb=9"}`), &c); !errors.Is(err, policy.ErrInvalid) {
		t.Fatalf("Unmarshal of a bad policy: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range everyPolicy() {
		f.Add(p.String())
	}
	for _, s := range []string{"innodb=2", "appendfsync=everysec", "sync_binlog=7", "sync-every-n=4", "sync-interval=1s", "(", "=", "a(b,c)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := policy.Parse(s)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not match ErrInvalid", s, err)
			}
			return
		}
		q, err := policy.Parse(p.String())
		if err != nil || q != p {
			t.Fatalf("Parse(%q) = %v, but Parse(%q) = %v, %v", s, p, p.String(), q, err)
		}
	})
}

func ExampleParse() {
	for _, s := range []string{"sync-every-n(4)", "innodb=2", "appendfsync=everysec", "sync_binlog=1", "sync-interval=250ms"} {
		p, err := policy.Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-22s -> %v\n", s, p)
	}
	_, err := policy.Parse("sync-interval(forever)")
	fmt.Println(errors.Is(err, policy.ErrInvalid))
	// Output:
	// sync-every-n(4)        -> sync-every-n(4)
	// innodb=2               -> sync-interval(1s)
	// appendfsync=everysec   -> sync-interval-postponed(1s,2s)
	// sync_binlog=1          -> sync-every-commit
	// sync-interval=250ms    -> sync-interval(250ms)
	// true
}

// A Policy is a flag.TextVar: the default prints by its String, and the
// flag accepts every form Parse does.
func ExampleParse_flagTextVar() {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var p policy.Policy
	fs.TextVar(&p, "policy", policy.SyncEveryCommit(), "flush `policy`, e.g. innodb=2")
	fs.SetOutput(os.Stdout)
	fs.PrintDefaults()
	if err := fs.Parse([]string{"-policy", "appendfsync=no"}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(p)
	// Output:
	//   -policy policy
	//     	flush policy, e.g. innodb=2 (default sync-every-commit)
	// sync-never
}
