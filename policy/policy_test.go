package policy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
)

const (
	ms = time.Millisecond
	s1 = time.Second
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p  policy.Policy
		ok bool
	}{
		{policy.Policy{}, true},
		{policy.SyncEveryCommit(), true},
		{policy.SyncNever(), true},
		{policy.SyncEveryN(1), true},
		{policy.SyncEveryN(0), false},
		{policy.SyncEveryN(-3), false},
		{policy.SyncInterval(ms), true},
		{policy.SyncInterval(time.Hour), true},
		{policy.SyncInterval(ms - 1), false},
		{policy.SyncInterval(time.Hour + 1), false},
		{policy.SyncIntervalPostponed(s1, 0), true},
		{policy.SyncIntervalPostponed(s1, -1), false},
		{policy.SyncIntervalPostponed(s1, time.Hour+1), false},
		{policy.SyncIntervalPostponed(0, s1), false},
		{policy.BufferedInterval(s1, s1), true},
		{policy.BufferedInterval(s1, ms), true},
		{policy.BufferedInterval(s1, 2*s1), false}, // write delay above the interval
		{policy.BufferedInterval(s1, 0), false},
		{policy.AsyncCommit(200*ms, 0), true},
		{policy.AsyncCommit(200*ms, -1), false},
		{policy.AsyncCommit(0, 0), false},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, policy.ErrInvalid) {
				t.Errorf("Validate() = %v, want an error matching ErrInvalid", err)
			}
		})
	}
}

func TestStringAndAccessors(t *testing.T) {
	for _, tc := range []struct {
		p                             policy.Policy
		str                           string
		kind                          policy.Kind
		n                             int
		interval, writeDelay, postpon time.Duration
		flushAfter                    int64
	}{
		{policy.SyncEveryCommit(), "sync-every-commit", policy.KindSyncEveryCommit, 1, 0, 0, 0, 0},
		{policy.SyncEveryN(8), "sync-every-n(8)", policy.KindSyncEveryN, 8, 0, 0, 0, 0},
		{policy.SyncInterval(s1), "sync-interval(1s)", policy.KindSyncInterval, 0, s1, 0, 0, 0},
		{policy.SyncIntervalPostponed(s1, 2*s1), "sync-interval-postponed(1s,2s)", policy.KindSyncIntervalPostponed, 0, s1, 0, 2 * s1, 0},
		{policy.BufferedInterval(s1, 250*ms), "buffered-interval(1s,250ms)", policy.KindBufferedInterval, 0, s1, 250 * ms, 0, 0},
		{policy.AsyncCommit(200*ms, 1<<20), "async-commit(200ms,1MiB)", policy.KindAsyncCommit, 0, 200 * ms, 200 * ms, 0, 1 << 20},
		{policy.SyncNever(), "sync-never", policy.KindSyncNever, 0, 0, 0, 0, 0},
	} {
		t.Run(tc.str, func(t *testing.T) {
			p := tc.p
			if p.String() != tc.str || p.Kind() != tc.kind || p.N() != tc.n || p.Interval() != tc.interval ||
				p.WriteDelay() != tc.writeDelay || p.MaxPostpone() != tc.postpon || p.FlushAfter() != tc.flushAfter {
				t.Errorf("got %q kind=%v n=%d interval=%v writeDelay=%v maxPostpone=%v flushAfter=%d",
					p.String(), p.Kind(), p.N(), p.Interval(), p.WriteDelay(), p.MaxPostpone(), p.FlushAfter())
			}
		})
	}
	for w, want := range map[policy.Wait]string{policy.WaitNone: "none", policy.WaitWrite: "write", policy.WaitSync: "sync", 9: "Wait(9)"} {
		if w.String() != want {
			t.Errorf("Wait(%d).String() = %q, want %q", uint8(w), w.String(), want)
		}
	}
	if got := policy.Kind(42).String(); got != "Kind(42)" {
		t.Errorf("Kind(42).String() = %q", got)
	}
}

func TestMirrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  func() (policy.Policy, error)
		want policy.Policy
		err  bool
	}{
		{"InnoDB(1)", func() (policy.Policy, error) { return policy.InnoDB(1) }, policy.SyncEveryCommit(), false},
		{"InnoDB(2)", func() (policy.Policy, error) { return policy.InnoDB(2) }, policy.SyncInterval(s1), false},
		{"InnoDB(0)", func() (policy.Policy, error) { return policy.InnoDB(0) }, policy.BufferedInterval(s1, s1), false},
		{"InnoDB(3)", func() (policy.Policy, error) { return policy.InnoDB(3) }, policy.Policy{}, true},
		{"InnoDB(-1)", func() (policy.Policy, error) { return policy.InnoDB(-1) }, policy.Policy{}, true},
		{"always", func() (policy.Policy, error) { return policy.AppendFsync("always") }, policy.SyncEveryCommit(), false},
		{"everysec", func() (policy.Policy, error) { return policy.AppendFsync("everysec") }, policy.SyncIntervalPostponed(s1, 2*s1), false},
		{"no", func() (policy.Policy, error) { return policy.AppendFsync("no") }, policy.SyncNever(), false},
		{"Always", func() (policy.Policy, error) { return policy.AppendFsync("Always") }, policy.Policy{}, true},
		{"empty word", func() (policy.Policy, error) { return policy.AppendFsync("") }, policy.Policy{}, true},
		{"sync_binlog=0", func() (policy.Policy, error) { return policy.SyncBinlog(0) }, policy.SyncNever(), false},
		{"sync_binlog=1", func() (policy.Policy, error) { return policy.SyncBinlog(1) }, policy.SyncEveryCommit(), false},
		{"sync_binlog=100", func() (policy.Policy, error) { return policy.SyncBinlog(100) }, policy.SyncEveryN(100), false},
		{"sync_binlog=-1", func() (policy.Policy, error) { return policy.SyncBinlog(-1) }, policy.Policy{}, true},
		{"PostgresAsync", func() (policy.Policy, error) { return policy.PostgresAsync(), nil }, policy.AsyncCommit(200*ms, 1<<20), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.get()
			if tc.err {
				if !errors.Is(err, policy.ErrInvalid) {
					t.Fatalf("err = %v, want an error matching ErrInvalid (never a default)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.want {
				t.Errorf("got %v, want %v", p, tc.want)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("a mirror returned an invalid policy: %v", err)
			}
		})
	}
}
