package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestQuick runs one short round of both stores and checks the table has a
// row for each with a positive rate.
func TestQuick(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 1, 500*time.Millisecond, 4, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if !strings.Contains(out.String(), "| "+s.name+" | ") {
			t.Fatalf("no row for %s in:\n%s", s.name, out.String())
		}
	}
	if strings.Contains(out.String(), "| 0 [") {
		t.Fatalf("a store committed nothing:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
