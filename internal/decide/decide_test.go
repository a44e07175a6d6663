package decide_test

import (
	"testing"
	"time"

	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/policy"
)

const (
	ms = time.Millisecond
	s1 = time.Second
)

func TestCommit(t *testing.T) {
	running := decide.State{SyncInProgress: true}
	for _, tc := range []struct {
		name string
		p    policy.Policy
		s    decide.State
		want policy.Wait
	}{
		{"zero value is sync-every-commit", policy.Policy{}, decide.State{}, policy.WaitSync},
		{"sync-every-commit", policy.SyncEveryCommit(), decide.State{}, policy.WaitSync},
		{"sync-every-n", policy.SyncEveryN(4), decide.State{}, policy.WaitWrite},
		{"sync-interval", policy.SyncInterval(s1), running, policy.WaitWrite},
		{"postponed, no sync running", policy.SyncIntervalPostponed(s1, 2*s1), decide.State{}, policy.WaitWrite},
		{"postponed, sync running", policy.SyncIntervalPostponed(s1, 2*s1), running, policy.WaitNone},
		{"postponed, sync running, 1.9s postponed", policy.SyncIntervalPostponed(s1, 2*s1),
			decide.State{SyncInProgress: true, PostponedFor: 1900 * ms}, policy.WaitNone},
		{"postponed, sync running, 2s postponed: forced", policy.SyncIntervalPostponed(s1, 2*s1),
			decide.State{SyncInProgress: true, PostponedFor: 2 * s1}, policy.WaitWrite},
		{"buffered-interval", policy.BufferedInterval(s1, s1), decide.State{}, policy.WaitNone},
		{"async-commit", policy.AsyncCommit(200*ms, 0), decide.State{}, policy.WaitNone},
		{"sync-never", policy.SyncNever(), decide.State{}, policy.WaitWrite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide.Commit(tc.p, tc.s); got != tc.want {
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
			if got := decide.SyncGroup(tc.p, decide.State{GroupsSinceSync: tc.since}); got != tc.want {
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
			if got := decide.Tick(tc.p); got != tc.want {
				t.Errorf("Tick() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnTick(t *testing.T) {
	// st builds a State: appended, written, synced LSNs and time since the
	// start of the last sync.
	st := func(a, w, s uint64, since time.Duration) decide.State {
		return decide.State{AppendedLSN: a, WrittenLSN: w, SyncedLSN: s, SinceSyncStart: since}
	}
	running := func(s decide.State) decide.State { s.SyncInProgress = true; return s }
	postponed := func(s decide.State, d time.Duration) decide.State { s.PostponedFor = d; return s }
	none := decide.Action{}
	write := decide.Action{Write: true}
	sync := decide.Action{Sync: true}
	both := decide.Action{Write: true, Sync: true}
	for _, tc := range []struct {
		name string
		p    policy.Policy
		s    decide.State
		want decide.Action
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
			if got := decide.OnTick(tc.p, tc.s); got != tc.want {
				t.Errorf("%v.OnTick(%+v) = %+v, want %+v", tc.p, tc.s, got, tc.want)
			}
		})
	}
}
