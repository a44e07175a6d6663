package main

import (
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/wal/vfs"
)

// synth builds a trial: goroutines 0 and 1 each acked n commits, interleaved
// at LSNs 100, 200, ..., acked 10 ms apart, the crash 10 ms after the last
// ack; the first rec records (in LSN order) were recovered.
func synth(n, rec int) Trial {
	t := Trial{AckCounts: []uint64{uint64(n), uint64(n)}}
	var all []Ack
	base := int64(1_000_000_000)
	for i := range 2 * n {
		a := Ack{Gid: uint64(i % 2), Seq: uint64(i / 2), LSN: uint64(100 * (i + 1)), TimeNs: base + int64(i)*int64(10*time.Millisecond)}
		all = append(all, a)
	}
	t.Acks = all
	t.CrashNs = all[len(all)-1].TimeNs + int64(10*time.Millisecond)
	for _, a := range all[:rec] {
		t.Recs = append(t.Recs, Rec{LSN: a.LSN, Gid: a.Gid, Seq: a.Seq, OK: true})
	}
	return t
}

func hasViolation(v Verdict, sub string) bool {
	for _, s := range v.Violations {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestJudgeCleanPrefix(t *testing.T) {
	v := Judge(synth(5, 10), Promise{Text: "nothing", Nothing: true})
	if len(v.Violations) != 0 || v.Acked != 10 || v.Lost != 0 {
		t.Fatalf("everything recovered: %+v", v)
	}
	// Records past the acks (appended, not yet acknowledged) are fine too.
	tr := synth(5, 10)
	tr.Recs = append(tr.Recs, Rec{LSN: 1100, Gid: 0, Seq: 5, OK: true})
	if v := Judge(tr, Promise{Nothing: true}); len(v.Violations) != 0 {
		t.Fatalf("unacked extra record: %+v", v)
	}
	// A lost tail within an age bound: 3 lost, the oldest 30 ms old.
	v = Judge(synth(5, 7), Promise{Text: "≤ 100ms", MaxAge: 100 * time.Millisecond})
	if len(v.Violations) != 0 || v.Lost != 3 || v.OldestLostAge != 30*time.Millisecond {
		t.Fatalf("lost tail within bound: %+v", v)
	}
}

func TestJudgeLostBeyondPromise(t *testing.T) {
	v := Judge(synth(5, 7), Promise{Text: "nothing", Nothing: true})
	if v.Lost != 3 || !hasViolation(v, "3 acknowledged commits lost") {
		t.Fatalf("SyncEveryCommit losing acks must be flagged: %+v", v)
	}
	v = Judge(synth(5, 2), Promise{Text: "≤ 50ms", MaxAge: 50 * time.Millisecond})
	if !hasViolation(v, "old at the crash") || v.OldestLostAge != 80*time.Millisecond {
		t.Fatalf("a lost ack older than the bound must be flagged: %+v", v)
	}
	v = Judge(synth(5, 2), Promise{Text: "≤ 4", MaxLost: 4})
	if !hasViolation(v, "8 acknowledged commits lost (> 4)") {
		t.Fatalf("more lost than the count bound must be flagged: %+v", v)
	}
	if v := Judge(synth(5, 0), Promise{Unbounded: true}); len(v.Violations) != 0 || v.Lost != 10 {
		t.Fatalf("SyncNever may lose everything unsynced: %+v", v)
	}
}

func TestJudgeHole(t *testing.T) {
	tr := synth(5, 8)
	tr.Recs = append(tr.Recs[:3], tr.Recs[4:]...) // gid 1 seq 1 missing in the middle
	v := Judge(tr, Promise{Unbounded: true})
	if !hasViolation(v, "hole: goroutine 1") || !hasViolation(v, "not a prefix") {
		t.Fatalf("a hole must be flagged: %+v", v)
	}
}

func TestJudgeBadChecksum(t *testing.T) {
	tr := synth(5, 10)
	tr.Recs[4].OK = false
	if v := Judge(tr, Promise{Unbounded: true}); !hasViolation(v, "bad checksum") {
		t.Fatalf("a bad checksum must be flagged: %+v", v)
	}
}

func TestJudgeWrongLSNAndOpenFailure(t *testing.T) {
	tr := synth(5, 10)
	tr.Acks[3].LSN = 999 // the ack reported another LSN than the record's
	if v := Judge(tr, Promise{Nothing: true}); !hasViolation(v, "reported LSN 999") {
		t.Fatalf("an ack at the wrong LSN must be flagged: %+v", v)
	}
	tr = synth(5, 10)
	tr.OpenErr = "wal: corrupt"
	if v := Judge(tr, Promise{Unbounded: true}); !hasViolation(v, "recovery Open failed") {
		t.Fatalf("a failed Open must be flagged: %+v", v)
	}
	tr = synth(5, 10)
	tr.CrashNs = 0
	if v := Judge(tr, Promise{Unbounded: true}); !hasViolation(v, "never triggered") {
		t.Fatalf("a trial without a crash must be flagged: %+v", v)
	}
}

func TestPolicyNames(t *testing.T) {
	for _, p := range labPolicies {
		if _, ok := findPolicy(shortName(p.Name)); !ok {
			t.Errorf("%s: not found by its short name", p.Name)
		}
		if err := p.Build().Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

func TestFindPolicyAndPromise(t *testing.T) {
	const slack = 500 * time.Millisecond
	for _, tc := range []struct {
		name, guest string
		want        Promise
	}{
		{"SyncEveryCommit", "SyncEveryCommit", Promise{Nothing: true}},
		{"SyncEveryN", "SyncEveryN", Promise{MaxLost: (everyN - 1) * goroutines}},
		{"innodb=1", "innodb=1", Promise{Nothing: true}},
		{"innodb=2", "innodb=2", Promise{MaxAge: time.Second + slack}},
		{"innodb=0", "innodb=0", Promise{MaxAge: time.Second + slack}},
		{"appendfsync=everysec", "appendfsync=everysec", Promise{MaxAge: time.Second + slack}},
		{"appendfsync=no", "appendfsync=no", Promise{Unbounded: true}},
		{"postgres-async", "postgres-async", Promise{MaxAge: 600*time.Millisecond + slack}},
	} {
		p, ok := findPolicy(tc.name)
		if !ok {
			t.Errorf("%s: not found", tc.name)
			continue
		}
		got := p.Promise(slack)
		got.Text = ""
		if got != tc.want {
			t.Errorf("%s: promise %+v, want %+v", tc.name, got, tc.want)
		}
		if g := guestName(p); g != tc.guest {
			t.Errorf("%s: guest name %q, want %q", tc.name, g, tc.guest)
		}
		if q, ok := findPolicy(guestName(p)); !ok || q.Build() != p.Build() {
			t.Errorf("%s: the guest builds %v, the host judged %v", tc.name, q.Build(), p.Build())
		}
	}
	if _, ok := findPolicy("innodb=3"); ok {
		t.Error("innodb=3 was accepted")
	}
}

func TestVariantNamesAndGuestName(t *testing.T) {
	p, _ := findPolicy("SyncEveryN")
	v := variant(p, vfs.ODirectODsync, 64<<10)
	if want := "SyncEveryN(4) + O_DIRECT|O_DSYNC + 64 KiB segments"; v.Name != want {
		t.Errorf("name %q, want %q", v.Name, want)
	}
	if g := guestName(v); g != "SyncEveryN" {
		t.Errorf("guest name %q: the guest must build the policy alone", g)
	}
	if d := variant(p, vfs.Fdatasync, defaultSegSize); d.Name != p.Name {
		t.Errorf("the default variant is named %q, want %q", d.Name, p.Name)
	}
	if safeName(v.Name) == safeName(p.Name) {
		t.Error("a variant's trial directory collides with the plain policy's")
	}
}
