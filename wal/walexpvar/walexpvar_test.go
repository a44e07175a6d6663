package walexpvar_test

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/walexpvar"
	"github.com/stretchr/testify/require"
)

// TestPublish: the published variable is the JSON of the log's Stats at
// the time it is read, histograms summarised, recovery included.
func TestPublish(t *testing.T) {
	l, err := wal.Open("/wal", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer l.Close()
	walexpvar.Publish("durawal_test", l)
	require.Panics(t, func() { walexpvar.Publish("durawal_test", l) }, "a name is published once")

	for i := range 50 {
		_, err := l.Append([]byte{byte(i), 1, 2, 3})
		require.NoError(t, err)
	}
	var got struct {
		Commits, Fsyncs  uint64
		SyncMethod       string
		Policy           string
		Segments         int
		FsyncDuration    struct{ Count, Sum, P50, P99, P999 int64 }
		CommitWaitSynced struct{ Count int64 }
		Group            struct{ Groups uint64 }
		Recovered        struct {
			Segments int
			Duration int64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(expvar.Get("durawal_test").String()), &got))
	s := l.Stats()
	require.Equal(t, uint64(50), got.Commits, "read when asked: the appends after Publish are in")
	require.Equal(t, s.Fsyncs, got.Fsyncs)
	require.Equal(t, "fdatasync", got.SyncMethod)
	require.Equal(t, "sync-every-commit", got.Policy)
	require.Equal(t, 1, got.Segments)
	require.Equal(t, int64(s.FsyncDuration.Count), got.FsyncDuration.Count)
	require.Equal(t, int64(50), got.CommitWaitSynced.Count)
	require.LessOrEqual(t, got.FsyncDuration.P50, got.FsyncDuration.P99)
	require.LessOrEqual(t, got.FsyncDuration.P99, got.FsyncDuration.P999)
	require.Positive(t, got.Group.Groups)
	require.Zero(t, got.Recovered.Segments, "a new log: no segment found")
	require.Positive(t, got.Recovered.Duration)
}
