package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestServesMetricsUnderLoad: two scrapes of the example's /metrics, with
// the example's load running between them, show the fsync histogram's
// count moving; /debug/vars serves the log's summary.
func TestServesMetricsUnderLoad(t *testing.T) {
	l, err := wal.Open(t.TempDir(), wal.Options{Policy: policy.SyncEveryCommit(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer l.Close()
	srv := httptest.NewServer(newHandler(l, "test"))
	defer srv.Close()

	// Before any load only Open's syncs are counted (one per installed
	// segment), so the count is known exactly.
	base := l.Stats().Fsyncs
	require.NoError(t, testutil.ScrapeAndCompare(srv.URL+"/metrics", countText(base), "durawal_wal_fsyncs_total"))

	ctx, cancel := context.WithCancel(t.Context())
	load(ctx, l, 4, 0)
	require.Eventually(t, func() bool { return l.Stats().Fsyncs > base+50 }, 10*time.Second, time.Millisecond)
	cancel()
	require.Error(t, testutil.ScrapeAndCompare(srv.URL+"/metrics", countText(base), "durawal_wal_fsyncs_total"), "the count moved")

	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `durawal_wal_fsync_duration_seconds_bucket{log="test",le="+Inf"}`)
	require.Contains(t, string(body), "go_goroutines")

	resp, err = http.Get(srv.URL + "/debug/vars")
	require.NoError(t, err)
	var vars map[string]struct{ Commits, Fsyncs uint64 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&vars))
	resp.Body.Close()
	require.Greater(t, vars["test"].Fsyncs, base+50)
}

func countText(n uint64) io.Reader {
	return strings.NewReader(`
# HELP durawal_wal_fsyncs_total Successful segment syncs (fdatasync or fsync).
# TYPE durawal_wal_fsyncs_total counter
durawal_wal_fsyncs_total{log="test"} ` + strconv.FormatUint(n, 10) + "\n")
}
