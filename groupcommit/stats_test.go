package groupcommit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/durawal/durawal/groupcommit"
)

// TestSyncGroupsCountsChosenSyncs: a FlushFunc that syncs every 4th group on
// its own (wal under SyncEveryN(4)) although every commit needs only
// Written: SyncGroups counts those groups, and GroupSizeHistTotal is
// callable on the value Stats returns.
func TestSyncGroupsCountsChosenSyncs(t *testing.T) {
	var pos, written, synced, groups uint64
	flush := func(need groupcommit.Level) (uint64, uint64, error) {
		written = pos
		groups++
		if need == groupcommit.Synced || groups%4 == 0 {
			synced = written
		}
		return written, synced, nil
	}
	q, err := groupcommit.New(flush, groupcommit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		pos += 10
		if err := q.Wait(context.Background(), pos, groupcommit.Written); err != nil {
			t.Fatal(err)
		}
	}
	if s := q.Stats(); s.Groups != 40 || s.SyncGroups != 10 || q.Stats().GroupSizeHistTotal() != 40 || s.Commits != 40 {
		t.Fatalf("Groups %d SyncGroups %d hist total %d Commits %d; want 40, 10, 40, 40",
			s.Groups, s.SyncGroups, s.GroupSizeHistTotal(), s.Commits)
	}
}

// TestOnGroup: OnGroup is called once per successful group, with the size
// GroupSizeHist counts and the level the group reached, and may read the
// queue's Stats (it runs with no lock held).
func TestOnGroup(t *testing.T) {
	f := &fakeLog{}
	var calls, sizes, synced uint64
	var q *groupcommit.Queue
	q = newQueue(t, f, groupcommit.Options{})
	q.OnGroup(func(size uint64, level groupcommit.Level) {
		_ = q.Stats() // would deadlock if called under the queue's lock
		calls++       // flushes never overlap: no race
		sizes += size
		if level == groupcommit.Synced {
			synced++
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				need := groupcommit.Written
				if (w+i)%2 == 0 {
					need = groupcommit.Synced
				}
				if err := q.Wait(context.Background(), f.append(8), need); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := q.Stats()
	if calls != s.GroupSizeHistTotal() || synced != s.SyncGroups || calls == 0 {
		t.Fatalf("OnGroup calls %d, synced %d; GroupSizeHistTotal %d, SyncGroups %d", calls, synced, s.GroupSizeHistTotal(), s.SyncGroups)
	}
	if mean := float64(sizes) / float64(calls); mean != s.GroupSizeMean {
		t.Fatalf("mean OnGroup size %v, GroupSizeMean %v", mean, s.GroupSizeMean)
	}
}
