package main

import (
	"io"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
)

// durable returns what of /f survives a power loss that keeps only synced
// bytes.
func durable(t *testing.T, m *vfs.MemFS) string {
	t.Helper()
	f, err := m.PowerLoss(vfs.DropAll()).Open("/0.wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b)
}

func TestNegativeControls(t *testing.T) {
	for _, tc := range []struct {
		mode               string
		afterOne, afterTwo string // durable after write+Sync once, twice
	}{
		{"", "a", "ab"},
		{negBroken, "", ""},
		{negLate, "", "a"},
	} {
		m := vfs.NewMem()
		fs, err := negativeFS(m, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create("/0.wal", vfs.Fdatasync)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		for i, w := range []string{"a", "b"} {
			if _, err := f.WriteAt([]byte(w), int64(i)); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, i+1)
			if _, err := f.ReadAt(b, 0); err != nil || string(b) != "ab"[:i+1] {
				t.Errorf("%q: read back %q, %v; want %q", tc.mode, b, err, "ab"[:i+1])
			}
			if n, _ := f.Size(); n != int64(i+1) {
				t.Errorf("%q: size %d, want %d", tc.mode, n, i+1)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			want := []string{tc.afterOne, tc.afterTwo}[i]
			if got := durable(t, m); got != want {
				t.Errorf("%q: durable after sync %d: %q, want %q", tc.mode, i+1, got, want)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := negativeFS(vfs.OS(), "nope"); err == nil {
		t.Error("an unknown control was accepted")
	}
}
