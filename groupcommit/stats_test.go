package groupcommit_test

import (
	"context"
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
