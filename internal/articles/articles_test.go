package articles

import (
	"strings"
	"testing"
)

func TestCite(t *testing.T) {
	for _, a := range All {
		c := a.Cite()
		for _, want := range []string{a.ID, a.Language, a.Measured} {
			if !strings.Contains(c, want) {
				t.Errorf("%s: citation %q lacks %q", a.ID, c, want)
			}
		}
	}
	if got, want := A001.Cite(), `001 — "appendfsync always/everysec/no"; Chinese, bigywater.tech (Redis series, no. 64), 2026; measured Redis 8.10.2, macOS SSD`; got != want {
		t.Errorf("A001.Cite() = %q, want %q", got, want)
	}
	if got := A000.Cite(); !strings.Contains(got, "untitled (on innodb_flush_log_at_trx_commit") || !strings.Contains(got, "site not named, year not stated") {
		t.Errorf("A000.Cite() = %q: an untitled article is named by its subject, and missing facts are said to be missing", got)
	}
}
