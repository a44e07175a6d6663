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

func TestCommit(t *testing.T) {
	running := policy.State{SyncInProgress: true}
	for _, tc := range []struct {
		name string
		p    policy.Policy
		s    policy.State
		want policy.Wait
	}{
		{"zero value is sync-every-commit", policy.Policy{}, policy.State{}, policy.WaitSync},
		{"sync-every-commit", policy.SyncEveryCommit(), policy.State{}, policy.WaitSync},
		{"sync-every-n", policy.SyncEveryN(4), policy.State{}, policy.WaitWrite},
		{"sync-interval", policy.SyncInterval(s1), running, policy.WaitWrite},
		{"postponed, no sync running", policy.SyncIntervalPostponed(s1, 2*s1), policy.State{}, policy.WaitWrite},
		{"postponed, sync running", policy.SyncIntervalPostponed(s1, 2*s1), running, policy.WaitNone},
		{"postponed, sync running, 1.9s postponed", policy.SyncIntervalPostponed(s1, 2*s1),
			policy.State{SyncInProgress: true, PostponedFor: 1900 * ms}, policy.WaitNone},
		{"postponed, sync running, 2s postponed: forced", policy.SyncIntervalPostponed(s1, 2*s1),
			policy.State{SyncInProgress: true, PostponedFor: 2 * s1}, policy.WaitWrite},
		{"buffered-interval", policy.BufferedInterval(s1, s1), policy.State{}, policy.WaitNone},
		{"async-commit", policy.AsyncCommit(200*ms, 0), policy.State{}, policy.WaitNone},
		{"sync-never", policy.SyncNever(), policy.State{}, policy.WaitWrite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Commit(tc.s); got != tc.want {
				t.Errorf("%v.Commit(%+v) = %v, want %v", tc.p, tc.s, got, tc.want)
			}
		})
	}
}

func TestSyncGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     policy.Policy
		since int
		want  bool
	}{
		{"sync-every-commit", policy.SyncEveryCommit(), 0, true},
		{"sync-every-n(1)", policy.SyncEveryN(1), 0, true},
		{"sync-every-n(4), 1st group", policy.SyncEveryN(4), 0, false},
		{"sync-every-n(4), 3rd group", policy.SyncEveryN(4), 2, false},
		{"sync-every-n(4), 4th group", policy.SyncEveryN(4), 3, true},
		{"sync-interval", policy.SyncInterval(s1), 100, false},
		{"postponed", policy.SyncIntervalPostponed(s1, 2*s1), 100, false},
		{"buffered", policy.BufferedInterval(s1, s1), 100, false},
		{"async", policy.AsyncCommit(s1, 0), 100, false},
		{"never", policy.SyncNever(), 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.SyncGroup(policy.State{GroupsSinceSync: tc.since}); got != tc.want {
				t.Errorf("%v.SyncGroup(GroupsSinceSync=%d) = %v, want %v", tc.p, tc.since, got, tc.want)
			}
		})
	}
}

func TestTick(t *testing.T) {
	for _, tc := range []struct {
		p    policy.Policy
		want time.Duration
	}{
		{policy.SyncEveryCommit(), 0},
		{policy.SyncEveryN(3), 0},
		{policy.SyncInterval(s1), s1},
		{policy.SyncIntervalPostponed(s1, 2*s1), 100 * ms}, // Redis serverCron at hz=10
		{policy.SyncIntervalPostponed(20*ms, 40*ms), 20 * ms},
		{policy.BufferedInterval(s1, 250*ms), 250 * ms},
		{policy.AsyncCommit(200*ms, 0), 200 * ms},
		{policy.SyncNever(), 0},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			if got := tc.p.Tick(); got != tc.want {
				t.Errorf("Tick() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnTick(t *testing.T) {
	// st builds a State: appended, written, synced LSNs and time since the
	// start of the last sync.
	st := func(a, w, s uint64, since time.Duration) policy.State {
		return policy.State{AppendedLSN: a, WrittenLSN: w, SyncedLSN: s, SinceSyncStart: since}
	}
	running := func(s policy.State) policy.State { s.SyncInProgress = true; return s }
	postponed := func(s policy.State, d time.Duration) policy.State { s.PostponedFor = d; return s }
	none := policy.Action{}
	write := policy.Action{Write: true}
	sync := policy.Action{Sync: true}
	both := policy.Action{Write: true, Sync: true}
	for _, tc := range []struct {
		name string
		p    policy.Policy
		s    policy.State
		want policy.Action
	}{
		{"interval: idle", policy.SyncInterval(s1), st(100, 100, 100, 5*s1), none},
		{"interval: unsynced, not due", policy.SyncInterval(s1), st(100, 100, 50, 999*ms), none},
		{"interval: unsynced, due", policy.SyncInterval(s1), st(100, 100, 50, s1), sync},
		{"interval: only unwritten (commit writes), due", policy.SyncInterval(s1), st(100, 50, 50, s1), none},
		{"postponed: due", policy.SyncIntervalPostponed(s1, 2*s1), st(100, 100, 50, s1), sync},
		{"postponed: due, sync running", policy.SyncIntervalPostponed(s1, 2*s1), running(st(100, 100, 50, s1)), none},
		{"postponed: postponed bytes, sync done", policy.SyncIntervalPostponed(s1, 2*s1), st(100, 50, 50, 10*ms), write},
		{"postponed: postponed bytes, sync running", policy.SyncIntervalPostponed(s1, 2*s1), running(st(100, 50, 50, 10*ms)), none},
		{"postponed: postponed to the limit, sync running", policy.SyncIntervalPostponed(s1, 2*s1), postponed(running(st(100, 50, 50, 10*ms)), 2*s1), write},
		{"postponed: idle", policy.SyncIntervalPostponed(s1, 2*s1), st(100, 100, 100, 5*s1), none},
		{"buffered: unwritten, not due", policy.BufferedInterval(s1, 100*ms), st(100, 50, 50, 500*ms), write},
		{"buffered: unwritten, due", policy.BufferedInterval(s1, 100*ms), st(100, 50, 50, s1), both},
		{"buffered: written, unsynced, due", policy.BufferedInterval(s1, 100*ms), st(100, 100, 50, s1), sync},
		{"buffered: idle", policy.BufferedInterval(s1, 100*ms), st(100, 100, 100, 5*s1), none},
		{"async: unwritten, not due", policy.AsyncCommit(200*ms, 0), st(100, 50, 50, 100*ms), write},
		{"async: unwritten, due", policy.AsyncCommit(200*ms, 0), st(100, 50, 50, 200*ms), both},
		{"async: flush-after reached early", policy.AsyncCommit(200*ms, 1000), st(2000, 2000, 1000, 10*ms), sync},
		{"async: flush-after not reached", policy.AsyncCommit(200*ms, 1000), st(1999, 1999, 1000, 10*ms), none},
		{"async: idle", policy.AsyncCommit(200*ms, 1000), st(100, 100, 100, 5*s1), none},
		{"every-commit: never ticks", policy.SyncEveryCommit(), st(100, 50, 0, 5*s1), none},
		{"every-n: never ticks", policy.SyncEveryN(2), st(100, 50, 0, 5*s1), none},
		{"never: never ticks", policy.SyncNever(), st(100, 50, 0, 5*s1), none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.OnTick(tc.s); got != tc.want {
				t.Errorf("%v.OnTick(%+v) = %+v, want %+v", tc.p, tc.s, got, tc.want)
			}
		})
	}
}

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
