package main

import (
	"fmt"
	"sort"
	"time"
)

// Ack is one acknowledged commit as the guest published it: Append returned
// nil for goroutine Gid's record Seq at LSN, at guest time TimeNs.
type Ack struct {
	Gid, Seq, LSN uint64
	TimeNs        int64
}

// Rec is one record the verify boot read back after recovery.
type Rec struct {
	LSN, Gid, Seq uint64
	OK            bool // checksum and layout good
}

// Promise is what a policy's "lost on power loss" column allows an OS crash
// to lose: nothing, at most MaxLost commits, or acks younger than MaxAge.
type Promise struct {
	Text      string
	Nothing   bool
	MaxLost   int           // > 0: at most this many acked commits lost
	MaxAge    time.Duration // > 0: no lost ack older than this at the crash
	Unbounded bool          // whatever the OS had not flushed
}

// Trial is everything the host read back from one crash and verify boot.
type Trial struct {
	Policy    string
	AckCounts []uint64 // per goroutine: seqs 0..n-1 were acknowledged
	Acks      []Ack    // the acks whose LSN and time are known (ring tails)
	CrashNs   int64    // guest time the crash was triggered; 0 if never
	OpenErr   string   // non-empty: recovery Open failed
	ReopenErr string   // non-empty: append+Sync+Close+reopen after recovery failed
	Recs      []Rec
}

// Verdict is the host's judgement of one trial.
type Verdict struct {
	Acked         uint64
	Lost          uint64
	OldestLostAge time.Duration // crash time minus the oldest lost ack's time; -1 if unknown/none
	Violations    []string
}

// Judge checks a trial against the promise: Open succeeded, the recovered
// log is a clean prefix (LSNs increasing, per-goroutine seqs from 0 without
// holes, checksums good, every acked commit at or below the highest recovered
// LSN is present at the LSN its ack reported), and the lost acks are within
// what the policy promises.
func Judge(t Trial, p Promise) Verdict {
	v := Verdict{OldestLostAge: -1}
	viol := func(format string, a ...any) { v.Violations = append(v.Violations, fmt.Sprintf(format, a...)) }
	for _, n := range t.AckCounts {
		v.Acked += n
	}
	if t.CrashNs == 0 {
		viol("the crash was never triggered (no crash time in shared memory)")
	}
	if t.OpenErr != "" {
		viol("recovery Open failed: %s", t.OpenErr)
		v.Lost = v.Acked // nothing could be read back
		return v
	}
	if t.ReopenErr != "" {
		viol("append/Sync/Close/reopen after recovery failed: %s", t.ReopenErr)
	}
	recovered := make([]uint64, len(t.AckCounts)) // per gid: seqs 0..n-1 recovered
	holed := make(map[uint64]bool)
	byLSN := make(map[uint64]Rec, len(t.Recs))
	var maxLSN uint64
	for i, r := range t.Recs {
		if !r.OK {
			viol("bad checksum: record at LSN %d (gid %d seq %d)", r.LSN, r.Gid, r.Seq)
			continue
		}
		if i > 0 && r.LSN <= t.Recs[i-1].LSN {
			viol("LSNs not increasing: %d after %d", r.LSN, t.Recs[i-1].LSN)
		}
		if r.Gid >= uint64(len(recovered)) {
			viol("record at LSN %d names goroutine %d of %d", r.LSN, r.Gid, len(recovered))
			continue
		}
		if r.Seq != recovered[r.Gid] || holed[r.Gid] {
			// The clean prefix of this goroutine ends here; later records
			// of it are beyond a hole and count as not recovered.
			if !holed[r.Gid] {
				viol("hole: goroutine %d seq %d at LSN %d, expected seq %d", r.Gid, r.Seq, r.LSN, recovered[r.Gid])
			}
			holed[r.Gid] = true
			continue
		}
		recovered[r.Gid]++
		byLSN[r.LSN] = r
		maxLSN = max(maxLSN, r.LSN)
	}
	// Acks with known LSNs: at or below the recovered end each must be there.
	var lostAcks []Ack
	for _, a := range t.Acks {
		if a.Gid >= uint64(len(recovered)) {
			viol("ack names goroutine %d of %d", a.Gid, len(recovered))
			continue
		}
		if a.Seq < recovered[a.Gid] {
			r, ok := byLSN[a.LSN]
			if !ok || r.Gid != a.Gid || r.Seq != a.Seq {
				viol("ack gid %d seq %d reported LSN %d, recovered there: %+v (present %v)", a.Gid, a.Seq, a.LSN, r, ok)
			}
			continue
		}
		lostAcks = append(lostAcks, a)
		if a.LSN <= maxLSN && len(t.Recs) > 0 {
			viol("not a prefix: acked gid %d seq %d at LSN %d lost below recovered end LSN %d", a.Gid, a.Seq, a.LSN, maxLSN)
		}
	}
	for g, n := range t.AckCounts {
		if recovered[g] < n {
			v.Lost += n - recovered[g]
		}
	}
	sort.Slice(lostAcks, func(i, j int) bool { return lostAcks[i].TimeNs < lostAcks[j].TimeNs })
	if len(lostAcks) > 0 && t.CrashNs != 0 {
		v.OldestLostAge = time.Duration(t.CrashNs - lostAcks[0].TimeNs)
	}
	if uint64(len(lostAcks)) < v.Lost {
		// Lost acks older than the ring tail: their time is unknown, so
		// they are at least as old as the oldest known one.
		viol("%d lost acks are older than the published ring tail (ages unknown)", v.Lost-uint64(len(lostAcks)))
	}
	switch {
	case p.Nothing && v.Lost > 0:
		viol("promise %q broken: %d acknowledged commits lost; oldest lost %s before the crash: %s", p.Text, v.Lost, v.OldestLostAge, describe(lostAcks, t.CrashNs))
	case p.MaxLost > 0 && v.Lost > uint64(p.MaxLost):
		viol("promise %q broken: %d acknowledged commits lost (> %d): %s", p.Text, v.Lost, p.MaxLost, describe(lostAcks, t.CrashNs))
	case p.MaxAge > 0 && v.OldestLostAge > p.MaxAge:
		viol("promise %q broken: a lost ack is %s old at the crash (> %s): %s", p.Text, v.OldestLostAge, p.MaxAge, describe(lostAcks, t.CrashNs))
	}
	return v
}

// describe prints the oldest few lost acks as raw evidence.
func describe(lost []Ack, crashNs int64) string {
	s := ""
	for i, a := range lost {
		if i == 5 {
			s += fmt.Sprintf(" ... (%d more)", len(lost)-5)
			break
		}
		s += fmt.Sprintf(" [gid %d seq %d LSN %d acked %s before crash]", a.Gid, a.Seq, a.LSN, time.Duration(crashNs-a.TimeNs))
	}
	return s
}
