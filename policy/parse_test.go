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
			policy.AsyncCommit(d, 0), policy.AsyncCommit(d, 1<<20), policy.AsyncCommit(d, 1<<62))
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

func TestParseBad(t *testing.T) {
	for _, c := range []struct{ in, part string }{
		{"", "empty policy"},
		{"fsync-always", `unknown policy "fsync-always"`},
		{"sync-every-n", "takes 1 parameter"},
		{"sync-every-n(x)", `n "x" is not an integer`},
		{"sync-every-n(0)", "n = 0"},
		{"sync-every-n(4", "missing closing parenthesis"},
		{"sync-every-commit(1)", "takes 0 parameter"},
		{"sync-interval(1)", `interval "1" is not a duration`},
		{"sync-interval(0s)", "interval 0s"},
		{"sync-interval(2h)", "interval 2h0m0s"},
		{"sync-interval-postponed(1s)", "takes 2 parameter"},
		{"sync-interval-postponed(1s,)", "empty parameter"},
		{"buffered-interval(1s,2s)", "write delay 2s"},
		{"async-commit(1s,1MiB)", `flush-after "1MiB" is not a byte count`},
		{"async-commit(1s,-1)", "flush-after -1"},
		{"innodb=3", "innodb_flush_log_at_trx_commit=3"},
		{"innodb=one", `level "one" is not an integer`},
		{"appendfsync=sometimes", `appendfsync "sometimes"`},
		{"sync_binlog=-1", "sync_binlog=-1"},
	} {
		p, err := policy.Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error", c.in, p)
			continue
		}
		if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), c.part) {
			t.Errorf("Parse(%q) error %q: want ErrInvalid naming %q", c.in, err, c.part)
		}
		var q policy.Policy = policy.SyncNever()
		if q.UnmarshalText([]byte(c.in)) == nil || q != policy.SyncNever() {
			t.Errorf("UnmarshalText(%q) changed the policy or returned nil", c.in)
		}
	}
	// Syntax errors list the accepted forms.
	if _, err := policy.Parse("nope"); !strings.Contains(err.Error(), "appendfsync=always|everysec|no") {
		t.Errorf("error %q does not list the accepted forms", err)
	}
	if _, err := policy.SyncEveryN(0).MarshalText(); !errors.Is(err, policy.ErrInvalid) {
		t.Errorf("MarshalText of an invalid policy: %v", err)
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
