package wal_test

// The synced LSN: the log never reports or serves as durable what a power
// loss could still take.

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestSyncEveryOneCommitWokenBySealBeforeItsSync: policy.SyncEveryN(1) is
// documented as "SyncEveryCommit's durability": a commit returns after the
// write of a group that also syncs, and a failed sync fails the group's
// commits. But the roll's background seal ends with q.Advance(written,
// synced) (roll.go sealInBackground), which wakes every follower waiting
// for the write, and written may already include a group whose leader has
// written it and waits for syncMu to sync it. That follower returns nil; the
// leader's sync then fails, and a power loss takes the record whose commit
// returned nil.
func TestSyncEveryOneCommitWokenBySealBeforeItsSync(t *testing.T) {
	const segSize = 16 << 10
	room := int64(segSize - segHeader - 24) // header, end/link frame
	var (
		armed       atomic.Bool
		a0Held      = make(chan struct{})
		releaseA0   = make(chan struct{})
		a0Once      sync.Once
		succPath    atomic.Pointer[string]
		linkSync    = make(chan struct{})
		linkOnce    sync.Once
		succSyncs   atomic.Int32
		doneCount   atomic.Int32          // commits of R1/R2 that returned nil
		oneDone     = make(chan struct{}) // closed when the first of them returns nil
		failedSync  atomic.Bool
		logp        atomic.Pointer[wal.Log]
		firstWrites atomic.Int32
	)
	seg0 := "/00000000000000000000.wal"
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		switch op.Kind {
		case faultfs.OpWrite:
			if firstWrites.Add(1) == 1 { // A0's frame write
				a0Once.Do(func() { close(a0Held) })
				<-releaseA0
				return nil
			}
			if p := succPath.Load(); p != nil && op.Path == *p && op.Offset >= 32 {
				// The frames of the roll's group: let the seal
				// get as far as its link's sync first.
				select {
				case <-linkSync:
				case <-time.After(5 * time.Second):
				}
			}
		case faultfs.OpRename:
			p := op.Path
			succPath.CompareAndSwap(nil, &p)
		case faultfs.OpSync:
			if strings.HasSuffix(op.Path, seg0) { // the link's sync (a handle opened by name)
				linkOnce.Do(func() { close(linkSync) })
				l := logp.Load()
				for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if l.WrittenLSN() > l.AppendedLSN()-1 { // the group's frames are written
						break
					}
				}
				return nil
			}
			if p := succPath.Load(); p != nil && op.Path == *p {
				if succSyncs.Add(1) == 1 {
					return nil // the seal's sync of the header
				}
				// The group leader's own sync: fail it, if a commit
				// of the group has already returned.
				select {
				case <-oneDone:
					failedSync.Store(true)
					return faultfs.ErrInjected
				case <-time.After(time.Second):
				}
			}
		}
		return nil
	})
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: segSize, Policy: policy.SyncEveryN(1)})
	logp.Store(l)
	defer l.Close()
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseA0) }) }
	defer release() // before Close: a failed check must not leave A0 held
	for i := 0; room-int64(l.AppendedLSN()) > 1000; i++ {
		_, err := l.Append(payload(i, 200))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return l.Stats().Prepare.Prepared == 2 }, 5*time.Second, time.Millisecond)
	armed.Store(true)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // A0: the last record of segment 0; its write is held
		defer wg.Done()
		_, err := l.Append(payload(1000, 200))
		require.NoError(t, err)
	}()
	<-a0Held
	type result struct {
		lsn wal.LSN
		rec []byte
		err error
	}
	results := make([]result, 2)
	recs := [][]byte{payload(1001, 1500), payload(1002, 200)} // R1 rolls, R2 follows
	for i := range recs {
		wg.Add(1)
		before := l.AppendedLSN()
		go func() {
			defer wg.Done()
			lsn, err := l.Append(recs[i])
			results[i] = result{lsn, recs[i], err}
			if err == nil && doneCount.Add(1) == 1 {
				close(oneDone)
			}
		}()
		require.Eventually(t, func() bool { return l.AppendedLSN() > before }, 5*time.Second, time.Millisecond)
		// Queued as a waiter: A0 and the appends so far are inside the
		// group-commit queue's Wait (it counts them under the lock it
		// releases only to wait).
		require.Eventually(t, func() bool { return l.Stats().Group.Active == i+2 }, 5*time.Second, time.Millisecond)
	}
	release()
	wg.Wait()
	require.Positive(t, l.Stats().Rolls, "R1 rolled")

	img := mem.PowerLoss(vfs.DropAll())
	got, err := recoverImage(t, img, logDir, wal.Options{SegmentSize: segSize})
	require.NoError(t, err)
	have := map[wal.LSN]bool{}
	for _, lsn := range got.lsns {
		have[lsn] = true
	}
	for i, r := range results {
		t.Logf("R%d at LSN %d: err %v; in the power-loss image: %v", i+1, r.lsn, r.err, have[r.lsn])
		if r.err == nil && !have[r.lsn] {
			t.Errorf("SyncEveryN(1) commit of R%d (LSN %d) returned nil, but a power loss lost it (the group's sync failed: %v; SyncedLSN %d)",
				i+1, r.lsn, failedSync.Load(), l.SyncedLSN())
		}
	}
}

// TestReadOnlyLogRefusesDurableOnly: a Log opened with OpenReadOnly beside
// a live writer recovers what the writer has written to the OS, synced or
// not, and cannot tell the two apart: a DurableOnly Reader there would serve
// records a power loss takes (it did, before NewReader refused it). Shown
// first on the image, then the refusal.
func TestReadOnlyLogRefusesDurableOnly(t *testing.T) {
	mem := vfs.NewMem()
	w := openLog(t, mem, wal.Options{Policy: policy.SyncNever()})
	defer w.Close()
	for i := range 4 {
		_, err := w.Append(payload(i, 100))
		require.NoError(t, err)
	}
	require.NoError(t, w.Sync())
	for i := 4; i < 10; i++ { // written, never synced
		_, err := w.Append(payload(i, 100))
		require.NoError(t, err)
	}
	require.Less(t, w.SyncedLSN(), w.WrittenLSN())

	ro, err := wal.OpenReadOnly(logDir, wal.Options{FS: mem})
	require.NoError(t, err)
	defer ro.Close()
	// What the read-only Log reads includes records a power loss takes.
	got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), logDir, wal.Options{})
	require.NoError(t, err)
	require.Less(t, len(got.lsns), 10, "the power-loss image lost the unsynced records")
	require.Equal(t, w.WrittenLSN(), ro.SyncedLSN(), "the read-only Log's synced LSN is the recovered end")

	_, err = ro.NewReader(0, wal.DurableOnly)
	require.ErrorIs(t, err, wal.ErrReadOnly)
	r, err := ro.NewReader(0) // without DurableOnly: every record written to the OS
	require.NoError(t, err)
	n := 0
	for {
		_, _, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 10, n)
	require.NoError(t, r.Close())
}

// TestSyncedLSNNotAboveWrittenAfterCloseODsync: under a write-through
// method every writeAt advances the synced LSN to the end of what it wrote
// (flush.go writeAt), the end frame Close writes too (wal.go writeEnd), and
// writeEnd then lowers only the written LSN: after Close, SyncedLSN is
// above WrittenLSN and AppendedLSN, claiming a durable frame that does not
// exist.
func TestSyncedLSNNotAboveWrittenAfterCloseODsync(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{Policy: policy.SyncEveryCommit(), SyncMethod: vfs.ODsync})
	_, err := l.Append(payload(1, 100))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.LessOrEqual(t, l.SyncedLSN(), l.WrittenLSN(), "SyncedLSN %d, WrittenLSN %d, AppendedLSN %d after Close",
		l.SyncedLSN(), l.WrittenLSN(), l.AppendedLSN())
	st := l.Stats()
	require.LessOrEqual(t, st.SyncedLSN, st.AppendedLSN, "Stats after Close")
}
