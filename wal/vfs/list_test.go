package vfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
)

// TestOSListRefusesLinks: List names regular files, skips directories, and
// refuses any other entry (a symbolic link, even to a regular file, or a
// dangling one) with an error matching ErrNotRegular that names it.
func TestOSListRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := vfs.OS().List(dir)
	if err != nil || strings.Join(names, ",") != "b" {
		t.Fatalf("List = %q, %v; want [b], nil", names, err)
	}
	for _, target := range []string{filepath.Join(dir, "b"), filepath.Join(dir, "nowhere")} {
		link := filepath.Join(dir, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		names, err := vfs.OS().List(dir)
		if !errors.Is(err, vfs.ErrNotRegular) || !strings.Contains(err.Error(), link) {
			t.Errorf("List with a link to %s = %q, %v; want an error matching ErrNotRegular naming %s", target, names, err, link)
		}
		os.Remove(link)
	}
}
