package wal_test

import (
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

// holder blocks log-segment writes (the log buffer's) while hold is set,
// until release is closed, and fails the held file's writes with fail once
// it is set.
type holder struct {
	hold    atomic.Bool
	held    atomic.Int64
	release chan struct{}
	fail    atomic.Pointer[error]
	// heldPath is the file of the first held write; fail fails its writes
	// only (not a segment preparer's).
	heldPath atomic.Pointer[string]
	// minLen is the shortest write held: above 1024 bytes (a log-buffer
	// half's write) if 0.
	minLen int
}

func (h *holder) inj() faultfs.Injector {
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		minLen := h.minLen
		if minLen == 0 {
			minLen = 1024
		}
		if op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") && op.Len > minLen && h.hold.Load() {
			h.heldPath.CompareAndSwap(nil, &op.Path)
			h.held.Add(1)
			<-h.release
		}
		if hp := h.heldPath.Load(); op.Kind == faultfs.OpWrite && hp != nil && op.Path == *hp {
			if p := h.fail.Load(); p != nil {
				return *p
			}
		}
		return nil
	})
}

// TestBufferFullWaitsCountsEveryWaitingAppend: n appends that find the log
// buffer full while its other half is still being written all wait for that
// write; each is a buffer-full wait (Stats.BufferFullWaits, Innodb_log_waits
// counts every wait), not only the first, which handed the full half off.
func TestBufferFullWaitsCountsEveryWaitingAppend(t *testing.T) {
	const bufSize = 4 << 10
	h := &holder{release: make(chan struct{})}
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, h.inj()), wal.Options{BufferSize: bufSize,
		Policy: policy.BufferedInterval(time.Hour, time.Hour)})
	h.hold.Store(true)
	for l.AppendedLSN() < bufSize+bufSize/2 {
		_, err := l.Append(payload(0, 200))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.held.Load() == 1 }, 5*time.Second, time.Millisecond)
	for l.AppendedLSN()+232 <= 2*bufSize {
		_, err := l.Append(payload(1, 200))
		require.NoError(t, err)
	}
	const n = 5
	var wg sync.WaitGroup
	var waiting atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waiting.Add(1)
			_, err := l.Append(payload(100+i, 200))
			require.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool { return waiting.Load() == n }, 5*time.Second, time.Millisecond)
	before := l.AppendedLSN()
	require.Eventually(t, func() bool { return l.Stats().BufferFullWaits >= uint64(n) }, 5*time.Second, time.Millisecond,
		"all %d wait for the other half's write", n)
	require.Equal(t, before, l.AppendedLSN(), "none of the %d appended: they wait", n)
	bfw := l.Stats().BufferFullWaits
	h.hold.Store(false)
	close(h.release)
	wg.Wait()
	require.NoError(t, l.Close())
	require.Equal(t, uint64(n), bfw, "every append that waited for the other half's write is a buffer-full wait")
}
