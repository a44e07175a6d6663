package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/durawal/durawal/bench/peers/internal/host"
)

// recoveryRun is one timed recovery: open the log as the library's recovery
// does and read every record.
type recoveryRun struct {
	Lib       string  `json:"lib"`
	Round     int     `json:"round"`
	Bytes     int64   `json:"log_bytes"` // payload bytes written
	Written   int     `json:"records_written"`
	Recovered int     `json:"records_recovered"`
	Seconds   float64 `json:"open_and_read_seconds"`
	Err       string  `json:"error,omitempty"`
}

// fillLog writes n records into dir for l and returns how long it took.
func fillLog(l *lib, dir string, n, size int) (time.Duration, error) {
	t0 := time.Now()
	err := l.fill(dir, n, record(size, 0, 0))
	return time.Since(t0), err
}

// timeReplay opens and reads the log in dir, counting records.
func timeReplay(l *lib, dir string) (int, time.Duration, error) {
	dropCaches()
	t0 := time.Now()
	n, err := l.replay(dir, func([]byte) {})
	return n, time.Since(t0), err
}

// dropCaches asks the kernel to drop the page cache so replay reads the
// disk; it needs root and silently does nothing otherwise. It reports
// whether it worked.
func dropCaches() bool {
	host.SyncAll()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200) == nil
}

// tornResult is what a library did with a log whose last record was cut in
// half.
type tornResult struct {
	Lib       string `json:"lib"`
	Written   int    `json:"records_written"`
	Recovered int    `json:"records_recovered"`
	Cut       string `json:"cut"` // how the tail was cut
	Outcome   string `json:"outcome"`
	Err       string `json:"error,omitempty"`
}

// tornTail commits n records durably, closes the log, cuts the last record
// in half (the file ends mid-record, or for a preallocated file the second
// half and everything after it are zero, as after a torn write), reopens
// and classifies what the library returns.
func tornTail(l *lib, dir string, n, size int) tornResult {
	r := tornResult{Lib: l.name, Written: n}
	defer os.RemoveAll(dir)
	lg, err := l.open(dir, durable)
	if err != nil {
		r.Outcome, r.Err = "setup failed", err.Error()
		return r
	}
	recs := make([][]byte, n)
	for i := range n {
		recs[i] = record(size, 0, i)
		if err := lg.Append(recs[i]); err != nil {
			lg.Close()
			r.Outcome, r.Err = "setup failed", err.Error()
			return r
		}
	}
	if err := lg.Close(); err != nil {
		r.Outcome, r.Err = "setup failed", err.Error()
		return r
	}
	cut, err := cutLastRecord(dir, recs[n-1])
	if err != nil {
		r.Outcome, r.Err = "setup failed", err.Error()
		return r
	}
	r.Cut = cut
	var got [][]byte
	r.Recovered, err = l.replay(dir, func(rec []byte) { got = append(got, bytes.Clone(rec)) })
	r.Recovered = len(got)
	if err != nil {
		r.Err = err.Error()
	}
	bad := -1
	for i, rec := range got {
		if i >= n || !bytes.Equal(rec, recs[i]) {
			bad = i
			break
		}
	}
	switch {
	case bad >= 0:
		r.Outcome = fmt.Sprintf("GARBAGE: record %d returned with wrong bytes", bad+1)
	case err != nil && len(got) == 0:
		r.Outcome = "error on open/read, nothing returned"
	case err != nil:
		r.Outcome = fmt.Sprintf("error after %d good records", len(got))
	case len(got) == n-1:
		r.Outcome = "torn record dropped, no error"
	case len(got) == n:
		r.Outcome = "torn record returned intact (tear not in the record?)"
	default:
		r.Outcome = fmt.Sprintf("%d intact records lost besides the torn one", n-1-len(got))
	}
	return r
}

// cutLastRecord finds the file holding last (its unique tag) and cuts it in
// the middle of last's payload.
func cutLastRecord(dir string, last []byte) (string, error) {
	tag := last[:bytes.IndexByte(last, '|')+1]
	var path string
	var off int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if i := bytes.LastIndex(b, tag); i >= 0 {
			path, off = p, i
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if path == "" {
		return "", errors.New("last record not found in any file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	at := off + len(last)/2
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	name, _ := filepath.Rel(dir, path)
	if end == len(b) {
		return fmt.Sprintf("%s truncated to %d bytes (mid-record)", name, at), os.Truncate(path, int64(at))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, end-at), int64(at)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (preallocated) zeroed from %d to %d (mid-record to end of data)", name, at, end), f.Sync()
}
